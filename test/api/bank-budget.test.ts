import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { bankCapacities, capacitySettingsOf, CapacityWarnings } from '../../src/banks/budget/capacity.js';
import { checkBankBudgets } from '../../src/doctor/checks.js';
import { openDatabase } from '../../src/db/database.js';
import { inspectLink } from '../../src/inspect/inspect.js';
import { consentView } from '../../src/links/consent/consent-life.js';
import { buildServices } from '../../src/processes/services.js';
import { silentLogger } from '../../src/logging/logger.js';
import { drainSyncJobs, runSyncWorkers } from '../../src/sync/worker-pool.js';
import type { SyncServices } from '../../src/sync/engine.js';
import {
  WallClock,
  bankCalls,
  busiest,
  minuteOf,
  queueScheduled,
  scheduledLeft,
  untilMinuteHasLeft,
} from '../helpers/bank-budget.js';
import { consentLink, registerApp, startBank } from '../helpers/consent-bank.js';
import { waitFor } from '../helpers/cli.js';
import {
  createTenant,
  forEachEngine,
  HANG_GUARD_MS,
  setTimeLimit,
  startTestApp,
  type TestApp,
} from '../helpers/harness.js';

/*
 * The banks' limits (issue 31, item 4; docs/open-finance.md, "Bank limits"): two scheduler processes (two
 * worker pools, each with its own database handle and its own clients of the bank, sharing nothing but the
 * database) syncing consent links of one bank keep together within its budget, counted where it matters: at
 * the simulated bank, per second and per minute of its clock. Scheduled syncs stop at their share; an
 * on-demand refresh still goes through at once; a 429 with Retry-After met by one process pauses the other.
 */
setTimeLimit(t, 420_000);

