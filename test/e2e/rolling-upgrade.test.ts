import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import type { SupervisorState } from '../../src/processes/status.js';
import { installArgs, runCli, runCliJson, startServe, waitFor, withDatabase } from '../helpers/cli.js';
import { RAISED_LIMITS_ENV } from '../helpers/crash.js';
import {
  HANG_GUARD_MS,
  freshDatabase,
  linkBody,
  request,
  setTimeLimit,
  storedAttempts,
  type TestResponse,
} from '../helpers/harness.js';
import { previousBuild, type PreviousBuild } from '../helpers/previous-build.js';
import { startReceiver, type Received } from '../helpers/receiver.js';
import { startWorkers } from '../helpers/serve-roles.js';

/**
 * A rolling upgrade on PostgreSQL (issue 32, item 2): the previous release (the parent of the newest commit
 * that adds a migration: helpers/previous-build.ts) is installed and runs as two API nodes, a scheduler node
 * and a dispatcher node, each its own `svc serve --roles …`, under steady traffic: clients write round-robin
 * through both API nodes (links, refresh intents, webhook endpoints), the scheduler syncs the sandbox links
 * every few seconds, and a real receiver takes every delivery. This build then runs `svc migrate` (its
 * expand migrations, under the old nodes), replaces the nodes one at a time (SIGTERM, wait for the exit,
 * start this build's node with the same roles and port, wait until it is healthy), and runs `svc migrate`
 * again for what had to wait for the old build to be gone. Afterwards: every write answered 2xx is there,
 * every event reached each of its endpoints exactly once with its attempt recorded, and a request failed
 * only on a node inside its own restart window.
 *
 * PostgreSQL only: several nodes sharing one database, upgraded one at a time, is what PostgreSQL serves; a
 * SQLite appliance is one box and upgrades stopped (README, Upgrading).
 */

/** Clients sending writes at once, each pausing PACE_MS between requests (about 15 writes a second). */
const CLIENTS = 2;
const PACE_MS = 100;
/** Links the clients create; after that they refresh them. Each is synced every SYNC_INTERVAL_SECONDS. */
const MAX_LINKS = 40;
const SYNC_INTERVAL_SECONDS = 15;
/** Webhook endpoints the clients add during the run, besides the one that hears everything. */
const MAX_ENDPOINTS = 6;
/** Each node renews its row this often; the old nodes must outlive two beats after the migration. */
const HEARTBEAT_SECONDS = 1;
/** Every wait for a condition: long, since CI is a loaded 2-core machine; a pass takes a fraction. */
const WAIT_MS = 2 * HANG_GUARD_MS;

// The previous build (30 s idle, 104 s on a loaded machine), four nodes started twice, the traffic and the
// drain: 93 s in all idle, 224 s loaded.
setTimeLimit(t, 12 * 60_000);

const ENV: Record<string, string> = {
  ...RAISED_LIMITS_ENV,
  SVC_LOG_LEVEL: 'warn',
  SVC_SUPERVISOR_HEARTBEAT_SECONDS: String(HEARTBEAT_SECONDS),
  SVC_SCHEDULER_CRON: '* * * * * *',
  SVC_SCHEDULER_POLL_INTERVAL_MS: '200',
  SVC_SCHEDULER_SYNC_INTERVAL_MINUTES: String(SYNC_INTERVAL_SECONDS / 60),
  SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
  SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
};

type Build = 'old' | 'new';

