import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { HANG_GUARD_MS, forEachEngine, linkBody } from '../helpers/harness.js';
import { installedHome, startServe, waitFor, withDatabase } from '../helpers/cli.js';
import { startReceiver } from '../helpers/receiver.js';
import { startWorkers } from '../helpers/serve-roles.js';
import {
  FAST_DISPATCHER_ENV,
  FAST_SCHEDULER_ENV,
  RAISED_LIMITS_ENV,
  TrafficLog,
  timeLimitForRounds,
  crashRounds,
  lockErrorLines,
  randomBetween,
  storeProblems,
} from '../helpers/crash.js';

/** Seconds the clients write (there is nothing to kill here): 8 by default, CRASH_ROUNDS in a soak run. */
const TRAFFIC_MS = crashRounds(8) * 1000;
const CLIENTS_PER_API = 3;
// The traffic runs for its seconds whatever the machine; the start and the settling after took 15 s idle.
timeLimitForRounds(t, TRAFFIC_MS / 1000, 1000, 120_000);

/**
 * Three `svc serve` processes on one database (on SQLite: one file): two `--roles api` on their own ports and
 * one `--roles scheduler,dispatcher`. Six clients write through both APIs at once (links created, endpoints
 * updated, refreshes, pauses, and the same Idempotency-Key sent to both APIs at the same moment) while the
 * scheduler syncs the new links and the dispatcher delivers their events. No client is ever answered 5xx or
 * shown SQLite's lock errors, no log line names them, and one key never makes two links.
 */
forEachEngine(t, async (t, engine) => {
  const began = Date.now();
  const { database, home, key } = await installedHome(t, engine);
  const receiver = await startReceiver(t);
  const logFile = (name: string) => join(home, `${name}.log`);
  const env = (name: string) => ({
    ...RAISED_LIMITS_ENV,
    ...FAST_SCHEDULER_ENV,
    ...FAST_DISPATCHER_ENV,
    SVC_LOG_LEVEL: 'warn',
    SVC_LOG_FILE: logFile(name),
    SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
  });
  const [apiA, apiB, workers] = await Promise.all([
    startServe(t, { home, args: ['--roles', 'api'], env: env('api-a') }),
    startServe(t, { home, args: ['--roles', 'api'], env: env('api-b') }),
    startWorkers(t, { home, roles: 'scheduler,dispatcher', env: env('workers') }),
  ]);
  const apis = [apiA, apiB];
  const traffic = new TrafficLog();
  const send = (api: number, method: string, path: string, body?: unknown, idempotencyKey?: string) =>
    traffic.send(apis[api]!.url, method, path, {
      key,
      body,
      headers: idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {},
    });
  const endpoint = (await send(0, 'POST', '/v1/webhook_endpoints', {
    url: receiver.url,
    enabled_events: ['*'],
  }))!.body;

  const links: string[] = [];
  const raced: { key: string; ids: string[] }[] = [];
  const deadline = Date.now() + TRAFFIC_MS;
  const client = async (api: number) => {
    while (Date.now() < deadline) {
      const link = links[randomBetween(0, links.length - 1)];
      const roll = Math.random();
      const idempotencyKey = randomBytes(8).toString('hex');
      if (roll < 0.3 || !link) {
        const created = await send(api, 'POST', '/v1/links', linkBody(), idempotencyKey);
        if (created?.status === 200) links.push(created.body.id);
      } else if (roll < 0.45) {
        // The same request with the same key to both APIs at once: one link, whoever wins.
        const body = linkBody({ external_user_id: idempotencyKey });
        const answers = await Promise.all(
          [0, 1].map((n) => send(n, 'POST', '/v1/links', body, idempotencyKey)),
        );
        raced.push({
          key: idempotencyKey,
          ids: answers.filter((a) => a?.status === 200).map((a) => a!.body.id as string),
        });
      } else if (roll < 0.65) {
        await send(api, 'PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { description: idempotencyKey });
      } else if (roll < 0.8) {
        await send(api, 'POST', '/v1/refresh_intents', { link_id: link }, idempotencyKey);
      } else {
        await send(
          api,
          'POST',
          `/v1/links/${link}/${Math.random() < 0.5 ? 'pause' : 'resume'}`,
          undefined,
          idempotencyKey,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: 2 * CLIENTS_PER_API }, (_, i) => client(i % 2)));
  const trafficMs = Date.now() - began;
  // The workers have written beside the APIs: a sync and a delivery have succeeded (on a slow machine the
  // first ones may come only now).
  await waitFor(
    () =>
      withDatabase(database.url, async (db) => {
        const [synced] = await db.knex('jobs').where({ status: 'succeeded' }).count({ n: '*' });
        const [delivered] = await db
          .knex('webhook_deliveries')
          .where({ status: 'succeeded' })
          .count({ n: '*' });
        return Number(synced!.n) > 0 && Number(delivered!.n) > 0 ? true : undefined;
      }),
    HANG_GUARD_MS,
    100,
  );
  for (const api of apis) {
    api.process.kill('SIGTERM');
    await api.exited;
  }
  await workers.stop();

  t.equal(traffic.connectionErrors, 0, `every request was answered: ${traffic.summary()}`);
  t.same(traffic.serverErrors, [], 'no client was answered 5xx');
  t.same(traffic.lockErrors, [], 'no answer names SQLITE_BUSY or a locked database');
  const logs = ['api-a', 'api-b', 'workers'].map((name) => readFileSync(logFile(name), 'utf8')).join('\n');
  const processOutput = [
    ...apis.map((api) => api.stderr() + api.stdout()),
    workers.stderr(),
    workers.stdout(),
  ];
  t.same(
    lockErrorLines([logs, ...processOutput].join('\n')),
    [],
    'no log line of the three processes names SQLITE_BUSY or a locked database',
  );
  t.same(
    raced.filter((r) => new Set(r.ids).size > 1),
    [],
    `the same key sent to both APIs at once (${raced.length} times) never made two links`,
  );

  await withDatabase(database.url, async (db) => {
    const perKey: { external_user_id: string; n: number | string }[] = await db
      .knex('links')
      .whereIn(
        'external_user_id',
        raced.map((r) => r.key),
      )
      .select('external_user_id')
      .count({ n: '*' })
      .groupBy('external_user_id');
    t.same(
      perKey.filter((row) => Number(row.n) > 1),
      [],
      'the database holds at most one link per raced key',
    );
    t.same(await storeProblems(db, home), [], 'events, intents, accounts and counters are consistent');
    const [synced] = await db.knex('jobs').where({ status: 'succeeded' }).count({ n: '*' });
    const [delivered] = await db.knex('webhook_deliveries').where({ status: 'succeeded' }).count({ n: '*' });
    t.ok(Number(synced!.n) > 0 && Number(delivered!.n) > 0, 'the scheduler and dispatcher wrote meanwhile');
    t.comment(
      `${engine}: ${traffic.answered} requests in ${trafficMs} ms beside ${Number(synced!.n)} syncs and ${Number(delivered!.n)} deliveries`,
    );
  });
});
