import t from 'tap';

import type { CustomerAccount, CustomerData, CustomerEntry } from '../../src/consent-bank/customer-data.js';
import { enqueueSync } from '../../src/jobs/jobs.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import {
  appBesideBank,
  callsDuring,
  consentLink,
  scheduledSync as scheduledSyncOf,
} from '../helpers/consent-bank.js';
import { forEachEngine, runSyncs, setTimeLimit, type TestApp, type TestTenant } from '../helpers/harness.js';

/*
 * Issue 43, item 1: what a consent link's sync costs the bank, counted at the simulated bank's own call log
 * over real mTLS. The holder 11.111.111-1 has A = 4 accounts and cards (two checking accounts, a savings
 * account, a card). A first sync and an on-demand refresh read everything; a steady-state scheduled sync costs
 * at most A + 1 calls (the token refresh, one balance or limits call each) and asks for movements only where
 * a figure moved; an account the bank no longer has is noticed at once; a full pass happens at least daily.
 */
setTimeLimit(t, 300_000);

const HOLDER = '11.111.111-1';
const A = 4;
const HOUR = 3_600_000;

/** The sandbox's customers, with entries a test adds and accounts a test closes. */
class ChangingData implements CustomerData {
  private readonly base = sandboxCustomerData();
  readonly closed = new Set<string>();
  readonly added = new Map<string, CustomerEntry[]>();

  name(customer: string): string | null {
    return this.base.name(customer);
  }

  accounts(customer: string, now: number): CustomerAccount[] {
    return this.base.accounts(customer, now).filter((account) => !this.closed.has(account.id));
  }

  entries(
    customer: string,
    account: CustomerAccount,
    from: number,
    to: number,
    now: number,
  ): CustomerEntry[] {
    const extra = (this.added.get(account.id) ?? []).filter((e) => e.bookedAt >= from && e.bookedAt < to);
    return [...extra, ...this.base.entries(customer, account, from, to, now)].sort(
      (a, b) => b.bookedAt - a.bookedAt,
    );
  }

  balance(customer: string, account: CustomerAccount, now: number): { booked: number; pending: number } {
    const own = this.base.balance(customer, account, now);
    const extra = (this.added.get(account.id) ?? []).reduce((sum, e) => sum + e.amount, 0);
    return { booked: own.booked + extra, pending: own.pending };
  }

  /** A booked entry on the account, an hour ago by the bank's (real) clock. */
  book(account: CustomerAccount, amount: number, description: string): void {
    const at = Date.now() - HOUR;
    const list = this.added.get(account.id) ?? [];
    list.push({
      id: `added-${list.length}-${account.id}`,
      amount,
      currency: account.currency,
      description,
      kind: 'transfer',
      bookedAt: at,
      transactionDate: new Date(at).toISOString().slice(0, 10),
      status: 'booked',
      counterpartyRut: null,
    });
    this.added.set(account.id, list);
  }
}

