import t from 'tap';

import { endingConsentsInBulk } from '../../src/banks/health.js';
import type { CallKind } from '../../src/consent-bank/consent-bank.js';
import { enqueueSync } from '../../src/jobs/jobs.js';
import { inspectLink } from '../../src/inspect/inspect.js';
import { consentView } from '../../src/links/consent/consent-life.js';
import { syncFailed } from '../../src/links/link-states.js';
import type { LinkRow } from '../../src/links/store.js';
import { findGrantRow, openGrant, saveGrantTokens } from '../../src/links/consent/grants.js';
import { appBesideBank, consentLink, grantsAtBank, mtlsAgent } from '../helpers/consent-bank.js';
import { runCli } from '../helpers/cli.js';
import { forEachEngine, runSyncs, schedulerTick, setTimeLimit, type TestApp } from '../helpers/harness.js';

/*
 * A consent the bank ended (issue 31, item 3): revoked at the bank, or every grant gone at once. The link
 * expires at the first sync that meets it, with `consent_revoked`, one `link.expired` and the reason
 * `svc links inspect` prints; it is not scheduled again. When the bank drops every consent, the links end
 * with one reason each, and the bank is asked a bounded number of times (counted at the simulated bank).
 */
setTimeLimit(t, 300_000);

t.test(
  'a final failure expires the link at once; three in a row within a minute are a bulk loss',
  async (t) => {
    const link = { id: 'link_0', status: 'active', consecutive_failures: 0, sync_attempts: 4 } as LinkRow;
    const failure = { failuresToExpire: 3, nextSyncAt: 10 };
    t.equal(syncFailed(link, { ...failure, errorCode: 'consent_revoked' }, 1).expires, true);
    t.equal(syncFailed(link, { ...failure, errorCode: 'rejected_credentials' }, 1).expires, false);
    const expired = { ...link, status: 'expired' } as LinkRow;
    t.equal(syncFailed(expired, { ...failure, errorCode: 'consent_revoked' }, 1).expires, false, 'only once');

    const revoked = 'consent_revoked';
    t.equal(endingConsentsInBulk([revoked, revoked, revoked]), true);
    t.equal(endingConsentsInBulk([revoked, revoked]), false, 'two may be two people');
    t.equal(endingConsentsInBulk([revoked, null, revoked]), false, 'a success between ends it');
    t.equal(endingConsentsInBulk([revoked, 'bank_unavailable', revoked]), false);
  },
);

