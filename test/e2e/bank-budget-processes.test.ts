import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  bankCalls,
  budgetAppliance,
  budgetEnv,
  busiest,
  minuteOf,
  queueScheduled,
  scheduledLeft,
  untilMinuteHasLeft,
} from '../helpers/bank-budget.js';
import { startServe, waitFor } from '../helpers/cli.js';
import { startWorkers } from '../helpers/serve-roles.js';
import { forEachEngine, setTimeLimit } from '../helpers/harness.js';

/*
 * The banks' limits across OS processes (issue 31, items 4 and 6; docs/open-finance.md, "Bank limits"): two
 * `svc serve --roles scheduler` processes and one `--roles api` on one database, syncing consent links of the
 * simulated bank, which runs in this test process (the bank boundary) and logs when each call reached it. What
 * is checked is what the bank would see: no clock second and no clock minute of its own with more calls than
 * the budget, every link synced in the end, a person's refresh served while scheduled syncs wait for their
 * share, and a 429 with Retry-After met by one process keeping both away until it passes.
 *
 * Both engines: on SQLite the processes of one box share one file (docs/architecture.md), which is what a
 * single-host operator runs with two schedulers; on PostgreSQL they could be on two hosts.
 */
setTimeLimit(t, 1_200_000);

/*
 * Small, to stay quick: scheduled syncs may use half (2 a second, 12 a minute), a person's refresh all of it.
 * Six links of 3 calls a sync or more (the accounts list and the balances) need more than the 12 a minute, so
 * they saturate their share of the first minute and finish in the second.
 */
const BUDGET = { perSecond: 4, perMinute: 24, scheduledShare: 0.5 };
const SCHEDULED = { perSecond: 2, perMinute: 12 };
const ACTIONS = ['ReadAccounts', 'ReadBalances'];
/** The sandbox user the 429 is set for (users.ts), and the one whose links keep working. */
const LIMITED_RUT = '12.345.678-5';
const FINE_RUT = '11.111.111-1';
// Long enough for both processes to meet the pause on a loaded 2-core box: which process claims the next job
// is lopsided (the one that deferred the last polls in step with it), and each deferral takes a few seconds
// to show in the logs there, so the test queues syncs one at a time for up to this minus 5 s.
const RETRY_AFTER_S = 45;

// One scheduled sync and one refresh of the bank at a time in each process: two processes, two at once.
const ENV = budgetEnv(BUDGET);

interface LogLine {
  pid: number;
  msg: string;
  job?: string;
  link?: string;
  until?: string;
}

