import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { setTimeLimit, HANG_GUARD_MS, freshDatabase, linkBody, storedAttempts } from '../helpers/harness.js';
import {
  installArgs,
  mapLimit,
  runCliJson,
  startServe,
  waitFor,
  withDatabase,
  type ServeProcess,
} from '../helpers/cli.js';
import { independentlyVerified, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startWorkers } from '../helpers/serve-roles.js';
import { rutCheckDigit } from '../../src/rut/rut.js';

/**
 * Scale-out on one Postgres: two API processes, two schedulers and two dispatchers, each its own
 * `svc serve --roles …`, over LINKS sandbox links and two webhook endpoints. Time is shrunk rather than
 * moved: a sync interval of INTERVAL_SECONDS and a cron every two seconds let several real ticks pass while
 * all six processes run and compete, which a restart per tick with a moved clock would not show.
 * `npm run test:soak` runs it with the 2,000 links.
 */
const LINKS = Number(process.env.SCALE_OUT_LINKS ?? 200);
/** Scheduled syncs each link must have had after its first. */
const ROUNDS = Number(process.env.SCALE_OUT_ROUNDS ?? 2);
const INTERVAL_SECONDS = Number(process.env.SCALE_OUT_INTERVAL_SECONDS ?? 10);
const BANKS = ['bancochile', 'santander', 'bci', 'itau', 'bancoestado'];
/** Endpoint B hears only these; endpoint A hears everything. */
const B_EVENTS = ['link.created', 'link.refreshed'];

/** How long the syncs, and then the deliveries, may take: 200 links' syncs took 33 s idle. */
const SETTLE_MS = Math.max(2 * HANG_GUARD_MS, LINKS * 1000);
// Both waits at their longest, plus two minutes to start and to check.
setTimeLimit(t, 120_000 + 2 * SETTLE_MS);

