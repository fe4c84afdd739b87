/**
 * What one organisation's trouble costs another. Organisation A has a healthy webhook receiver and a healthy
 * bank; organisation B, in the noisy phases, has 40 endpoints at a tarpit (accepts connections, never
 * answers), a stream of events to them, and links at a bank that hangs at login. Each phase measures A's
 * commit-to-first-attempt latency (an event's `created_at` to its arrival at A's receiver) and A's refresh
 * duration (`POST /v1/refresh_intents` to `succeeded`), with the appliance's default settings: the API, one
 * dispatcher and one scheduler's sync workers in this process, on one database.
 *
 * Quiet and noisy phases alternate (BENCH_ROUNDS of each, default 2), each on a fresh database, so both
 * see the same machine; the medians over the phases of each kind are reported.
 *
 *   npm run build && node dist/bench/noisy-neighbour.js     (BENCH_DATABASE_URL=postgres://… for Postgres)
 */
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { silentLogger } from '../src/logging/logger.js';
import { buildServices } from '../src/processes/services.js';
import { startApiServer } from '../src/http/server.js';
import { Dispatcher } from '../src/webhooks/dispatch/dispatcher.js';
import { runSyncWorkers } from '../src/sync/worker-pool.js';
import { createOrganisation } from '../src/orgs/orgs.js';
import { createApiKey } from '../src/keys/keys.js';
import { createSandboxConnector } from '../src/banks/sandbox/sandbox-connector.js';
import { ConnectorError, type Connector } from '../src/banks/connector.js';
import { SecretBox } from '../src/secrets/secret-box.js';
import { freshPostgresSchema } from './lib.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS || 2);
/** A's events per phase, one every 50 ms. */
const EVENTS = Number(process.env.BENCH_EVENTS || 100);
const REFRESHES = Number(process.env.BENCH_REFRESHES || 5);
const NOISY_ENDPOINTS = 40;
/** B's links at the hanging bank: more than the sync workers of a scheduler (4). */
const HANGING_LINKS = 8;
const HEALTHY_BANK = 'bancochile';
const HANGING_BANK = 'santander';
const CONSENT = { consent_version: '2026-01', consent_text_hash: 'a'.repeat(64) };
const RAISED = { perMinute: 1_000_000, burst: 100_000 };

interface PhaseResult {
  deliveryMs: number[];
  refreshMs: number[];
  /** What B had going while A was measured: connections open at the tarpit, logins hanging (at most). */
  tarpitConnections: number;
  hangingLogins: number;
}