forEachEngine(t, async (t, engine) => {
  // The bank runs on the real clock; the app's starts there too, so the sync windows and token lives agree.
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine);
  const agent = mtlsAgent(t, fixture.ca);
  const grants = grantsAtBank(fixture, app, agent);
  const interval = app.config.scheduler.syncIntervalMinutes * 60_000;
  const cli = { home: app.config.home, env: { SVC_DATABASE_URL: app.config.databaseUrl } };

  /** A consent link whose first sync succeeded. */
  const syncedLink = async (rut = '11.111.111-1') => {
    const made = await consentLink(fixture, app, registration, tenant.orgId, rut);
    await runSyncs(app);
    if ((await linkRow(app, made.linkId)).last_synced_at === null) throw new Error('the first sync failed');
    return made;
  };
  const callsSince = (before: Record<CallKind, number>) => {
    const now = fixture.bank.calls();
    const diff = Object.fromEntries(
      Object.entries(now).map(([kind, n]) => [kind, n - before[kind as CallKind]]),
    ) as Record<CallKind, number>;
    return { ...diff, total: Object.values(diff).reduce((a, b) => a + b, 0) };
  };

  t.test('a grant revoked at the bank expires the link at its next sync, with why', async (t) => {
    const made = await syncedLink();
    const grant = openGrant((await findGrantRow(app.db.knex, made.linkId))!, app.services.secrets);
    // The user revokes at the bank; Grant Management is the bank's record of it.
    t.equal(await grants.revoke(made.grantId), 204, 'the bank revoked the grant');

    app.clock.advance(interval);
    t.equal(await schedulerTick(app), 1, 'the scheduled sync runs');
    const link = await linkRow(app, made.linkId);
    t.equal(link.status, 'expired', 'the link expired at the first refusal');
    t.equal(link.last_error_code, 'consent_revoked');
    t.equal(Number(link.expired_at), app.clock.now());
    const expiredEvents = await eventsOf(app, made.linkId, 'link.expired');
    t.equal(expiredEvents.length, 1, 'one link.expired');
    t.equal(JSON.parse(expiredEvents[0]!.data).last_error_code, 'consent_revoked');

    const inspection = await inspectLink(
      app.db.reader,
      made.linkId,
      consentView(app.services, app.clock.now()),
    );
    t.match(
      inspection.diagnosis[0],
      /^Expired .*: the bank says the consent was revoked \(Grant Management: revoked\) \(consent_revoked\): the user must consent again/,
      'the diagnosis says the bank revoked it',
    );
    const printed = await runCli(['links', 'inspect', made.linkId], cli);
    t.equal(printed.code, 0, printed.message);
    // The CLI wraps long lines to the terminal.
    t.match(
      printed.stdout.replace(/\s+/g, ' '),
      'the bank says the consent was revoked (Grant Management: revoked) (consent_revoked)',
    );
    for (const secret of [made.grantId, made.accessToken, grant.refreshToken!])
      t.notOk(
        printed.stdout.includes(secret) ||
          printed.stderr.includes(secret) ||
          JSON.stringify(inspection).includes(secret),
        'no grant id or token in what inspect shows',
      );

    const before = fixture.bank.calls();
    app.clock.advance(interval);
    t.equal(await schedulerTick(app), 0, 'an expired link is not scheduled again');
    t.equal(callsSince(before).total, 0, 'and the bank is not called');
    t.equal((await eventsOf(app, made.linkId, 'link.expired')).length, 1, 'still one link.expired');
  });

  t.test(
    'a refresh refused with invalid_grant ends the consent though Grant Management has it',
    async (t) => {
      const made = await syncedLink('12.345.678-5');
      // A refresh token the bank does not know, and an access token due: the sync's first call is a refresh.
      await saveGrantTokens(
        app.db.knex,
        app.services.secrets,
        made.linkId,
        { accessToken: made.accessToken, accessTokenExpiresAt: app.clock.now(), refreshToken: 'not-a-token' },
        app.clock.now(),
      );
      app.clock.advance(interval);
      await schedulerTick(app);
      const link = await linkRow(app, made.linkId);
      t.equal(link.status, 'expired');
      t.equal(link.last_error_code, 'consent_revoked');
      const job = await latestJob(app, made.linkId);
      t.equal(
        job.last_error,
        'consent_revoked: the bank refused to refresh the access token (invalid_grant): the consent was revoked or has expired (Grant Management: authorised)',
      );
    },
  );

  t.test('the bank drops every grant at once: each link ends once, the bank is asked little', async (t) => {
    const LINKS = 10;
    const made = [];
    for (let i = 0; i < LINKS; i++) made.push(await syncedLink());
    fixture.faults.setFaults({ invalidateAllGrants: true });
    t.teardown(() => fixture.faults.setFaults({}));

    const before = fixture.bank.calls();
    app.clock.advance(interval);
    t.equal(await schedulerTick(app), LINKS, 'every link was due');
    for (const { linkId } of made) {
      const link = await linkRow(app, linkId);
      t.equal(link.status, 'expired', `${linkId} expired`);
      t.equal(link.last_error_code, 'consent_revoked');
      t.equal((await eventsOf(app, linkId, 'link.expired')).length, 1, 'with one link.expired');
    }
    const reasons = new Set(
      await Promise.all(made.map(async (m) => (await latestJob(app, m.linkId)).last_error)),
    );
    t.same(
      [...reasons],
      ['consent_revoked: the bank says the consent was revoked (Grant Management: not found)'],
      'one reason for all',
    );
    // The first three links each cost a resource call (401), a refresh (invalid_grant) and a Grant
    // Management query; from then on the bank is ending consents in bulk and each link costs one query.
    // Without that, ten links would cost 30 calls.
    const calls = callsSince(before);
    t.ok(calls.total <= 3 * 3 + (LINKS - 3), `at most 16 calls to the bank (${JSON.stringify(calls)})`);
    t.equal(calls.grant_management, LINKS, 'one Grant Management query per link');
    t.ok(calls.resources + calls.token <= 3 * 2, 'resource calls and refreshes for the first three only');

    // The bank is back: a link synced now costs one query more while the run of losses is the bank's latest
    // news, and its success ends the run.
    fixture.faults.setFaults({});
    const fresh = await consentLink(fixture, app, registration, tenant.orgId, '55.555.555-5');
    const first = fixture.bank.calls();
    await runSyncs(app);
    t.equal((await linkRow(app, fresh.linkId)).last_error_code, null, 'a healthy link syncs');
    t.equal(callsSince(first).grant_management, 1, 'after one Grant Management query');
    await app.db.transaction(async (trx) => {
      const row = await trx('links').where({ id: fresh.linkId }).first();
      await enqueueSync(trx, { link: row, refreshType: 'only_last', now: app.clock.now() });
    });
    const second = fixture.bank.calls();
    await runSyncs(app);
    t.equal((await linkRow(app, fresh.linkId)).last_error_code, null);
    t.equal(callsSince(second).grant_management, 0, 'and the next sync asks no more');

    const jobs = await jobCount(app, made);
    app.clock.advance(interval);
    t.equal(await schedulerTick(app), 1, 'only the healthy link is due at the next tick');
    t.equal(await jobCount(app, made), jobs, 'no expired link is scheduled again');
    for (const { linkId } of made)
      t.equal((await eventsOf(app, linkId, 'link.expired')).length, 1, 'still one link.expired each');
  });
});

async function linkRow(app: TestApp, id: string) {
  return app.db.knex('links').where({ id }).first();
}

async function latestJob(app: TestApp, linkId: string) {
  return app.db.knex('jobs').where({ link_id: linkId }).orderBy('created_at', 'desc').first();
}

async function jobCount(app: TestApp, links: { linkId: string }[]): Promise<number> {
  const [row] = await app.db
    .knex('jobs')
    .whereIn(
      'link_id',
      links.map((l) => l.linkId),
    )
    .count({ n: '*' });
  return Number((row as { n: number | string }).n);
}

async function eventsOf(app: TestApp, linkId: string, type: string): Promise<{ data: string }[]> {
  return app.db.knex('events').where({ link_id: linkId, type }).select('data');
}
