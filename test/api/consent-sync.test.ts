import t, { type Test } from 'tap';

import type { UserFaults } from '../../src/consent-bank/faults.js';
import { inspectLink } from '../../src/inspect/inspect.js';
import { consentView } from '../../src/links/consent/consent-life.js';
import { findGrantRow, openGrant, saveGrantTokens } from '../../src/links/consent/grants.js';
import { appBesideBank, consentLink } from '../helpers/consent-bank.js';
import { forEachEngine, runSyncs, setTimeLimit, type TestApp, type TestTenant } from '../helpers/harness.js';

/*
 * A consent link syncs through the simulated bank's resource API, over real mTLS on loopback, as a
 * credential link syncs through its connector: accounts with balances, movements (booked and pending),
 * credit cards; the same ids at the next sync; tokens refreshed when due and stored at once; every resource
 * fault of the bank met with the error, the wait or the reason `svc links inspect` shows, and nothing of a
 * failed sync written.
 */
setTimeLimit(t, 240_000);

forEachEngine(t, async (t, engine) => {
  // The bank runs on the real clock; the app's starts there too, so the sync windows and token lives agree.
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine);

  const consentLinkOf = (rut: string, actions?: string[]) =>
    consentLink(fixture, app, registration, tenant.orgId, rut, actions).then((made) => made.linkId);

  t.test('a sync reads accounts, balances, movements and credit cards; a second keeps the ids', async (t) => {
    const linkId = await consentLinkOf('11.111.111-1');
    t.equal(await runSyncs(app), 1);
    t.equal((await latestJob(app, linkId)).last_error, null, 'the sync succeeded');
    const link = await linkRow(app, linkId);
    t.ok(link.last_synced_at, 'and says when');

    const accounts = await api(app, tenant, `/v1/accounts?link_id=${linkId}`);
    const types = accounts.map((a: { type: string }) => a.type).sort();
    t.same(
      types,
      ['checking', 'checking', 'credit_card', 'savings'],
      'checking, cuenta vista, savings, card',
    );
    const card = accounts.find((a: { type: string }) => a.type === 'credit_card');
    t.ok(card.balance.limit > 0, 'the card has its credit line');
    t.ok(card.balance.current >= 0, 'and what is owed');
    const checking = accounts.find((a: { name: string }) => a.name.startsWith('Cuenta corriente'));
    t.ok(checking.balance.available !== null, 'a deposit account has its balance');

    const before = await movementsOf(app, tenant, accounts);
    t.ok(before.length > 20, `movements read (${before.length}), across pages of the bank's lists`);
    t.ok(
      before.some((m) => !m.pending),
      'booked movements',
    );
    t.ok(
      before.some((m) => m.pending && m.account_type === 'credit_card'),
      'unbilled card charges are pending',
    );
    t.ok(
      before.some((m) => !m.pending && m.account_type === 'credit_card'),
      'billed card charges, asked with credit-cards 2.3.1 fromTransactionDate/toTransactionDate',
    );
    const today = new Date(app.clock.now()).toISOString().slice(0, 10);
    t.ok(
      before.some((m) => m.pending && m.account_type !== 'credit_card' && m.date > today),
      'scheduled entries ahead of today come through pending (accounts 2.4.2 LANCAMENTO_FUTURO)',
    );

    app.clock.advance(60_000);
    await app.db.transaction(async (trx) => {
      const { enqueueSync } = await import('../../src/jobs/jobs.js');
      const row = await trx('links').where({ id: linkId }).first();
      await enqueueSync(trx, { link: row, refreshType: 'full', now: app.clock.now() });
    });
    t.equal(await runSyncs(app), 1);
    t.equal((await linkRow(app, linkId)).last_error_code, null, 'the second sync succeeded');
    const after = await movementsOf(app, tenant, accounts);
    const ids = (list: { id: string }[]) => list.map((m) => m.id).sort();
    t.same(ids(after), ids(before), 'the same movements, with the same ids: nothing duplicated');
    t.equal(new Set(ids(after)).size, after.length, 'no movement twice');
  });

  t.test('a consent without ReadCreditCards syncs the deposit accounts only', async (t) => {
    const linkId = await consentLinkOf('12.345.678-5', ['ReadAccounts', 'ReadBalances', 'ReadTransactions']);
    await runSyncs(app);
    t.equal((await linkRow(app, linkId)).last_error_code, null);
    const accounts = await api(app, tenant, `/v1/accounts?link_id=${linkId}`);
    t.notOk(
      accounts.some((a: { type: string }) => a.type === 'credit_card'),
      'no card: the consent does not let it be read',
    );
    t.ok(accounts.length >= 2);
  });

  t.test('an access token due within a minute is refreshed first, and the new one stored', async (t) => {
    const linkId = await consentLinkOf('12.345.678-5');
    const first = openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
    await saveGrantTokens(
      app.db.knex,
      app.services.secrets,
      linkId,
      { accessToken: first.accessToken, accessTokenExpiresAt: app.clock.now() + 30_000, refreshToken: null },
      app.clock.now(),
    );
    await runSyncs(app);
    t.equal((await linkRow(app, linkId)).last_error_code, null, 'the sync succeeded');
    const stored = openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
    t.not(stored.accessToken, first.accessToken, 'a new access token is stored');
    t.ok(stored.accessTokenExpiresAt! > app.clock.now() + 60_000, 'with its new expiry');
  });

  t.test('429 with Retry-After 30 (44.444.444-4): the job waits, then fails after three tries', async (t) => {
    const linkId = await consentLinkOf('44.444.444-4');
    const started = app.clock.now();
    t.equal(await runSyncs(app), 1);
    let job = await latestJob(app, linkId);
    t.equal(job.status, 'queued', 'the job waits');
    t.equal(Number(job.run_at), started + 30_000, 'until the bank said');
    t.match(job.last_error, /^bank_unavailable: the bank rate-limited .* \(HTTP 429\) until /);
    t.equal(await runSyncs(app), 0, 'not tried again before then');
    const inspection = await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()));
    t.match(inspection.diagnosis.join('\n'), /waits until .*HTTP 429/, 'inspect says why it waits');

    app.clock.advance(30_000);
    t.equal(await runSyncs(app), 1, 'tried again when due');
    job = await latestJob(app, linkId);
    t.equal(job.status, 'queued');
    app.clock.advance(30_000);
    t.equal(await runSyncs(app), 1);
    job = await latestJob(app, linkId);
    t.equal(job.status, 'failed', 'the third refusal fails the sync');
    t.equal(job.attempts, 3);
    const link = await linkRow(app, linkId);
    t.equal(link.last_error_code, 'bank_unavailable');
    t.equal(link.status, 'active', 'a rate limit never expires a link');
    t.ok(
      Number(link.next_sync_at) >= app.clock.now() + 30_000,
      'the next sync is not before the Retry-After',
    );
    t.equal(await countOf(app, 'accounts', linkId), 0, 'nothing written');
    const diagnosis = (
      await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()))
    ).diagnosis.join('\n');
    t.match(diagnosis, /failed with bank_unavailable \(the bank rate-limited .* until /);
    // The 429 paused the bank for every sync (banks/budget/): the next tests start once it has passed.
    const budget = await app.db.knex('bank_call_budgets').where({ bank_id: 'bancoabierto' }).first();
    t.equal(Number(budget.paused_until), app.clock.now() + 30_000, "the bank's calls are paused too");
    app.clock.advance(30_000);
  });

  t.test('529 with its Retry-After: the job is due again then', async (t) => {
    const linkId = await consentLinkOf('12.345.678-5');
    await withFaults(t, '12345678-5', { resourceStatus: 529, retryAfterSeconds: 3 });
    const started = app.clock.now();
    await runSyncs(app);
    const job = await latestJob(app, linkId);
    t.equal(job.status, 'queued');
    t.equal(Number(job.run_at), started + 3_000);
    t.match(job.last_error, /HTTP 529/);
    fixture.faults.setUserFaults('12345678-5', {});
    app.clock.advance(3_000);
    await runSyncs(app);
    t.equal((await latestJob(app, linkId)).status, 'succeeded', 'and succeeds once the bank answers');
    t.ok((await countOf(app, 'accounts', linkId)) > 0);
  });

  t.test('401: one refresh and one more try, then a credential failure', async (t) => {
    const linkId = await consentLinkOf('12.345.678-5');
    const before = openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
    await withFaults(t, '12345678-5', { resourceStatus: 401 });
    await runSyncs(app);
    const link = await linkRow(app, linkId);
    t.equal(link.last_error_code, 'rejected_credentials');
    t.equal(link.consecutive_failures, 1, 'counts towards expiring the link');
    t.match(
      (await latestJob(app, linkId)).last_error,
      /HTTP 401 UNAUTHORIZED: .+\) even after a refresh/,
      "the bank's own code and words are kept",
    );
    const after = openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
    t.not(after.accessToken, before.accessToken, 'the refreshed token was stored though the sync failed');
    t.equal(await countOf(app, 'accounts', linkId), 0, 'nothing written');
  });

  t.test('403: the consent does not cover the call', async (t) => {
    const linkId = await consentLinkOf('12.345.678-5');
    await withFaults(t, '12345678-5', { resourceStatus: 403 });
    await runSyncs(app);
    t.equal((await linkRow(app, linkId)).last_error_code, 'action_required');
    const diagnosis = (
      await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()))
    ).diagnosis.join('\n');
    t.match(
      diagnosis,
      /HTTP 403 FORBIDDEN: .+: the consent does not cover it/,
      "the bank's own words are kept",
    );
    t.equal(await countOf(app, 'accounts', linkId), 0, 'nothing written');
  });

  t.test('an answer after 4.5 s (66.666.666-6) is a timeout; nothing is written', async (t) => {
    const linkId = await consentLinkOf('66.666.666-6');
    const began = Date.now();
    await runSyncs(app);
    t.ok(Date.now() - began < 4_450, 'the connector did not wait for the answer');
    t.equal((await linkRow(app, linkId)).last_error_code, 'timeout');
    t.match((await latestJob(app, linkId)).last_error, /within 4 s/);
    t.equal(await countOf(app, 'accounts', linkId), 0);
    t.equal(await countOf(app, 'movements', linkId), 0);
  });

  t.test('answers that break the schema (77.777.777-7): invalid_bank_data with its reason', async (t) => {
    const linkId = await consentLinkOf('77.777.777-7');
    await runSyncs(app);
    t.equal((await linkRow(app, linkId)).last_error_code, 'invalid_bank_data');
    const inspection = await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()));
    const job = inspection.jobs[0]!;
    t.match(job.last_error, /^invalid_bank_data: The bank's ResponseAccountList answer does not match/);
    t.match(
      inspection.diagnosis.join('\n'),
      /failed with invalid_bank_data \(The bank's ResponseAccountList answer/,
      'the diagnosis gives the reason',
    );
    t.notMatch(job.last_error, /11111111|Banco Sandbox/, 'names fields, not values');
    t.equal(await countOf(app, 'accounts', linkId), 0, 'nothing written');
    t.equal(await countOf(app, 'movements', linkId), 0);
  });

  async function withFaults(t: Test, rut: string, faults: UserFaults) {
    fixture.faults.setUserFaults(rut, faults);
    t.teardown(() => fixture.faults.setUserFaults(rut, {}));
  }
});

