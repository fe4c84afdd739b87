import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { SupervisorState } from '../../src/processes/status.js';
import { setTimeLimit, freshDatabase, linkBody, storedAttempts } from '../helpers/harness.js';
import { installArgs, runCliJson, startServe, waitFor, withDatabase } from '../helpers/cli.js';
import { startReceiver } from '../helpers/receiver.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

/** How long the database is away; `npm run test:soak` runs the full 30 s. */
const OUTAGE_SECONDS = Number(process.env.DB_OUTAGE_SECONDS ?? 8);
/** The promise: everything works again this soon after the database is back, with no restart. */
const RECOVERY_MS = 10_000;
/** A request during the outage must be answered (503) within this; a hung pool would take far longer. */
const ANSWER_WITHIN_MS = 3_000;
const LINKS_BEFORE = 6;

interface Sample {
  loop: string;
  startedAt: number;
  ms: number;
  status: number;
  retryAfter: string | null;
  code: string | null;
}

setTimeLimit(t, 180_000 + OUTAGE_SECONDS * 1000);

if (!process.env.SVC_TEST_DATABASE_URL) {
  t.plan(
    0,
    'Postgres only (SVC_TEST_DATABASE_URL is unset): SQLite is a file inside the data directory, with no server or connection to lose',
  );
} else {
  t.test('postgres: the database goes away for a while under traffic', async (t) => {
    const database = await freshDatabase(t, 'postgres');
    const home = database.home;
    await runCliJson(t, installArgs('postgres', database.url), { home });
    const raised = ['read', 'resource_write'].flatMap((group) => ['--rate-limit', `${group}=100000:10000`]);
    const key = (
      await runCliJson<{ secret: string }>(
        t,
        ['keys', 'create', '--mode', 'test', '--type', 'secret', ...raised],
        { home },
      )
    ).secret;

    // The appliance reaches Postgres only through the proxy; the test's own checks go straight to it.
    const direct = new URL(database.url);
    const proxy = await startTcpProxy(t, { host: direct.hostname, port: Number(direct.port || 5432) });
    const proxied = new URL(database.url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);

    // Held answers keep deliveries in the dispatcher's hands (in flight and queued) when the database goes,
    // with the rest still pending in the database: both kinds must come through without a wasted attempt.
    let holding = true;
    const held: (() => void)[] = [];
    const receiver = await startReceiver(t, (_request, response) => {
      const answer = () => {
        response.writeHead(200);
        response.end('ok');
      };
      if (holding) held.push(answer);
      else answer();
    });
    const release = () => {
      holding = false;
      for (const answer of held.splice(0)) answer();
    };
    t.teardown(release);

    const serve = await startServe(t, {
      home,
      env: {
        SVC_DATABASE_URL: proxied.toString(),
        SVC_LOG_LEVEL: 'warn',
        SVC_SCHEDULER_POLL_INTERVAL_MS: '200',
        SVC_DISPATCHER_ATTEMPT_TIMEOUT_MS: '60000',
      },
    });
    const hook = await serve.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: receiver.url, enabled_events: ['*'] },
    });
    t.equal(hook.status, 200, 'webhook endpoint created');

    const linkIds: string[] = [];
    for (let i = 0; i < LINKS_BEFORE; i++) {
      const created = await serve.request('POST', '/v1/links', { key, body: linkBody() });
      t.equal(created.status, 200);
      linkIds.push(created.body.id);
    }
    const synced = await waitFor(
      () =>
        withDatabase(database.url, async (db) => {
          const rows = await db.knex('links').whereIn('id', linkIds).where('sync_successes', '>=', 1);
          return rows.length === linkIds.length ? true : undefined;
        }),
      30_000,
      200,
    );
    t.ok(synced, 'the links synced before the outage');
    const expected = await withDatabase(database.url, (db) =>
      db.knex('webhook_deliveries').select('id', 'event_id'),
    );
    t.ok(expected.length >= LINKS_BEFORE * 5, `${expected.length} deliveries owed to the receiver`);
    t.ok(
      await waitFor(async () => (receiver.pending() > 0 ? true : undefined), 10_000, 20),
      'deliveries are in flight as the outage begins',
    );
    const childrenBefore = supervisorState(home, serve.pid).children;

    // Traffic: three clients in a loop, each request with a generous client deadline so a hang shows up
    // as a long request instead of blocking the test.
    const samples: Sample[] = [];
    let trafficOn = true;
    const client = async (loop: string, method: string, path: string, body?: unknown) => {
      while (trafficOn) {
        const startedAt = Date.now();
        let status = 0;
        let retryAfter: string | null = null;
        let code: string | null = null;
        try {
          const response = await fetch(serve.url + path, {
            method,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: body === undefined ? undefined : JSON.stringify(body),
            signal: AbortSignal.timeout(60_000),
          });
          status = response.status;
          retryAfter = response.headers.get('retry-after');
          const parsed = (await response.json().catch(() => null)) as {
            error?: { code?: string };
            status?: string;
          } | null;
          code = parsed?.error?.code ?? parsed?.status ?? null;
        } catch (error) {
          code = (error as Error).name;
        }
        samples.push({ loop, startedAt, ms: Date.now() - startedAt, status, retryAfter, code });
        await sleep(100);
      }
    };
    const clients = [
      client('read', 'GET', '/v1/links?per_page=5'),
      client('write', 'POST', '/v1/links', linkBody()),
      client('health', 'GET', '/health'),
    ];
    await sleep(1500);

    const downAt = Date.now();
    await proxy.down();
    t.comment(`database away at ${new Date(downAt).toISOString()} for ${OUTAGE_SECONDS} s`);
    await sleep(1000);
    // The receiver answers now: attempts in hand complete while their results cannot be written.
    release();
    await sleep(OUTAGE_SECONDS * 1000 - 1000);
    await proxy.up();
    const upAt = Date.now();

    const recoveredWithin = async (probe: () => Promise<boolean>) => {
      const at = await waitFor(
        async () => ((await probe()) ? Date.now() : undefined),
        RECOVERY_MS + 5000,
        50,
      );
      return at === undefined ? null : at - upAt;
    };
    const healthMs = await recoveredWithin(
      async () => (await serve.request('GET', '/health')).status === 200,
    );
    const deliveredMs = await recoveredWithin(() =>
      withDatabase(database.url, async (db) => {
        const [row] = await db
          .knex('webhook_deliveries')
          .where('created_at', '<', upAt)
          .whereNot('status', 'succeeded')
          .count({ n: '*' });
        return Number(row!.n) === 0;
      }),
    );
    await sleep(2000);
    trafficOn = false;
    await Promise.all(clients);

    // Sent while the database was away: all must be answered promptly; those answered before it came back
    // must be 503s.
    const sentDuring = samples.filter((s) => s.startedAt >= downAt + 200 && s.startedAt < upAt);
    const during = sentDuring.filter((s) => s.startedAt + s.ms < upAt);
    const after = samples.filter((s) => s.startedAt >= upAt);
    const firstOk = (loop: string) => {
      const ok = after.find((s) => s.loop === loop && s.status >= 200 && s.status < 300);
      return ok ? ok.startedAt + ok.ms - upAt : null;
    };
    const slowest = Math.max(...sentDuring.map((s) => s.ms));
    t.comment(
      `outage ${OUTAGE_SECONDS} s: ${during.length} requests during it (slowest ${slowest} ms); back: health ${healthMs} ms, ` +
        `read ${firstOk('read')} ms, write ${firstOk('write')} ms, deliveries ${deliveredMs} ms after the database returned`,
    );

    await t.test('requests during the outage answer 503 with Retry-After, promptly', async (t) => {
      for (const loop of ['read', 'write', 'health']) {
        t.ok(
          during.filter((s) => s.loop === loop).length >= 3,
          `${loop}: requests were made during the outage`,
        );
      }
      const wrong = during.filter((s) => s.status !== 503 || !/^[1-9]\d*$/.test(s.retryAfter ?? ''));
      t.same(wrong, [], 'every one answered 503 with a Retry-After in whole seconds');
      const envelopes = during.filter((s) => s.loop !== 'health' && s.code !== 'service_unavailable');
      t.same(envelopes, [], 'the API answers the error envelope with code service_unavailable');
      t.same(
        during.filter((s) => s.loop === 'health' && s.code !== 'unavailable'),
        [],
        'health says unavailable',
      );
      t.ok(
        slowest <= ANSWER_WITHIN_MS,
        `the slowest answer to a request sent during the outage took ${slowest} ms (at most ${ANSWER_WITHIN_MS})`,
      );
      // Requests caught in flight when connections dropped included: a 503, never a 500 or a dropped socket.
      t.same(
        samples.filter((s) => s.status === 0 || (s.status >= 500 && s.status !== 503)),
        [],
        'no request at any time failed otherwise',
      );
    });

    await t.test(`everything works again within ${RECOVERY_MS / 1000} s, without a restart`, async (t) => {
      t.ok(healthMs !== null && healthMs <= RECOVERY_MS, `health 200 after ${healthMs} ms`);
      for (const loop of ['read', 'write']) {
        const ms = firstOk(loop);
        t.ok(ms !== null && ms <= RECOVERY_MS, `${loop} requests 2xx after ${ms} ms`);
      }
      const lateFailures = after.filter(
        (s) => s.startedAt > upAt + RECOVERY_MS && (s.status < 200 || s.status >= 300),
      );
      t.same(lateFailures, [], 'no failure once recovered');
      const children = supervisorState(home, serve.pid).children;
      t.same(
        children.map((c) => ({ role: c.role, pid: c.pid, restarts: c.restarts, status: c.status })),
        childrenBefore.map((c) => ({ role: c.role, pid: c.pid, restarts: 0, status: 'running' })),
        'the same api, scheduler and dispatcher processes, never restarted',
      );
      // The scheduler too: a link created after the outage gets its first sync.
      const created = await serve.request('POST', '/v1/links', { key, body: linkBody() });
      t.equal(created.status, 200);
      const syncedAfter = await waitFor(
        () =>
          withDatabase(database.url, async (db) => {
            const link = await db.knex('links').where({ id: created.body.id }).first('sync_successes');
            return link?.sync_successes >= 1 ? true : undefined;
          }),
        RECOVERY_MS,
        100,
      );
      t.ok(syncedAfter, 'a new link syncs');
    });

    await t.test('no webhook attempt is used up by the outage and every event arrives', async (t) => {
      t.ok(
        deliveredMs !== null && deliveredMs <= RECOVERY_MS,
        `every delivery succeeded ${deliveredMs} ms after the database returned`,
      );
      await withDatabase(database.url, async (db) => {
        const owed = await db.knex('webhook_deliveries').whereIn(
          'id',
          expected.map((d) => d.id),
        );
        t.same(
          owed.filter((d) => d.status !== 'succeeded' || d.attempts !== 1),
          [],
          'each delivery owed at the outage succeeded at its first attempt',
        );
        const attempts = await storedAttempts(db);
        t.same(
          attempts.filter((a) => a.status_code !== 200 || a.error !== null || a.number !== 1),
          [],
          'no attempt failed, none numbered beyond 1',
        );
      });
      const arrived = new Set(receiver.received.map((r) => r.event?.id));
      t.same(
        expected.filter((d) => !arrived.has(d.event_id)),
        [],
        `all ${expected.length} events owed at the outage reached the receiver`,
      );
    });
  });
}

function supervisorState(home: string, pid: number): SupervisorState {
  return JSON.parse(readFileSync(join(home, 'run', `serve-${pid}.json`), 'utf8')) as SupervisorState;
}