// Small, to stay fast: scheduled syncs may use 60% (2 a second, 12 a minute); on demand all of it.
const BUDGET = { perSecond: 4, perMinute: 20, scheduledShare: 0.6, arrivalMarginMs: 200 };
const SCHEDULED = { perSecond: 2, perMinute: 12 };
/** A consent that reads accounts and balances only: a sync is the list and one balance per account. */
const ACTIONS = ['ReadAccounts', 'ReadBalances'];

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const app = await startTestApp(t, engine, {
    clock: new WallClock(),
    config: {
      banks: { budget: BUDGET },
      scheduler: { concurrency: 2, perBankConcurrency: 1, pollIntervalMs: 50 },
      refresh: { onlyLastCooldownMinutes: 0 },
    },
  });
  const tenant = await createTenant(app);
  const registration = await registerApp(fixture, app);
  // The other scheduler process: its own pool of connections and its own mTLS clients.
  const other = otherProcess(t, app);

  const newLinks = async (ruts: string[]) => {
    const ids: string[] = [];
    for (const rut of ruts)
      ids.push((await consentLink(fixture, app, registration, tenant.orgId, rut, ACTIONS)).linkId);
    return ids;
  };

  t.test(
    'two processes share the budget; scheduled syncs stop at their share; on demand goes first',
    async (t) => {
      const links = await newLinks([
        '11.111.111-1',
        '12.345.678-5',
        '11.111.111-1',
        '12.345.678-5',
        '11.111.111-1',
      ]);
      await asScheduledSyncs(app, links);
      // Start with most of a minute ahead, so the saturation below happens within one minute of the bank's.
      await untilMinuteHasLeft(40_000);
      const from = Date.now();

      const stop = new AbortController();
      const pools = [runSyncWorkers(app.services, stop.signal), runSyncWorkers(other, stop.signal)];
      t.teardown(async () => {
        stop.abort();
        await Promise.all(pools);
      });

      // Five syncs of four or more calls each want more than the 12 a minute scheduled syncs may use.
      const saturated = await waitFor(
        async () => (bankCalls(fixture, from).length >= SCHEDULED.perMinute ? true : undefined),
        20_000,
      );
      t.ok(saturated, 'scheduled syncs used their share of the minute');
      await sleep(2_500);
      const minute = minuteOf(from);
      t.equal(
        bankCalls(fixture, from).filter((c) => minuteOf(c.at) === minute).length,
        SCHEDULED.perMinute,
        `scheduled syncs made ${SCHEDULED.perMinute} calls in the minute, not one more`,
      );
      const unfinished = await scheduledLeft(app.db, links);
      t.ok(unfinished > 0, `${unfinished} scheduled sync(s) wait for the next minute`);

      // A person's refresh now: it may use the rest of the minute and runs beside the waiting syncs.
      const asked = Date.now();
      const refresh = await app.request('POST', '/v1/refresh_intents', {
        key: tenant.keys.sk_test.secret,
        body: { link_id: await aLinkWithoutActiveSync(app, tenant.orgId) },
      });
      t.equal(refresh.status, 200, refresh.text);
      const done = await waitFor(async () => {
        const intent = await app.db.knex('refresh_intents').where({ id: refresh.body.id }).first();
        return intent.status === 'succeeded' || intent.status === 'failed' ? intent : undefined;
      }, 15_000);
      t.equal(done?.status, 'succeeded', 'the on-demand refresh succeeded');
      const took = Date.now() - asked;
      t.ok(took < 8_000, `promptly (${took} ms), while scheduled syncs wait for the next minute`);
      t.ok(minuteOf(Date.now()) === minute, 'within the same minute');

      // Everything finishes in the next minute, and no second or minute of the bank's ever saw too many calls.
      const finished = await waitFor(
        async () => ((await scheduledLeft(app.db, links)) === 0 ? true : undefined),
        HANG_GUARD_MS + 30_000,
        250,
      );
      t.ok(finished, 'every scheduled sync finished');
      const calls = bankCalls(fixture, from);
      const perSecond = busiest(calls, 1000);
      const perMinute = busiest(calls, 60_000);
      t.ok(perSecond <= BUDGET.perSecond, `at most ${BUDGET.perSecond} calls in any second (${perSecond})`);
      t.ok(perMinute <= BUDGET.perMinute, `at most ${BUDGET.perMinute} calls in any minute (${perMinute})`);
      t.ok(calls.length > BUDGET.perMinute, `${calls.length} calls, more than one minute allows`);
      const statuses = await app.db.knex('jobs').whereIn('link_id', links).select('status', 'locked_by');
      t.ok(
        statuses.every((job) => job.status === 'succeeded'),
        'every job succeeded: waiting for the budget never fails a sync',
      );
    },
  );

  t.test('a sync that finds the budget spent waits, and inspect says so', async (t) => {
    await untilMinuteHasLeft(20_000);
    const [linkId] = await newLinks(['12.345.678-5']);
    await asScheduledSyncs(app, [linkId!]);
    await spendScheduledMinute(app);
    const before = bankCalls(fixture, 0).length;
    t.equal(await drainSyncJobs(app.services), 1);
    t.equal(bankCalls(fixture, 0).length, before, 'the bank was not called');
    const job = await app.db.knex('jobs').where({ link_id: linkId }).first();
    t.equal(job.status, 'queued', 'the job waits (it has not failed)');
    t.equal(job.attempts, 0, 'and the wait is not counted as a try');
    t.equal(Number(job.run_at), minuteOf(Date.now()) + 60_000, 'until the next minute');
    const inspection = await inspectLink(app.db.reader, linkId!, consentView(app.services, app.clock.now()));
    t.match(inspection.findings, [{ code: 'waiting_for_budget' }]);
    t.match(
      inspection.diagnosis.join('\n'),
      /waiting for the bank's budget until .*the calls of this minute are spent/,
    );
    const page = await consolePageFinding(inspection.findings);
    t.match(page, /Waiting for the bank's budget/);
  });

  t.test('a bank whose links cannot all be synced within the interval: log, metric, doctor', async (t) => {
    // The syncs above measured the bank's calls per sync; at a 240-minute interval its few links fit.
    const measured = await bankCapacities(app.db.reader, capacitySettingsOf(app.config));
    const bank = measured.find((c) => c.bankId === 'bancoabierto')!;
    t.ok(bank.callsPerSync >= 3 && bank.callsPerSync < 8, `calls per sync measured (${bank.callsPerSync})`);
    t.ok(bank.fits, 'they fit in 240 minutes');
    const metrics = await app.services.metrics.registry.getSingleMetricAsString('svc_bank_budget_load');
    t.match(
      metrics,
      /svc_bank_budget_load\{bank="bancoabierto",mode="test"\} 0\.0\d+/,
      'the metric shows the load',
    );

    // At a 15-second interval the scheduled share allows 3 calls: fewer than one sync of each link needs.
    const short = { ...capacitySettingsOf(app.config), syncIntervalMinutes: 0.25 };
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const warnings = new CapacityWarnings();
    await warnings.check(app.db.reader, short, logger, Date.now());
    await warnings.check(app.db.reader, short, logger, Date.now() + 60_000);
    t.equal(lines.length, 1, 'one warning, not one a tick');
    const line = JSON.parse(lines[0]!);
    t.equal(line.level, 40, 'a warning');
    t.equal(line.bank, 'bancoabierto');
    t.match(
      line.msg,
      /cannot all be synced within the interval at its budget: bancoabierto \(test\): \d+ links/,
    );
    const doctor = checkBankBudgets(await bankCapacities(app.db.reader, short), 0.25);
    t.equal(doctor.status, 'warn', 'svc doctor warns');
    t.match(doctor.detail, /allows 3 in 0.25 minutes/);
  });

  t.test('a 429 with Retry-After met by one process pauses the bank for the other', async (t) => {
    await untilMinuteHasLeft(15_000);
    const [limited, fine] = await newLinks(['12.345.678-5', '11.111.111-1']);
    await resetBudget(app);
    await asScheduledSyncs(app, [limited!, fine!]);
    fixture.faults.setUserFaults('12345678-5', { resourceStatus: 429, retryAfterSeconds: 3 });
    t.teardown(() => fixture.faults.setUserFaults('12345678-5', {}));
    // This process syncs the limited link only: the other's job waits until it is the other's turn.
    await app.db
      .knex('jobs')
      .where({ link_id: fine })
      .update({ run_at: Date.now() + 3_600_000 });
    const limitedAt = Date.now();
    t.equal(await drainSyncJobs(app.services), 1);
    t.match((await app.db.knex('jobs').where({ link_id: limited }).first()).last_error, /HTTP 429/);

    await app.db.knex('jobs').where({ link_id: fine }).update({ run_at: Date.now() });
    const before = bankCalls(fixture, 0).length;
    t.equal(await drainSyncJobs(other, 'other'), 1);
    t.equal(bankCalls(fixture, 0).length, before, 'the other process did not call the paused bank');
    const waiting = await app.db.knex('jobs').where({ link_id: fine }).first();
    t.equal(waiting.status, 'queued');
    t.ok(Number(waiting.run_at) >= limitedAt + 3_000, 'it waits for the Retry-After');
    t.match(waiting.last_error, /^bank_budget: .*HTTP 429/);

    await sleep(Math.max(0, Number(waiting.run_at) - Date.now()) + 50);
    fixture.faults.setUserFaults('12345678-5', {});
    await drainSyncJobs(other, 'other');
    t.equal(
      (await app.db.knex('jobs').where({ link_id: fine }).first()).status,
      'succeeded',
      'then it syncs',
    );
  });
});