/** One node of the topology: a slot keeps its name, roles and port across the upgrade. */
interface Node {
  slot: string;
  roles: string;
  port: number | null;
  build: Build;
  pid: number;
  state(): SupervisorState | null;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** One request a client sent: when, to which API slot, and what came back (null: no answer at all). */
interface Sent {
  op: 'link' | 'refresh' | 'endpoint' | 'describe';
  /** For `describe`: the endpoint and the description sent. */
  target?: string;
  description?: string;
  slot: string;
  build: Build;
  startedAt: number;
  endedAt: number;
  status: number | null;
  code: string | null;
  id: string | null;
}

/** From the SIGTERM of a slot's old node to its new node's health. */
interface Window {
  slot: string;
  from: number;
  to: number;
}

/** 4xx answers that are the API doing its job under this traffic, not a failure of a node. */
const EXPECTED_REFUSALS = new Set(['refresh_in_progress', 'refresh_cooldown']);

if (!process.env.SVC_TEST_DATABASE_URL) {
  t.plan(
    0,
    'PostgreSQL only (SVC_TEST_DATABASE_URL is unset): rolling upgrades are for several nodes sharing a PostgreSQL database; a SQLite appliance upgrades stopped',
  );
} else {
  t.test('postgres: the previous release upgraded node by node under traffic', (t) => rollingUpgrade(t));
}

async function rollingUpgrade(t: Test): Promise<void> {
  const began = Date.now();
  const previous: PreviousBuild = await previousBuild(t);
  const current = migrationNames();
  const added = current.filter((name) => !previous.migrations.includes(name));
  t.comment(
    `previous build ${previous.commit.slice(0, 12)} (${previous.picked}), built in ${previous.buildMs} ms; this build adds ${added.length ? added.join(', ') : 'no migration'}`,
  );
  t.same(
    previous.migrations.filter((name) => !current.includes(name)),
    [],
    'the previous build has no migration this build lacks',
  );

  const database = await freshDatabase(t, 'postgres');
  const home = database.home;
  const installed = await runCliJson<{ keys: { secret: string } }>(t, installArgs('postgres', database.url), {
    home,
    root: previous.root,
  });
  const key = installed.keys.secret;

  const roots: Record<Build, string | undefined> = { old: previous.root, new: undefined };
  const startNode = async (slot: string, roles: string, build: Build, port: number | null): Promise<Node> => {
    const root = roots[build];
    if (roles === 'api') {
      const serve = await startServe(t, {
        home,
        args: ['--roles', 'api'],
        env: ENV,
        readyTimeoutMs: WAIT_MS,
        ...(port ? { port } : {}),
        ...(root ? { root } : {}),
      });
      return {
        slot,
        roles,
        port: serve.port,
        build,
        pid: serve.pid,
        state: () => readState(home, serve.pid),
        exited: serve.exited,
      };
    }
    const workers = await startWorkers(t, {
      home,
      roles,
      env: ENV,
      readyTimeoutMs: WAIT_MS,
      ...(root ? { root } : {}),
    });
    return { slot, roles, port: null, build, pid: workers.pid, state: workers.state, exited: workers.exited };
  };

  const nodes: Node[] = await Promise.all(
    (
      [
        ['api-1', 'api'],
        ['api-2', 'api'],
        ['scheduler', 'scheduler'],
        ['dispatcher', 'dispatcher'],
      ] as const
    ).map(([slot, roles]) => startNode(slot, roles, 'old', null)),
  );
  t.comment(`four nodes of the previous build up ${Date.now() - began} ms after the start`);
  const apiNodes = () => nodes.filter((node) => node.roles === 'api');

  const receiver = await startReceiver(t);
  const hookUrl = (name: string) => `http://127.0.0.1:${receiver.port}/hook/${name}`;
  const everything = await request(`http://127.0.0.1:${nodes[0]!.port}`, 'POST', '/v1/webhook_endpoints', {
    key,
    body: { url: hookUrl('all'), enabled_events: ['*'] },
  });
  t.equal(everything.status, 200, 'an endpoint that hears every event');

  // The traffic: each client sends to the API slots in turn, whatever build answers there.
  const sent: Sent[] = [];
  const linkIds: string[] = [];
  let endpointsAsked = 0;
  let stopping = false;
  // A failure before the drain must not leave the clients sending until the file's time limit.
  t.teardown(() => {
    stopping = true;
  });
  let turn = 0;
  const send = async (
    op: Sent['op'],
    method: string,
    path: string,
    body: unknown,
    extra: Pick<Sent, 'target' | 'description'> = {},
  ): Promise<Sent> => {
    const apis = apiNodes();
    const node = apis[turn++ % apis.length]!;
    const entry: Sent = {
      op,
      slot: node.slot,
      build: node.build,
      startedAt: Date.now(),
      endedAt: 0,
      status: null,
      code: null,
      id: null,
      ...extra,
    };
    let response: TestResponse | null = null;
    try {
      response = await request(`http://127.0.0.1:${node.port}`, method, path, { key, body });
    } catch (error) {
      // fetch reports a refused or cut connection as a TypeError; a contract violation is a failure to see.
      if (!(error instanceof TypeError)) throw error;
    }
    entry.endedAt = Date.now();
    entry.status = response?.status ?? null;
    entry.code = response?.body?.error?.code ?? null;
    entry.id = response && response.status < 300 ? (response.body?.id ?? null) : null;
    sent.push(entry);
    return entry;
  };
  const client = async (n: number) => {
    const ownEndpoints: string[] = [];
    let i = 0;
    while (!stopping) {
      i += 1;
      const roll = Math.random();
      if (linkIds.length < 3 || (roll < 0.3 && linkIds.length < MAX_LINKS)) {
        const created = await send(
          'link',
          'POST',
          '/v1/links',
          linkBody({ external_user_id: `client-${n}-${i}` }),
        );
        if (created.id) linkIds.push(created.id);
      } else if (roll < 0.36 && endpointsAsked < MAX_ENDPOINTS) {
        endpointsAsked += 1;
        const created = await send('endpoint', 'POST', '/v1/webhook_endpoints', {
          url: hookUrl(`client-${n}-${i}`),
          enabled_events: ['link.created', 'refresh_intent.succeeded'],
        });
        if (created.id) ownEndpoints.push(created.id);
      } else if (roll < 0.6 && ownEndpoints.length > 0) {
        // Only this client changes its endpoints, one request at a time: the last answered is what is kept.
        const target = ownEndpoints[Math.floor(Math.random() * ownEndpoints.length)]!;
        const description = `client ${n}, change ${i}`;
        await send(
          'describe',
          'PATCH',
          `/v1/webhook_endpoints/${target}`,
          { description },
          { target, description },
        );
      } else {
        const linkId = linkIds[Math.floor(Math.random() * linkIds.length)]!;
        await send('refresh', 'POST', '/v1/refresh_intents', { link_id: linkId, refresh_type: 'only_last' });
      }
      await sleep(PACE_MS);
    }
  };
  const trafficStarted = Date.now();
  const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
  const acknowledged = (filter: (s: Sent) => boolean) =>
    sent.filter((s) => s.status !== null && s.status < 300 && filter(s)).length;
  const linkRefreshes = () =>
    withDatabase(database.url, async (db) => {
      const [row] = await db.knex('events').where({ type: 'link.refreshed' }).count({ n: '*' });
      return Number(row!.n);
    });

  // Warm-up: the old build answers writes on both nodes, syncs on schedule and delivers.
  const warm = await waitFor(
    async () =>
      apiNodes().every((node) => acknowledged((s) => s.slot === node.slot) >= 5) &&
      receiver.received.length >= 5 &&
      (await linkRefreshes()) >= 3
        ? true
        : undefined,
    WAIT_MS,
    250,
  );
  t.ok(warm, 'the previous build answers writes on both API nodes, syncs and delivers');

  await t.test(
    "this build's svc migrate runs while the old nodes serve, and they keep serving",
    async (t) => {
      // Exit 0 when every new migration is an expand step; 75 (`server_running`, with what it applied and
      // what it deferred) when a contract step has to wait for the old nodes to be gone.
      const migrated = await runCli(['migrate', '--json'], { home });
      const answer = parseJson(migrated.stdout) as {
        applied?: string[];
        error?: { code: string; message: string; applied?: string[]; deferred?: string[] };
      } | null;
      const deferred = answer?.error?.deferred ?? [];
      t.ok(
        migrated.code === 0 ||
          (migrated.code === 75 && answer?.error?.code === 'server_running' && deferred.length > 0),
        `svc migrate of this build runs under the old nodes (exit ${migrated.code}: ${answer?.error?.message ?? 'applied ' + (answer?.applied?.join(', ') || 'nothing')})`,
      );
      const status = await runCliJson<{
        pending: string[];
        unknown: string[];
        kinds?: Record<string, string>;
      }>(t, ['migrate', '--status'], { home });
      t.same(status.unknown, [], 'the database has no migration this build does not know');
      t.same(
        status.pending,
        deferred,
        `what waits is what it deferred (${deferred.join(', ') || 'nothing'})`,
      );
      if (deferred.length > 0 && status.kinds)
        t.equal(status.kinds[deferred[0]!], 'contract', 'starting with a contract step');
      const expand = added.filter((name) => !deferred.includes(name));
      t.same(
        answer?.applied ?? answer?.error?.applied,
        expand,
        `the expand steps applied under the old nodes: ${expand.join(', ') || 'none in this build'}`,
      );

      // Each old node checks the schema at each heartbeat: two beats after the migration, it has seen it.
      const beats = await heartbeats(database.url);
      const seen = await waitFor(
        async () => {
          const now = await heartbeats(database.url);
          return nodes.every(
            (node) => (now.get(node.pid) ?? 0) >= (beats.get(node.pid) ?? 0) + 2 * HEARTBEAT_SECONDS * 1000,
          )
            ? true
            : undefined;
        },
        WAIT_MS,
        250,
      );
      t.ok(seen, 'every old node renewed its heartbeat twice since the migration');
      for (const node of nodes) {
        const children = node.state()?.children ?? [];
        t.same(
          children.map((child) => `${child.role} ${child.status}`),
          [`${node.roles} running`],
          `${node.slot} (previous build) keeps its ${node.roles} running`,
        );
      }
      const mark = {
        writes: new Map(apiNodes().map((node) => [node.slot, acknowledged((s) => s.slot === node.slot)])),
        received: receiver.received.length,
        refreshed: await linkRefreshes(),
      };
      const serving = await waitFor(
        async () =>
          apiNodes().every(
            (node) => acknowledged((s) => s.slot === node.slot) > mark.writes.get(node.slot)! + 3,
          ) &&
          receiver.received.length > mark.received + 3 &&
          (await linkRefreshes()) > mark.refreshed
            ? true
            : undefined,
        WAIT_MS,
        250,
      );
      t.ok(
        serving,
        'after that, the old API nodes still answer writes, the old scheduler syncs and the old dispatcher delivers',
      );
    },
  );

  // The upgrade proper: one node at a time.
  const windows: Window[] = [];
  for (const [i, old] of [...nodes].entries()) {
    const from = Date.now();
    process.kill(old.pid, 'SIGTERM');
    const exit = await old.exited;
    const stoppedAt = Date.now();
    t.same(exit, { code: 0, signal: null }, `${old.slot}: the old node stops cleanly on SIGTERM`);
    nodes[i] = await startNode(old.slot, old.roles, 'new', old.port);
    windows.push({ slot: old.slot, from, to: Date.now() });
    t.comment(
      `${old.slot} replaced in ${Date.now() - from} ms (the old node stopped in ${stoppedAt - from} ms, the new one healthy ${Date.now() - stoppedAt} ms later)`,
    );
  }
  const replacedAt = Date.now();

  await t.test('once no old node is left, svc migrate applies what waited', async (t) => {
    const migrated = await runCli(['migrate'], { home });
    t.equal(migrated.code, 0, `svc migrate succeeds: ${migrated.message}`);
    const status = await runCliJson<{ pending: string[]; unknown: string[] }>(t, ['migrate', '--status'], {
      home,
    });
    t.same(status, { ...status, pending: [], unknown: [] }, 'every migration of this build is applied');
    for (const node of nodes) {
      const children = node.state()?.children ?? [];
      t.same(
        children.map((child) => `${child.role} ${child.status}`),
        [`${node.roles} running`],
        `${node.slot} (this build) runs its ${node.roles}`,
      );
    }
  });

  // Some traffic on the new build alone, then the drain.
  const afterUpgrade = await waitFor(
    async () =>
      apiNodes().every(
        (node) => acknowledged((s) => s.slot === node.slot && s.startedAt > replacedAt) >= 5,
      ) && (await linkRefreshes()) > 0
        ? true
        : undefined,
    WAIT_MS,
    250,
  );
  t.ok(afterUpgrade, 'the new nodes answer writes');
  stopping = true;
  await Promise.all(clients);
  const trafficMs = Date.now() - trafficStarted;

  // Every answered refresh runs to its end before the scheduler stops, so that no event is still to come.
  const settled = await waitFor(
    () =>
      withDatabase(database.url, async (db) => {
        const [row] = await db
          .knex('refresh_intents')
          .whereIn('status', ['created', 'in_progress'])
          .count({ n: '*' });
        return Number(row!.n) === 0 ? true : undefined;
      }),
    WAIT_MS,
    500,
  );
  t.ok(settled, 'every refresh intent ran to its end');
  const scheduler = nodes.find((node) => node.slot === 'scheduler')!;
  process.kill(scheduler.pid, 'SIGTERM');
  t.same(await scheduler.exited, { code: 0, signal: null }, 'the scheduler stops cleanly');
  const drained = await waitFor(
    () =>
      withDatabase(database.url, async (db) => {
        const [row] = await db.knex('webhook_deliveries').where({ status: 'pending' }).count({ n: '*' });
        return Number(row!.n) === 0 && receiver.pending() === 0 ? true : undefined;
      }),
    WAIT_MS,
    500,
  );
  t.ok(drained, 'every delivery was made');
  const dispatcher = nodes.find((node) => node.slot === 'dispatcher')!;
  process.kill(dispatcher.pid, 'SIGTERM');
  t.same(await dispatcher.exited, { code: 0, signal: null }, 'the dispatcher stops cleanly');

  await t.test('every write answered 2xx is there, read back through the API', async (t) => {
    const api = `http://127.0.0.1:${apiNodes()[0]!.port}`;
    const paths: Record<Sent['op'], string> = {
      link: '/v1/links/',
      refresh: '/v1/refresh_intents/',
      endpoint: '/v1/webhook_endpoints/',
      describe: '/v1/webhook_endpoints/',
    };
    const answered = sent.filter((s) => s.id !== null);
    const missing: string[] = [];
    const unfinished: string[] = [];
    for (const write of answered) {
      const read = await request(api, 'GET', `${paths[write.op]}${write.id}`, { key });
      if (read.status !== 200)
        missing.push(
          `${write.op} ${write.id} (answered by ${write.slot}, ${write.build} build): ${read.status}`,
        );
      else if (write.op === 'refresh' && !['succeeded', 'failed'].includes(read.body.status))
        unfinished.push(`${write.id}: ${read.body.status}`);
      else if (write.op === 'link' && read.body.last_synced_at === null)
        unfinished.push(`${write.id} never synced`);
    }
    const by = (build: Build) => answered.filter((s) => s.build === build).length;
    t.ok(
      by('old') > 0 && by('new') > 0,
      `${answered.length} writes answered 2xx: ${by('old')} by the previous build, ${by('new')} by this one`,
    );
    t.same(missing, [], 'each of them reads back 200');
    t.same(unfinished, [], 'each link has synced and each refresh intent has finished');

    // An endpoint's description is the last one answered 2xx, or one sent after it that got no answer.
    const changed = new Map<string, Sent[]>();
    for (const s of sent.filter((s) => s.op === 'describe'))
      changed.set(s.target!, [...(changed.get(s.target!) ?? []), s]);
    const wrong: string[] = [];
    for (const [target, changes] of changed) {
      const lastAnswered = changes.findLastIndex((s) => s.id !== null);
      if (lastAnswered < 0) continue;
      const possible = changes
        .slice(lastAnswered)
        .filter((s, i) => i === 0 || s.status === null || s.status >= 500)
        .map((s) => s.description);
      const read = await request(api, 'GET', `/v1/webhook_endpoints/${target}`, { key });
      if (!possible.includes(read.body?.description))
        wrong.push(`${target}: ${read.body?.description}, not ${possible.join(' or ')}`);
    }
    t.ok(changed.size > 0, `${changed.size} endpoints changed during the upgrade`);
    t.same(wrong, [], 'each keeps the description its last answered change set');
  });

  await t.test(
    'no event lost, no delivery sent twice, every delivery received has its attempt',
    async (t) => {
      await withDatabase(database.url, async (db) => {
        const events: { id: string }[] = await db.knex('events').select('id');
        const endpoints = new Map<string, string>(
          (await db.knex('webhook_endpoints').select('id', 'url')).map((row: { id: string; url: string }) => [
            new URL(row.url).pathname,
            row.id,
          ]),
        );
        const deliveries: { id: string; event_id: string; endpoint_id: string; status: string }[] = await db
          .knex('webhook_deliveries')
          .select('id', 'event_id', 'endpoint_id', 'status');
        const attempts = await storedAttempts(db);

        const received = new Map<string, Received[]>();
        for (const r of receiver.received) {
          const pair = `${String(r.headers['svc-event-id'])} → ${endpoints.get(r.path) ?? r.path}`;
          received.set(pair, [...(received.get(pair) ?? []), r]);
        }
        const all = endpoints.get('/hook/all')!;
        t.ok(
          events.length > 0,
          `${events.length} events, ${deliveries.length} deliveries, ${receiver.received.length} requests received`,
        );
        t.same(
          events.filter((e) => !received.has(`${e.id} → ${all}`)).map((e) => e.id),
          [],
          'every event reached the endpoint that hears everything',
        );
        t.same(
          deliveries
            .filter((d) => !received.has(`${d.event_id} → ${d.endpoint_id}`))
            .map((d) => `${d.id} ${d.status}`),
          [],
          'every delivery reached its endpoint',
        );
        t.same(
          [...received].filter(([, rs]) => rs.length > 1).map(([pair, rs]) => `${pair} ×${rs.length}`),
          [],
          'no event reached an endpoint twice (Svc-Event-Id, the receivers’ idempotency key)',
        );
        const byDelivery = new Map(deliveries.map((d) => [`${d.event_id} → ${d.endpoint_id}`, d]));
        const unrecorded: string[] = [];
        for (const [pair, rs] of received) {
          const delivery = byDelivery.get(pair);
          const recorded = attempts.filter((a) => a.delivery_id === delivery?.id && a.status_code === 200);
          if (!delivery || delivery.status !== 'succeeded' || recorded.length !== rs.length)
            unrecorded.push(
              `${pair}: ${rs.length} received, ${recorded.length} attempts recorded, ${delivery?.status ?? 'no delivery'}`,
            );
        }
        t.same(
          unrecorded,
          [],
          'each request received is an attempt recorded on its delivery, which succeeded',
        );
      });
    },
  );

  await t.test('requests failed only on a node inside its own restart window', async (t) => {
    const failed = sent.filter((s) => s.status === null || s.status >= 500);
    const refused = sent.filter((s) => s.status !== null && s.status >= 400 && s.status < 500);
    t.same(
      refused.filter((s) => !EXPECTED_REFUSALS.has(s.code ?? '')).map((s) => `${s.op} ${s.status} ${s.code}`),
      [],
      `no 4xx other than a refresh already running (${refused.length} of those)`,
    );
    // A failed request overlaps its node's window: it failed after the SIGTERM and was sent before the new
    // node answered /health (its failure may be seen a moment after that, on a loaded machine).
    const outside = failed.filter(
      (s) => !windows.some((w) => w.slot === s.slot && s.endedAt >= w.from && s.startedAt <= w.to),
    );
    t.same(
      outside.map((s) => `${s.op} to ${s.slot} at +${s.endedAt - began} ms: ${s.status ?? 'no answer'}`),
      [],
      `each of ${failed.length} failed requests was sent to a node being replaced, within its window`,
    );
    for (const w of windows.filter((w) => w.slot.startsWith('api'))) {
      const inside = failed.filter((s) => s.slot === w.slot).length;
      t.comment(`${w.slot}: window of ${w.to - w.from} ms, ${inside} requests failed in it`);
    }
    t.comment(
      `${sent.length} requests in ${trafficMs} ms (${acknowledged(() => true)} answered 2xx, ${refused.length} 4xx, ${failed.length} failed); ${Date.now() - began} ms in all`,
    );
  });
}

/** Each running `svc serve`'s last heartbeat (the database's clock, ms), by pid. */
async function heartbeats(url: string): Promise<Map<number, number>> {
  return withDatabase(url, async (db) => {
    const rows: { pid: number; heartbeat_at: string | number }[] = await db
      .knex('serve_instances')
      .select('pid', 'heartbeat_at');
    return new Map(rows.map((row) => [Number(row.pid), Number(row.heartbeat_at)]));
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function readState(home: string, pid: number): SupervisorState | null {
  try {
    return JSON.parse(readFileSync(join(home, 'run', `serve-${pid}.json`), 'utf8')) as SupervisorState;
  } catch {
    return null; // not written yet, or being rewritten
  }
}
