import t from 'tap';
import { parseAuthorizationDetails, validUntil } from '../../src/banks/consent/authorization-details.js';
import { bankCapacities, bankIntervals, capacitySettingsOf } from '../../src/banks/budget/capacity.js';
import { ManualClock } from '../../src/clock/clock.js';
import { checkBankBudgets } from '../../src/doctor/checks.js';
import { createConsentLink } from '../../src/links/consent/grants.js';
import { enqueueDueLinks } from '../../src/scheduler/enqueue-due.js';
import { stretchIntervals } from '../../src/scheduler/stretch.js';
import { registerApp, startBank } from '../helpers/consent-bank.js';
import { createTenant, forEachEngine, setTimeLimit, startTestApp } from '../helpers/harness.js';

/*
 * Issue 43, item 2: when a consent bank's links need more calls an interval than its budget's scheduled share
 * allows, the scheduler stretches every link's interval alike (one round's minutes) and queues no more a tick
 * than the share can sync, stalest first: no link is synced on time while others wait for ever, and
 * `next_sync_at` says when the next sync really comes. `svc doctor`, `svc status` and the console say the
 * bank's effective interval.
 */
setTimeLimit(t, 240_000);

const LINKS = 12;
const MINUTE = 60_000;

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  // A 10-minute interval and a bank allowing 5 calls a minute (4 scheduled): 12 links × 5 calls a sync need
  // 60 calls an interval, the share allows 40: a round takes 15 minutes.
  const app = await startTestApp(t, engine, {
    clock: new ManualClock(Date.now()),
    config: {
      scheduler: { syncIntervalMinutes: 10 },
      banks: { budgets: { bancoabierto: { perMinute: 5 } } },
    },
  });
  const tenant = await createTenant(app);
  const registration = await registerApp(fixture, app);
  const details = parseAuthorizationDetails([
    { type: 'Accounts', actions: ['ReadAccounts', 'ReadBalances', 'ReadTransactions'] },
  ])!;
  const ids: string[] = [];
  for (let i = 0; i < LINKS; i++) {
    const now = app.clock.now();
    const link = await app.db.transaction((trx) =>
      createConsentLink(
        trx,
        { orgId: tenant.orgId, mode: 'test', actor: 'test' },
        {
          bank_id: 'bancoabierto',
          holder_type: 'individual',
          consent_version: 'stretch',
          consent_text_hash: 'a'.repeat(64),
          subject: `1111111${i}-1`,
        },
        {
          consentClientId: registration.id,
          clientId: registration.client_id,
          grantId: `grant-${i}`,
          authorizationDetails: details,
          expiresAt: validUntil(details),
          accessToken: `token-${i}`,
          accessTokenExpiresAt: now + 600_000,
          refreshToken: `refresh-${i}`,
        },
        { secrets: app.services.secrets, syncIntervalMs: 10 * MINUTE, consentExpiryWarningDays: 7 },
        now,
        { announce: false },
      ),
    );
    ids.push(link.id);
  }
  await app.db.knex('refresh_intents').delete();
  await app.db.knex('jobs').delete();
  // Every link due, the first made the stalest; the bank's syncs measured at 5 calls (A + 1 for A = 4).
  for (const [i, id] of ids.entries())
    await app.db
      .knex('links')
      .where({ id })
      .update({ next_sync_at: app.clock.now() - (LINKS - i) * 1000 });
  await app.db.knex('bank_call_budgets').insert({
    bank_id: 'bancoabierto',
    mode: 'test',
    calls_per_sync: 5,
    updated_at: app.clock.now(),
  });

  t.test('every link waits alike: one round every 15 minutes, stalest first', async (t) => {
    const settings = capacitySettingsOf(app.config);
    const synced = new Map<string, number[]>(ids.map((id) => [id, []]));
    const order: string[] = [];
    const perTick: number[] = [];
    let truthful = true;
    for (let minute = 0; minute < 60; minute++) {
      app.clock.advance(MINUTE);
      const now = app.clock.now();
      const stretched = await stretchIntervals(app.services.db, settings, MINUTE, now);
      await enqueueDueLinks(app.services.db, now, 10 * MINUTE, MINUTE, 'enqueue-due-links', stretched);
      const jobs = await app.db.knex('jobs').where({ status: 'queued' }).select('link_id');
      perTick.push(jobs.length);
      for (const { link_id } of jobs) {
        synced.get(link_id)!.push(minute);
        order.push(link_id);
        const link = await app.db.knex('links').where({ id: link_id }).first('next_sync_at');
        if (Number(link.next_sync_at) !== now + 15 * MINUTE) truthful = false;
      }
      // The syncs ran (what they write of the link is the engine's; here the scheduler's choices are tested).
      await app.db.knex('jobs').delete();
    }
    t.ok(
      perTick.every((n) => n <= 1),
      `no more a tick than the share syncs (4 calls a minute, 5 a sync): ${perTick.join(',')}`,
    );
    t.same(order.slice(0, LINKS), ids, 'the first round takes the links stalest first');
    const counts = [...synced.values()].map((minutes) => minutes.length);
    t.ok(Math.min(...counts) >= 3, `every link synced in the hour (${counts.join(',')})`);
    t.ok(Math.max(...counts) - Math.min(...counts) <= 1, 'and alike: none more than one sync ahead');
    for (const [id, minutes] of synced) {
      const gaps = minutes.slice(1).map((m, i) => m - minutes[i]!);
      t.ok(
        gaps.every((gap) => gap >= 15 && gap <= 16),
        `${id}: synced every 15 minutes (${gaps.join(',')})`,
      );
    }
    t.ok(truthful, 'next_sync_at says the stretched interval');

    const [capacity] = await bankCapacities(app.db.reader, settings);
    t.equal(capacity!.intervalMinutes, 15);
    const budget = await app.db.knex('bank_call_budgets').where({ bank_id: 'bancoabierto' }).first();
    t.equal(Number(budget.interval_minutes), 15, 'the stretched interval is kept for the sync engine');
    const doctor = checkBankBudgets([capacity!], 10);
    t.match(doctor.detail, /every link of the bank is synced every 15 minutes instead/, 'svc doctor says it');
    const [status] = await bankIntervals(app.db.reader, app.config);
    t.same(
      status,
      {
        bank: 'bancoabierto',
        mode: 'test',
        links: LINKS,
        calls_per_sync: 5,
        configured_interval_minutes: 10,
        effective_interval_minutes: 15,
        stretched: true,
      },
      'svc status says it',
    );
  });
});
