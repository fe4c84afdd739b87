import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { HANG_GUARD_MS, forEachEngine, linkBody } from '../helpers/harness.js';
import {
  freePort,
  installedHome,
  isRunning,
  groupIsAlive,
  killGroup,
  startServe,
  type ServeProcess,
  waitFor,
  withDatabase,
  within,
} from '../helpers/cli.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';
import {
  CRASH_SERVE_ENV,
  FAST_DISPATCHER_ENV,
  FAST_SCHEDULER_ENV,
  RAISED_LIMITS_ENV,
  TrafficLog,
  childPid,
  timeLimitForRounds,
  crashRounds,
  randomBetween,
  storeProblems,
} from '../helpers/crash.js';

const ROUNDS = crashRounds(4);
const ROLES = ['api', 'scheduler', 'dispatcher'] as const;
// A round took 6.5 s on an idle machine; the final settling may wait up to 90 s.
timeLimitForRounds(t, ROUNDS, 60_000, 180_000);

/**
 * The whole `svc serve` (supervisor and its three children) killed with `kill -9` of its process group at
 * random moments, as a systemd stop with KillMode=control-group and SIGKILL would, and started again each
 * time on the same port, while a client connects links and asks for refreshes (their syncs and webhook
 * deliveries run in the background). Each kill leaves no process behind; after the last restart all the
 * work completes: every link synced, every delivery delivered, every event received (repeats with the same
 * event id), and the store consistent.
 */
forEachEngine(t, async (t, engine) => {
  const began = Date.now();
  const { database, home, key } = await installedHome(t, engine);
  const receiver = await startReceiver(t, async (_request, response) => {
    await sleep(randomBetween(0, 40));
    response.writeHead(200);
    response.end('ok');
  });
  const port = await freePort();
  const start = () =>
    startServe(t, {
      home,
      port,
      readyTimeoutMs: 60_000,
      env: {
        ...CRASH_SERVE_ENV,
        ...RAISED_LIMITS_ENV,
        ...FAST_SCHEDULER_ENV,
        ...FAST_DISPATCHER_ENV,
        SVC_DISPATCHER_RETRY_SCHEDULE_SECONDS: '[0,1,2,2,2,2,2,2]',
        SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
      },
    });
  let serve: ServeProcess = await start();
  const endpoint = (
    await serve.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: receiver.url, enabled_events: ['*'] },
    })
  ).body;

  const traffic = new TrafficLog();
  let stopping = false;
  const linkIds: string[] = [];
  const client = (async () => {
    while (!stopping) {
      const link = linkIds[randomBetween(0, linkIds.length - 1)];
      const idempotencyKey = randomBytes(8).toString('hex');
      const [path, body] =
        link && Math.random() < 0.3
          ? ['/v1/refresh_intents', { link_id: link }]
          : ['/v1/links', linkBody({ external_user_id: idempotencyKey })];
      // Sent again with the same key until answered: the process may be down, or die while answering.
      for (let attempt = 0; attempt < 200 && !stopping; attempt++) {
        const response = await traffic.send(`http://127.0.0.1:${port}`, 'POST', path, {
          key,
          body,
          headers: { 'Idempotency-Key': idempotencyKey },
        });
        if (response) {
          if (response.status === 200 && path === '/v1/links') linkIds.push(response.body.id);
          break;
        }
        await sleep(50);
      }
      await sleep(randomBetween(10, 60));
    }
  })();

  // The kills begin once the client has a link to refresh: on a slow machine the first one could take
  // longer than the gaps between kills.
  t.ok(await waitFor(async () => (linkIds.length > 0 ? true : undefined), HANG_GUARD_MS), 'a first link');
  const everPids = new Set<number>();
  const leftBehind: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    await sleep(randomBetween(200, 1500));
    const pids = [serve.pid, ...ROLES.map((role) => childPid(home, serve.pid, role) ?? 0).filter(Boolean)];
    for (const pid of pids) everPids.add(pid);
    killGroup(serve.pid, 'SIGKILL');
    await serve.exited;
    const gone = await waitFor(async () => (pids.some(isRunning) ? undefined : true), HANG_GUARD_MS, 20);
    if (!gone) leftBehind.push(...pids.filter(isRunning));
    serve = await start();
  }
  t.same(leftBehind, [], `${ROUNDS} kill -9s of the process group left no process running`);
  stopping = true;
  await client;
  t.same(traffic.serverErrors, [], `no 5xx in ${traffic.summary()}`);
  t.ok(linkIds.length > 0, `${linkIds.length} links created through the kills`);

  const done = await waitFor(
    () =>
      withDatabase(database.url, async (db) => {
        const [jobs] = await db.knex('jobs').whereIn('status', ['queued', 'running']).count({ n: '*' });
        const [unsynced] = await db.knex('links').where('sync_successes', 0).count({ n: '*' });
        const [undelivered] = await db
          .knex('webhook_deliveries')
          .whereNot('status', 'succeeded')
          .count({ n: '*' });
        return Number(jobs!.n) + Number(unsynced!.n) + Number(undelivered!.n) === 0 ? true : undefined;
      }),
    90_000,
    250,
  );
  t.ok(done, 'after the last restart every link synced and every delivery succeeded');

  await withDatabase(database.url, async (db) => {
    const events: { id: string }[] = await db.knex('events').select('id');
    const arrived = new Set(receiver.received.map((r) => r.event?.id));
    t.same(
      events.filter((e) => !arrived.has(e.id)).map((e) => e.id),
      [],
      `each of ${events.length} events reached the receiver (${receiver.received.length - arrived.size} repeats)`,
    );
    t.ok(
      receiver.received.every(
        (r) =>
          r.headers['svc-event-id'] === r.event?.id &&
          independentlyVerified(r.body, r.headers['svc-signature'], endpoint.secret) >= 1,
      ),
      'every request, repeats included, carries its event id in body and header, signed',
    );
    t.same(await storeProblems(db, home), [], 'events, intents, accounts and counters are consistent');
    const [taken] = await db.knex('jobs').where('attempts', '>', 1).count({ n: '*' });
    t.comment(`${Number(taken!.n)} sync jobs were taken over after a kill`);
  });

  process.kill(serve.pid, 'SIGTERM');
  t.same(
    await within(serve.exited, HANG_GUARD_MS),
    { code: 0, signal: null },
    'the last serve stops cleanly',
  );
  t.notOk(groupIsAlive(serve.pid), 'and leaves no process of its group');
  t.same(
    [...everPids].filter(isRunning),
    [],
    `none of the ${everPids.size} processes of the killed serves is running`,
  );
  t.comment(`${engine}: ${ROUNDS} kills in ${Date.now() - began} ms`);
});