/** A bank that never answers a login until released (then it fails as unavailable). */
function hangingBank(sandbox: Connector): { connector: Connector; hanging(): number; release(): void } {
  const waiting: ((error: Error) => void)[] = [];
  let released = false;
  const connector = new Proxy(sandbox, {
    get(target, name: string) {
      if (name !== 'login') return (target as unknown as Record<string, unknown>)[name];
      return () =>
        new Promise((_, reject) => {
          if (released) reject(new ConnectorError('bank_unavailable', 'released'));
          else waiting.push(reject);
        });
    },
  }) as Connector;
  return {
    connector,
    hanging: () => waiting.length,
    release() {
      released = true;
      for (const reject of waiting.splice(0)) reject(new ConnectorError('bank_unavailable', 'released'));
    },
  };
}

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function phase(noisy: boolean): Promise<PhaseResult> {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-noisy-'));
  const postgres = process.env.BENCH_DATABASE_URL
    ? await freshPostgresSchema(process.env.BENCH_DATABASE_URL)
    : undefined;
  const databaseUrl = postgres?.url ?? `sqlite://${home}/svc.db`;
  const config = loadConfig({
    home,
    env: {},
    overrides: {
      databaseUrl,
      log: { level: 'silent' },
      metrics: { port: 0 },
      api: { port: 0 },
      // The receivers are on loopback; refreshes back to back need no cooldown.
      webhooks: { allowPrivateAddressesInTestMode: true },
      refresh: { onlyLastCooldownMinutes: 0 },
      scheduler: { pollIntervalMs: 100 },
    },
  });
  const migrating = openDatabase({ url: databaseUrl });
  await migrateUp(migrating);
  await migrating.close();

  const sandbox = createSandboxConnector();
  const hanging = hangingBank(sandbox);
  const services = buildServices(config, 'bench', {
    secrets: new SecretBox({ id: 'mk_bench', key: randomBytes(32) }),
    logger: silentLogger,
    clock: systemClock,
    connectors: (bank, mode) =>
      mode !== 'test' ? null : bank === HANGING_BANK ? hanging.connector : sandbox,
  });
  const server = await startApiServer(services, { host: '127.0.0.1', port: 0 });
  const stop = new AbortController();
  const dispatcher = new Dispatcher(services);
  const dispatching = dispatcher.run(stop.signal);
  const syncing = runSyncWorkers(services, stop.signal);

  const arrivals = new Map<string, number>();
  const receiver = createHttpServer((request, response) => {
    const id = request.headers['svc-event-id'];
    if (typeof id === 'string' && !arrivals.has(id)) arrivals.set(id, Date.now());
    request.resume();
    request.on('end', () => response.writeHead(200).end());
  });
  const receiverPort = await listen(receiver);
  const tarpitSockets = new Set<Socket>();
  const tarpit = createTcpServer((socket) => {
    tarpitSockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => tarpitSockets.delete(socket));
  });
  const tarpitPort = await listen(tarpit);

  const [a, b] = await services.db.transaction(async (trx) => {
    const keys: string[] = [];
    for (const name of ['A (quiet)', 'B (noisy)']) {
      const org = await createOrganisation(trx, name, 'test', Date.now());
      const issued = await createApiKey(trx, {
        brand: config.brand,
        orgId: org.id,
        mode: 'test',
        type: 'secret',
        actor: 'bench',
        now: Date.now(),
        rateLimits: { read: RAISED, sync_write: RAISED, resource_write: RAISED },
      });
      keys.push(issued.secret);
    }
    return keys as [string, string];
  });
  const api = async (key: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (response.status >= 300)
      throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const newLink = (key: string, bank: string) =>
    api(key, 'POST', '/v1/links', {
      bank_id: bank,
      holder_type: 'individual',
      credentials: { rut: '11.111.111-1', password: 'sandbox' },
      ...CONSENT,
    }).then((link) => link.id as string);
  const until = async <T>(what: string, probe: () => Promise<T | undefined>, ms = 120_000): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  };

  // A: one endpoint, one link at a healthy bank, synced before anything is measured.
  await api(a, 'POST', '/v1/webhook_endpoints', {
    url: `http://127.0.0.1:${receiverPort}/hook`,
    enabled_events: ['*'],
  });
  const aLink = await newLink(a, HEALTHY_BANK);
  await until('A link active', async () =>
    (await api(a, 'GET', `/v1/links/${aLink}`)).status === 'active' ? true : undefined,
  );

  let noise: Promise<void> = Promise.resolve();
  if (noisy) {
    for (let i = 0; i < NOISY_ENDPOINTS; i++) {
      await api(b, 'POST', '/v1/webhook_endpoints', {
        url: `http://127.0.0.1:${tarpitPort}/hook/${i}`,
        enabled_events: ['*'],
      });
    }
    const bLinks: string[] = [];
    for (let i = 0; i < HANGING_LINKS; i++) bLinks.push(await newLink(b, HANGING_BANK));
    // B's events keep coming while A is measured: 10 a second, each to all 40 endpoints.
    noise = (async () => {
      for (let i = 0; !stop.signal.aborted; i++) {
        await api(b, 'POST', '/v1/sandbox/events/fire', {
          type: 'link.refreshed',
          link_id: bLinks[i % bLinks.length],
        }).catch(() => undefined);
        await sleep(100);
      }
    })();
    // Let B's attempts and hanging logins take the slots and workers they can.
    await sleep(2_000);
  }

  let tarpitConnections = 0;
  let hangingLogins = 0;
  const watching = setInterval(() => {
    tarpitConnections = Math.max(tarpitConnections, tarpitSockets.size);
    hangingLogins = Math.max(hangingLogins, hanging.hanging());
  }, 50);
  const deliveryMs: number[] = [];
  const fired: { id: string; createdAt: number }[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const event = await api(a, 'POST', '/v1/sandbox/events/fire', { type: 'link.refreshed', link_id: aLink });
    fired.push({ id: event.id as string, createdAt: Date.parse(event.created_at as string) });
    await sleep(50);
  }
  await until('A deliveries', async () =>
    fired.every((event) => arrivals.has(event.id)) ? true : undefined,
  );
  for (const event of fired) deliveryMs.push(arrivals.get(event.id)! - event.createdAt);

  const refreshMs: number[] = [];
  for (let i = 0; i < REFRESHES; i++) {
    const began = Date.now();
    const intent = await api(a, 'POST', '/v1/refresh_intents', { link_id: aLink });
    const status = await until('A refresh', async () => {
      const seen = (await api(a, 'GET', `/v1/refresh_intents/${intent.id as string}`)).status as string;
      return seen === 'succeeded' || seen === 'failed' ? seen : undefined;
    });
    if (status !== 'succeeded') throw new Error(`A's refresh ${status}`);
    refreshMs.push(Date.now() - began);
  }

  clearInterval(watching);
  stop.abort();
  hanging.release();
  for (const socket of tarpitSockets) socket.destroy();
  await noise;
  await Promise.all([dispatching, syncing]);
  await server.close(5_000);
  await new Promise((resolve) => receiver.close(resolve));
  // Not awaited: a connection the tarpit accepted while the dispatcher stopped may never report closing.
  tarpit.close();
  for (const socket of tarpitSockets) socket.destroy();
  await services.db.close();
  await postgres?.drop();
  rmSync(home, { recursive: true, force: true });
  return { deliveryMs, refreshMs, tarpitConnections, hangingLogins };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const median = (values: number[]) => percentile(values, 50);