forEachEngine(t, async (t, engine) => {
  const { installed, fixture, db, newLink: newLinkOf } = await budgetAppliance(t, engine, ACTIONS);
  const newLink = (rut: string) => newLinkOf(installed.orgId, rut);
  const scheduled = await Promise.all(
    [FINE_RUT, LIMITED_RUT, FINE_RUT, LIMITED_RUT, FINE_RUT, LIMITED_RUT].map(newLink),
  );
  const person = await newLink(FINE_RUT);
  const limited = await newLink(LIMITED_RUT);
  const spare: string[] = [];
  for (let i = 0; i < 10; i++) spare.push(await newLink(FINE_RUT));

  const lines: LogLine[] = [];
  const onLine = (line: string) => {
    try {
      const entry = JSON.parse(line) as LogLine;
      if (entry.msg?.startsWith('sync ')) lines.push(entry);
    } catch {
      // not a JSON log line
    }
  };
  const [api, first, second] = await Promise.all([
    startServe(t, { home: installed.home, args: ['--roles', 'api'], env: ENV }),
    startWorkers(t, { home: installed.home, roles: 'scheduler', env: ENV, onLine }),
    startWorkers(t, { home: installed.home, roles: 'scheduler', env: ENV, onLine }),
  ]);
  const schedulerPids = (): Set<number> =>
    new Set(
      [first!, second!].flatMap((w) => (w.state()?.children ?? []).flatMap((c) => (c.pid ? [c.pid] : []))),
    );

  t.test('two scheduler processes keep within the budget together; a refresh goes first', async (t) => {
    // Most of a bank minute ahead, so the share is spent, and the refresh asked, within one minute.
    await untilMinuteHasLeft(45_000);
    const from = Date.now();
    await queueScheduled(db, scheduled);

    const saturated = await waitFor(
      async () => (bankCalls(fixture, from).length >= SCHEDULED.perMinute ? true : undefined),
      40_000,
    );
    t.ok(saturated, 'scheduled syncs used their share of the minute');
    const minute = minuteOf(from);
    const asked = Date.now();
    t.equal(
      bankCalls(fixture, from).filter((c) => minuteOf(c.at) === minute).length,
      SCHEDULED.perMinute,
      `scheduled syncs made ${SCHEDULED.perMinute} calls in the minute, not one more`,
    );
    const perSecondScheduled = busiest(bankCalls(fixture, from), 1000);
    t.ok(
      perSecondScheduled <= SCHEDULED.perSecond,
      `both processes' scheduled syncs together: at most ${SCHEDULED.perSecond} calls in any second (${perSecondScheduled})`,
    );
    t.ok((await scheduledLeft(db, scheduled)) > 0, 'scheduled syncs wait for the next minute');

    const refresh = await api!.request('POST', '/v1/refresh_intents', {
      key: installed.key,
      body: { link_id: person },
    });
    t.equal(refresh.status, 200, refresh.text);
    const done = await waitFor(async () => {
      const intent = await api!.request('GET', `/v1/refresh_intents/${refresh.body.id}`, {
        key: installed.key,
      });
      if (intent.body.status !== 'succeeded' && intent.body.status !== 'failed') return undefined;
      return { status: intent.body.status as string, waiting: await scheduledLeft(db, scheduled) };
    }, 60_000);
    t.equal(done?.status, 'succeeded', 'the refresh asked through the API succeeded');
    t.ok(done!.waiting > 0, `ahead of the ${done!.waiting} scheduled sync(s) still waiting for the budget`);
    t.equal(minuteOf(Date.now()), minute, 'within the minute the scheduled share was spent in');
    t.comment(`the refresh took ${Date.now() - asked} ms`);

    const finished = await waitFor(
      async () => ((await scheduledLeft(db, scheduled)) === 0 ? true : undefined),
      300_000,
      500,
    );
    t.ok(finished, 'every scheduled sync finished');
    const jobs = await db
      .knex('jobs')
      .whereIn('link_id', [...scheduled, person])
      .select('status');
    t.ok(
      jobs.every((job) => job.status === 'succeeded'),
      `all ${jobs.length} syncs succeeded: waiting for the budget never failed one`,
    );
    const synced = await db.knex('links').whereIn('id', scheduled).where('sync_successes', '>=', 1);
    t.equal(synced.length, scheduled.length, 'every link synced');

    const calls = bankCalls(fixture, from);
    const perSecond = busiest(calls, 1000);
    const perMinute = busiest(calls, 60_000);
    t.ok(perSecond <= BUDGET.perSecond, `at most ${BUDGET.perSecond} calls in any second (${perSecond})`);
    t.ok(perMinute <= BUDGET.perMinute, `at most ${BUDGET.perMinute} calls in any minute (${perMinute})`);
    t.ok(
      calls.some((c) => minuteOf(c.at) > minute),
      `${calls.length} calls in all: the scheduled syncs went on in the next minute`,
    );
    const pids = schedulerPids();
    const syncedBy = new Set(lines.filter((l) => l.msg === 'sync succeeded').map((l) => l.pid));
    t.equal(pids.size, 2, 'two scheduler children');
    t.same(
      [...pids].filter((pid) => !syncedBy.has(pid)),
      [],
      `both scheduler processes synced links (pids ${[...syncedBy].join(', ')})`,
    );
  });

  t.test('a 429 with Retry-After met by one process keeps both away until it passes', async (t) => {
    fixture.faults.setUserFaults(LIMITED_RUT.replace(/\./g, ''), {
      resourceStatus: 429,
      retryAfterSeconds: RETRY_AFTER_S,
    });
    t.teardown(() => fixture.faults.setUserFaults(LIMITED_RUT.replace(/\./g, ''), {}));
    const asked = await api!.request('POST', '/v1/refresh_intents', {
      key: installed.key,
      body: { link_id: limited },
    });
    t.equal(asked.status, 200, asked.text);
    // The refresh may wait for the next minute's budget first (the first test used this one).
    const paused = await waitFor(async () => {
      const row = await db.knex('bank_call_budgets').where({ bank_id: 'bancoabierto', mode: 'test' }).first();
      return row?.paused_until != null && Number(row.paused_until) > Date.now()
        ? Number(row.paused_until)
        : undefined;
    }, 120_000);
    t.ok(paused, 'the 429 paused the bank');
    fixture.faults.setUserFaults(LIMITED_RUT.replace(/\./g, ''), {});
    const pausedUntil = paused!;
    const all = bankCalls(fixture, 0);
    const limitedAt = all[all.length - 1]!.at; // the call the bank answered 429: nothing called it since
    // The process logs the 429 once it has paused the bank and deferred its sync.
    const met = await waitFor(async () => lines.find((l) => l.link === limited), 15_000);
    t.ok(met, `scheduler child ${met?.pid} met the 429 (${met?.msg})`);
    if (!met) t.comment(JSON.stringify(lines.slice(-10)), limited, first!.stdout().slice(-3000));

    // Syncs for both processes to claim, one at a time, until each has found the bank paused.
    const deferredBy = new Set<number>();
    for (const linkId of [...spare, ...scheduled]) {
      if (deferredBy.size === 2 || Date.now() > pausedUntil - 5_000) break;
      // At a random moment of the workers' 100 ms polls: the process that deferred the last sync polls again
      // in step with it, and would win every time if the next were queued as soon as the deferral is seen.
      await sleep(Math.random() * 250);
      const [job] = await queueScheduled(db, [linkId]);
      const deferral = await waitFor(async () => {
        const line = lines.find(
          (l) => l.job === job && l.msg === "sync deferred: it waits for the bank's budget",
        );
        return line;
      }, 10_000);
      t.ok(deferral, `the sync of ${linkId} was deferred`);
      if (!deferral) break;
      t.equal(Date.parse(deferral.until!), pausedUntil, 'until the pause ends');
      deferredBy.add(deferral.pid);
    }
    t.equal(
      deferredBy.size,
      2,
      `both scheduler processes found the bank paused (${[...deferredBy].join(', ')})`,
    );
    const waiting = await db
      .knex('jobs')
      .whereIn('link_id', [...spare, ...scheduled])
      .where({ status: 'queued' })
      .select('last_error', 'run_at');
    t.ok(waiting.length >= 2, `${waiting.length} syncs wait`);
    t.ok(
      waiting.every(
        (job) => /^bank_budget: .*HTTP 429/.test(job.last_error) && Number(job.run_at) >= pausedUntil,
      ),
      "each for the bank's Retry-After",
    );

    // Then the calls resume, and none reached the bank while it was paused.
    const resumed = await waitFor(
      async () => bankCalls(fixture, pausedUntil).length > 0 || undefined,
      RETRY_AFTER_S * 1000 + 60_000,
      250,
    );
    t.ok(resumed, 'the processes call the bank again once the pause is over');
    const during = bankCalls(fixture, limitedAt + 1).filter((c) => c.at < pausedUntil);
    t.same(during, [], `no call reached the bank during the ${RETRY_AFTER_S} s pause`);
  });
});