async function linkRow(app: TestApp, id: string) {
  return app.db.knex('links').where({ id }).first();
}

async function latestJob(app: TestApp, linkId: string) {
  return app.db.knex('jobs').where({ link_id: linkId }).orderBy('created_at', 'desc').first();
}

async function countOf(app: TestApp, table: 'accounts' | 'movements', linkId: string): Promise<number> {
  const [row] = await app.db.knex(table).where({ link_id: linkId }).count({ n: '*' });
  return Number((row as { n: number | string }).n);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function api(app: TestApp, tenant: TestTenant, path: string): Promise<any> {
  const response = await app.request('GET', path, { key: tenant.keys.sk_test.secret });
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${response.text}`);
  return response.body;
}

/** Every movement of the accounts (pending too), through the API's pages. */
async function movementsOf(
  app: TestApp,
  tenant: TestTenant,
  accounts: { id: string; type: string }[],
): Promise<{ id: string; pending: boolean; account_type: string; date: string }[]> {
  const out: { id: string; pending: boolean; account_type: string; date: string }[] = [];
  for (const account of accounts)
    for (let page = 1; ; page++) {
      const rows = await api(
        app,
        tenant,
        `/v1/accounts/${account.id}/movements?confirmed_only=false&per_page=300&page=${page}`,
      );
      for (const m of rows)
        out.push({ id: m.id, pending: m.pending, account_type: account.type, date: m.transaction_date });
      if (rows.length < 300) break;
    }
  return out;
}