async function main(): Promise<void> {
  const engine = process.env.BENCH_DATABASE_URL ? 'Postgres' : 'SQLite';
  console.log(
    `Noisy neighbour on ${engine}: ${ROUNDS} quiet and ${ROUNDS} noisy phases, interleaved; ${EVENTS} events and ${REFRESHES} refreshes of A per phase`,
  );
  const quiet: PhaseResult[] = [];
  const noisy: PhaseResult[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    quiet.push(await phase(false));
    noisy.push(await phase(true));
  }
  const line = (label: string, phases: PhaseResult[]) => {
    const p50 = median(phases.map((p) => percentile(p.deliveryMs, 50)));
    const p99 = median(phases.map((p) => percentile(p.deliveryMs, 99)));
    const refresh = median(phases.map((p) => median(p.refreshMs)));
    const noise = phases.some((p) => p.tarpitConnections > 0)
      ? `  (B: up to ${Math.max(...phases.map((p) => p.tarpitConnections))} attempts hanging at the tarpit, ${Math.max(...phases.map((p) => p.hangingLogins))} logins hanging)`
      : '';
    console.log(
      `${label.padEnd(34)} delivery p50 ${String(p50).padStart(6)} ms  p99 ${String(p99).padStart(6)} ms  refresh ${String(refresh).padStart(6)} ms${noise}`,
    );
    return { p99, refresh };
  };
  const calm = line('A alone', quiet);
  const loud = line('A beside B (tarpit, hanging bank)', noisy);
  console.log(
    `A's delivery p99 beside B: ${loud.p99} ms (target under 1000); refresh ${(loud.refresh / calm.refresh).toFixed(2)}x its quiet time (target under 2x)`,
  );
}

await main();