/** Another scheduler process's services: the same settings and master key, a database handle of its own. */
function otherProcess(t: Test, app: TestApp): SyncServices {
  const db = openDatabase({ url: app.config.databaseUrl });
  const services = buildServices(app.config, 'scheduler', {
    db,
    clock: app.clock,
    logger: silentLogger,
    secrets: app.services.secrets,
  });
  t.teardown(async () => {
    await services.consentClients.close();
    await db.close();
  });
  return services;
}

/** The links' first syncs become scheduled ones, as the tick queues them (no refresh intent). */
async function asScheduledSyncs(app: TestApp, links: string[]): Promise<void> {
  await app.db.knex('refresh_intents').whereIn('link_id', links).delete(); // their jobs go with them
  await queueScheduled(app.db, links);
}

async function aLinkWithoutActiveSync(app: TestApp, orgId: string): Promise<string> {
  const busy = app.db.knex('jobs').whereIn('status', ['queued', 'running']).select('link_id');
  const row = await app.db.knex('links').where({ org_id: orgId }).whereNotIn('id', busy).first('id');
  return row.id;
}

/** The scheduled share of this minute, used up (as other syncs would). */
async function spendScheduledMinute(app: TestApp): Promise<void> {
  const now = Date.now();
  const minute = minuteOf(now);
  await app.db
    .knex('bank_call_budgets')
    .insert({
      bank_id: 'bancoabierto',
      mode: 'test',
      second_start: now - (now % 1000),
      second_count: 0,
      minute_start: minute,
      minute_count: SCHEDULED.perMinute,
      updated_at: now,
    })
    .onConflict(['bank_id', 'mode'])
    .merge();
}

async function resetBudget(app: TestApp): Promise<void> {
  await app.db.knex('bank_call_budgets').delete();
}

async function consolePageFinding(findings: unknown[]): Promise<string> {
  const { findingText } = await import('../../src/console/pages/links-pages.js');
  const { wordsFor } = await import('../../src/console/messages.js');
  return findings.map((f) => findingText(wordsFor('en'), f as never)).join('\n');
}