if (!process.env.SVC_TEST_DATABASE_URL) {
  t.plan(
    0,
    'Postgres only (SVC_TEST_DATABASE_URL is unset): several hosts of processes share a database server, not a SQLite file',
  );
} else {
  t.test(`postgres: 2 APIs, 2 schedulers, 2 dispatchers over ${LINKS} links`, async (t) => {
    const started = Date.now();
    const database = await freshDatabase(t, 'postgres');
    const home = database.home;
    await runCliJson(t, installArgs('postgres', database.url), { home });
    const createKey = async (...limits: string[]) =>
      (
        await runCliJson<{ secret: string }>(
          t,
          ['keys', 'create', '--mode', 'test', '--type', 'secret', ...limits],
          { home },
        )
      ).secret;
    const key = await createKey(
      ...['read', 'resource_write', 'sync_write', 'webhook_deliveries'].flatMap((group) => [
        '--rate-limit',
        `${group}=1000000:100000`,
      ]),
    );
    // Default limits (read: 100 a minute, burst 20), for the burst across both API processes.
    const limitedKey = await createKey();

    const env = {
      SVC_LOG_LEVEL: 'info',
      SVC_SCHEDULER_CRON: '*/2 * * * * *',
      SVC_SCHEDULER_SYNC_INTERVAL_MINUTES: String(INTERVAL_SECONDS / 60),
      SVC_SCHEDULER_POLL_INTERVAL_MS: '200',
    };
    const quiet = { ...env, SVC_LOG_LEVEL: 'warn' };
    const syncsByPid = new Map<number, number>();
    const countSyncs = (line: string) => {
      if (!line.includes('"sync succeeded"')) return;
      const pid = Number(/"pid":(\d+)/.exec(line)?.[1]);
      syncsByPid.set(pid, (syncsByPid.get(pid) ?? 0) + 1);
    };
    const [apiA, apiB, schedulerA, schedulerB] = await Promise.all([
      startServe(t, { home, args: ['--roles', 'api'], env: quiet }),
      startServe(t, { home, args: ['--roles', 'api'], env: quiet }),
      startWorkers(t, { home, roles: 'scheduler', env, onLine: countSyncs }),
      startWorkers(t, { home, roles: 'scheduler', env, onLine: countSyncs }),
      startWorkers(t, { home, roles: 'dispatcher', env: quiet }),
      startWorkers(t, { home, roles: 'dispatcher', env: quiet }),
    ]);
    const apis: ServeProcess[] = [apiA!, apiB!];
    t.comment(`six processes up ${Date.now() - started} ms after the start`);

    const receivers: Receiver[] = [await startReceiver(t), await startReceiver(t)];
    const endpoints: { id: string; secret: string; receiver: Receiver; events: string[] }[] = [];
    for (const [i, events] of [['*'], B_EVENTS].entries()) {
      const created = await apis[i]!.request('POST', '/v1/webhook_endpoints', {
        key,
        body: { url: receivers[i]!.url, enabled_events: events },
      });
      t.equal(created.status, 200, 'webhook endpoint created');
      endpoints.push({ id: created.body.id, secret: created.body.secret, receiver: receivers[i]!, events });
    }

    // Who holds leases, sampled while the work runs: both schedulers and both dispatchers must take part.
    const jobHolders = new Set<string>();
    const deliveryHolders = new Set<string>();
    let sampling = true;
    const sampler = withDatabase(database.url, async (db) => {
      while (sampling) {
        for (const [table, holders] of [
          ['jobs', jobHolders],
          ['webhook_deliveries', deliveryHolders],
        ] as const) {
          const rows: { locked_by: string }[] = await db
            .knex(table)
            .whereNotNull('locked_by')
            .distinct('locked_by');
          for (const row of rows) holders.add(row.locked_by.split(':')[1]!);
        }
        await sleep(250);
      }
    });

    const creationStarted = Date.now();
    const statuses = await mapLimit(
      Array.from({ length: LINKS }, (_, i) => i),
      8,
      async (i) => {
        const response = await apis[i % 2]!.request('POST', '/v1/links', {
          key,
          body: linkBody({
            bank_id: BANKS[i % BANKS.length],
            credentials: { rut: rutFor(10_000_000 + i), password: 'sandbox' },
            external_user_id: `user-${i}`,
          }),
        });
        return response.status;
      },
    );
    const creationMs = Date.now() - creationStarted;
    t.same(
      statuses.filter((s) => s !== 200),
      [],
      `${LINKS} links created through both API processes in ${creationMs} ms`,
    );

    await t.test('a burst against both API processes with one key stays within its limit', async (t) => {
      const perProcess = 30;
      const burstStarted = Date.now();
      const answers = await Promise.all(
        apis.flatMap((api) =>
          Array.from({ length: perProcess }, () =>
            api.request('GET', '/v1/links?per_page=1', { key: limitedKey }).then((r) => ({
              port: api.port,
              status: r.status,
              retryAfter: r.headers.get('retry-after'),
            })),
          ),
        ),
      );
      const elapsedMs = Date.now() - burstStarted;
      // The bucket holds 20 and refills at 100 a minute; anything above this total was let through twice.
      const allowed = 20 + Math.floor((elapsedMs * 100) / 60_000);
      const ok = answers.filter((a) => a.status === 200);
      const limited = answers.filter((a) => a.status === 429);
      t.equal(ok.length + limited.length, answers.length, 'every answer is 200 or 429');
      t.ok(
        ok.length <= allowed,
        `${ok.length} of ${answers.length} requests got through in ${elapsedMs} ms (at most ${allowed})`,
      );
      t.ok(ok.length >= 20, 'the burst itself was honoured');
      t.ok(
        limited.every((a) => Number(a.retryAfter) >= 1),
        'each 429 says when to come back',
      );
      for (const api of apis) {
        t.ok(
          answers.some((a) => a.port === api.port && a.status === 429),
          `the API process on port ${api.port} refused some too`,
        );
      }
    });

    // Every link synced once at creation and then ROUNDS times by the schedulers' ticks.
    const target = 1 + ROUNDS;
    const syncWaitStarted = Date.now();
    const reached = await waitFor(
      () =>
        withDatabase(database.url, async (db) => {
          const [row] = await db.knex('links').where('sync_successes', '<', target).count({ n: '*' });
          return Number(row!.n) === 0 ? true : undefined;
        }),
      SETTLE_MS,
      1000,
    );
    t.ok(
      reached,
      `every link synced ${target} times (${Date.now() - syncWaitStarted} ms after creation ended)`,
    );
    await Promise.all([schedulerA!.stop(), schedulerB!.stop()]);

    const drainStarted = Date.now();
    const drained = await waitFor(
      () =>
        withDatabase(database.url, async (db) => {
          const [row] = await db.knex('webhook_deliveries').whereNot('status', 'succeeded').count({ n: '*' });
          return Number(row!.n) === 0 ? true : undefined;
        }),
      SETTLE_MS,
      500,
    );
    t.ok(drained, `every delivery succeeded (${Date.now() - drainStarted} ms after the schedulers stopped)`);
    sampling = false;
    await sampler;

    await t.test('no link was synced twice at once', async (t) => {
      await withDatabase(database.url, async (db) => {
        const jobs: {
          id: string;
          link_id: string;
          status: string;
          attempts: number;
          created_at: number;
          updated_at: number;
          payload: string;
        }[] = await db.knex('jobs').orderBy(['link_id', 'created_at']);
        // The schedulers stopped with the last tick's jobs perhaps still queued: those never ran.
        const unclaimed = jobs.filter((job) => job.status === 'queued' && job.attempts === 0);
        const ran = jobs.filter((job) => !unclaimed.includes(job));
        t.same(
          ran.filter((job) => job.status !== 'succeeded' || job.attempts !== 1),
          [],
          `all ${ran.length} sync jobs that ran succeeded, each claimed exactly once (${unclaimed.length} left queued)`,
        );
        // A job lives from its enqueueing to its end: a link's jobs must follow one another.
        const overlapping: string[] = [];
        for (let i = 1; i < jobs.length; i++) {
          const [previous, current] = [jobs[i - 1]!, jobs[i]!];
          if (previous.link_id === current.link_id && current.created_at < previous.updated_at)
            overlapping.push(`${previous.id} and ${current.id} of ${current.link_id}`);
        }
        t.same(overlapping, [], 'the jobs of each link never overlap in time');
        const links: { id: string; sync_successes: number; sync_attempts: number }[] = await db
          .knex('links')
          .select('id', 'sync_successes', 'sync_attempts');
        const jobsPerLink = new Map<string, number>();
        for (const job of ran) jobsPerLink.set(job.link_id, (jobsPerLink.get(job.link_id) ?? 0) + 1);
        t.same(
          links.filter(
            (link) =>
              link.sync_attempts !== jobsPerLink.get(link.id) || link.sync_successes !== link.sync_attempts,
          ),
          [],
          "each link's sync count matches its jobs: no sync was recorded twice or lost",
        );
        const refreshed = await db.knex('events').where({ type: 'link.refreshed' }).count({ n: '*' });
        t.equal(Number(refreshed[0]!.n), ran.length, 'one link.refreshed per sync');
        const ticks = new Set(
          jobs
            .filter((job) => JSON.parse(job.payload).refresh_type === 'scheduled')
            .map((job) => job.created_at),
        );
        t.comment(`${ran.length} syncs; ${ticks.size} scheduler ticks queued scheduled syncs`);
        t.ok(ticks.size >= ROUNDS, 'several ticks queued work');
      });
      t.equal(jobHolders.size, 2, `both schedulers held sync leases (pids ${[...jobHolders].join(', ')})`);
      const busy = [...syncsByPid.values()];
      t.comment(`syncs per scheduler child: ${busy.join(', ')}`);
      t.ok(busy.length === 2 && busy.every((n) => n > 0), 'both schedulers ran syncs');
    });

    await t.test(
      'no delivery was attempted twice at once, and every event reached its receivers',
      async (t) => {
        await withDatabase(database.url, async (db) => {
          const events: { id: string; type: string }[] = await db.knex('events').select('id', 'type');
          const deliveries: {
            id: string;
            event_id: string;
            endpoint_id: string;
            status: string;
            attempts: number;
          }[] = await db
            .knex('webhook_deliveries')
            .select('id', 'event_id', 'endpoint_id', 'status', 'attempts');
          const owed = events.flatMap((event) =>
            endpoints
              .filter((e) => e.events.includes('*') || e.events.includes(event.type))
              .map((e) => `${e.id} ${event.id}`),
          );
          t.same(
            deliveries.map((d) => `${d.endpoint_id} ${d.event_id}`).sort(),
            owed.sort(),
            `one delivery per event and subscribed endpoint (${owed.length} for ${events.length} events)`,
          );
          t.same(
            deliveries.filter((d) => d.status !== 'succeeded' || d.attempts !== 1),
            [],
            'each succeeded at its first attempt',
          );
          const attempts = (await storedAttempts(db)).sort(
            (a, b) => a.delivery_id.localeCompare(b.delivery_id) || a.started_at - b.started_at,
          );
          t.equal(attempts.length, deliveries.length, 'one attempt per delivery');
          const overlapping = attempts.filter(
            (a, i) =>
              i > 0 &&
              attempts[i - 1]!.delivery_id === a.delivery_id &&
              a.started_at < attempts[i - 1]!.started_at + attempts[i - 1]!.duration_ms,
          );
          t.same(overlapping, [], "no delivery's attempts overlap");
        });
        for (const endpoint of endpoints) {
          const got = new Map<string, number>();
          let unsigned = 0;
          for (const request of endpoint.receiver.received) {
            got.set(request.event?.id, (got.get(request.event?.id) ?? 0) + 1);
            // Checked against the time it arrived: the 300 s tolerance is the receiver's, at arrival.
            const valid = independentlyVerified(
              request.body,
              request.headers['svc-signature'],
              endpoint.secret,
              request.at,
            );
            if (valid !== 1) unsigned += 1;
          }
          const expected = await withDatabase(database.url, (db) =>
            db.knex('webhook_deliveries').where({ endpoint_id: endpoint.id }).pluck('event_id'),
          );
          t.same(
            expected.filter((id: string) => got.get(id) !== 1),
            [],
            `the receiver of ${endpoint.events.join(',')} got each of its ${expected.length} events exactly once`,
          );
          t.equal(got.size, expected.length, 'and nothing else');
          t.equal(unsigned, 0, 'every request carried a valid signature');
        }
        t.equal(
          deliveryHolders.size,
          2,
          `both dispatchers held delivery leases (pids ${[...deliveryHolders].join(', ')})`,
        );
      },
    );

    t.comment(`scale-out run: ${LINKS} links, ${Date.now() - started} ms in all`);
  });
}

/** A valid Chilean RUT for a number, so every created link is its own person. */
function rutFor(body: number): string {
  return `${body}-${rutCheckDigit(String(body))}`;
}