forEachEngine(t, async (t, engine) => {
  const data = new ChangingData();
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine, { data });
  const interval = app.config.scheduler.syncIntervalMinutes * 60_000;

  /** The calls the bank received while `run` ran, by name (`callName`). */
  const callsOf = (run: () => Promise<unknown>) => callsDuring(fixture.bank, run);
  const total = (calls: Record<string, number>) => Object.values(calls).reduce((a, b) => a + b, 0);
  /**
   * The link's next scheduled sync: the clock moves one interval (or `hours`) on and the job the scheduler's
   * tick would queue for it runs (other tests' links are left alone).
   */
  const scheduledSync = (linkId: string, hours?: number) =>
    callsOf(async () => {
      app.clock.advance(hours === undefined ? interval + 60_000 : hours * HOUR);
      await scheduledSyncOf(t, app, linkId, tenant.orgId);
    });

  t.test('a steady-state scheduled sync costs at most A + 1 calls; the first reads everything', async (t) => {
    const { linkId } = await consentLink(fixture, app, registration, tenant.orgId, HOLDER);
    const first = await callsOf(() => runSyncs(app));
    t.ok(first['accounts list'] === 1 && first['cards list'] === 1, 'the first sync reads the lists');
    t.equal(first.transactions, 3, "and every deposit account's movements");
    t.equal(first['card transactions'], 1, "and the card's");
    const steady = await scheduledSync(linkId);
    t.equal(await lastError(app, linkId), null, 'the scheduled sync succeeded');
    t.ok(
      total(steady) <= A + 1,
      `steady state: ${total(steady)} calls ≤ A + 1 = ${A + 1} (${JSON.stringify(steady)})`,
    );
    t.notOk(steady['accounts list'] ?? steady['cards list'] ?? steady.card, 'no list, no card details');
    t.equal(steady.balances, 3, 'one balance call a deposit account');
    t.equal(steady['card limits'], 1, 'one limits call for the card');
    t.equal((await app.db.knex('accounts').where({ link_id: linkId, status: 'active' })).length, A);

    // The scheduler stretched the bank's interval (its budget is short): the sync's next_sync_at follows it.
    await app.db
      .knex('bank_call_budgets')
      .where({ bank_id: 'bancoabierto' })
      .update({ interval_minutes: 500 });
    t.teardown(() =>
      app.db.knex('bank_call_budgets').where({ bank_id: 'bancoabierto' }).update({ interval_minutes: null }),
    );
    await scheduledSync(linkId);
    const link = await app.db.knex('links').where({ id: linkId }).first();
    t.equal(
      Number(link.next_sync_at) - Number(link.last_synced_at),
      500 * 60_000,
      'next_sync_at is one stretched interval after the sync',
    );
  });

  t.test('a moved balance brings the new movement, and only that account is read', async (t) => {
    const { linkId } = await consentLink(fixture, app, registration, tenant.orgId, HOLDER);
    await runSyncs(app);
    await scheduledSync(linkId);
    const accounts = data.accounts(HOLDER.replace(/\./g, ''), Date.now());
    const checking = accounts.find((a) => a.product === 'checking')!;
    data.book(checking, -123_456, 'PAGO ADDED BY THE TEST');
    const calls = await scheduledSync(linkId);
    t.equal(calls.transactions, 1, 'movements asked for the moved account only');
    t.notOk(calls['card transactions'], 'not for the card, whose limit did not move');
    t.ok(total(calls) <= A + 2, `${total(calls)} calls ≤ A + 2`);
    const found = await movementsOf(app, tenant, linkId);
    t.ok(
      found.some((m) => m.description === 'PAGO ADDED BY THE TEST' && m.amount === -123_456),
      'the new movement is there',
    );
    t.equal(
      found.filter((m) => m.description === 'PAGO ADDED BY THE TEST').length,
      1,
      'once, whatever the overlap read again',
    );
  });

  t.test('an account closed at the bank is noticed at the next scheduled sync', async (t) => {
    const { linkId } = await consentLink(fixture, app, registration, tenant.orgId, '12.345.678-5');
    await runSyncs(app);
    await scheduledSync(linkId);
    const customer = '12345678-5';
    const before = data.accounts(customer, Date.now());
    t.ok(before.length >= 2, 'the holder has accounts to lose one of');
    const savings = before[before.length - 1]!;
    data.closed.add(savings.id);
    const noticed = await scheduledSync(linkId);
    t.equal(noticed['accounts list'], 1, 'the 404 on its balance sends the sync to the lists at once');
    const rows = await app.db.knex('accounts').where({ link_id: linkId });
    t.equal(rows.filter((r) => r.status === 'removed').length, 1, 'the closed account is removed');
    const events = await app.db.knex('events').where({ type: 'account.removed', link_id: linkId });
    t.equal(events.length, 1, 'account.removed is sent');
    const after = await scheduledSync(linkId);
    t.ok(total(after) <= before.length, `then balance-only again: ${total(after)} calls ≤ ${before.length}`);
    t.notOk(after['accounts list'], 'no list');
    data.closed.delete(savings.id);
  });

  t.test('a full pass at least daily; an on-demand refresh reads everything', async (t) => {
    const { linkId } = await consentLink(fixture, app, registration, tenant.orgId, HOLDER);
    await runSyncs(app);
    const seen: Record<string, number>[] = [];
    for (let i = 0; i < 6; i++) seen.push(await scheduledSync(linkId, 5));
    const full = seen.filter((calls) => calls['accounts list'] === 1);
    t.equal(full.length, 1, 'one of six syncs five hours apart read the lists again');
    const fullPass = full[0]!;
    t.equal(fullPass.transactions, 3, "and every account's movements");
    t.equal(fullPass['card transactions'], 1);
    t.equal(fullPass.card, 1, "and the card's details");
    t.equal(seen.indexOf(fullPass), 4, "the first sync a day (24 h) after the first sync's full read");
    const link = await app.db.knex('links').where({ id: linkId }).first();
    const grant = await app.db.knex('link_grants').where({ link_id: linkId }).first();
    t.ok(Number(grant.full_sync_at) > Number(link.created_at), 'the full pass is recorded');

    const refresh = await callsOf(async () => {
      await app.db.transaction(async (trx) => {
        const row = await trx('links').where({ id: linkId }).first();
        await enqueueSync(trx, { link: row, refreshType: 'only_last', now: app.clock.now() });
      });
      await runSyncs(app);
    });
    t.equal(refresh['accounts list'], 1, 'an on-demand refresh reads the lists');
    t.equal(refresh.transactions, 3, "and every account's movements");
  });
});

async function lastError(app: TestApp, linkId: string): Promise<string | null> {
  const row = await app.db.knex('jobs').where({ link_id: linkId }).orderBy('created_at', 'desc').first();
  return row.last_error;
}

async function movementsOf(
  app: TestApp,
  tenant: TestTenant,
  linkId: string,
): Promise<{ description: string; amount: number }[]> {
  const response = await app.request('GET', `/v1/accounts?link_id=${linkId}`, {
    key: tenant.keys.sk_test.secret,
  });
  const out: { description: string; amount: number }[] = [];
  for (const account of response.body as { id: string }[])
    for (let page = 1; ; page++) {
      const rows = await app.request(
        'GET',
        `/v1/accounts/${account.id}/movements?confirmed_only=false&per_page=300&page=${page}`,
        {
          key: tenant.keys.sk_test.secret,
        },
      );
      if (rows.status !== 200) throw new Error(`movements: ${rows.status} ${rows.text}`);
      const list = rows.body as { description: string; amount: number }[];
      out.push(...list);
      if (list.length < 300) break;
    }
  return out;
}
