/*
 * Load and soak: a real `svc serve` (API, scheduler and dispatcher) under a steady mixed workload for a
 * while, and what an operator would watch: latency per endpoint (p50/p99), errors, webhook deliveries to a
 * local receiver, the memory of each process over the run and, on SQLite, the size of the WAL file.
 *
 *   node dist/bench/soak.js                                  10 minutes on SQLite
 *   node dist/bench/soak.js --minutes 2 --database-url postgres://postgres@127.0.0.1:5432/test
 *   node dist/bench/soak.js --rate 40 --json /tmp/soak.json  requests per second; figures as JSON too
 *
 * The load is open-loop: a request starts every 1/rate seconds whether or not the earlier ones have
 * answered, so a slow server shows up as latency instead of as a quietly lower rate (at most MAX_IN_FLIGHT
 * wait at once; beyond that a request is counted as dropped). The mix per 100 requests: 90 reads (links,
 * accounts, movements, events, deliveries, refresh intents, and 5 health checks), 5 link creations and 5
 * on-demand refreshes, each of which syncs and emits events that the dispatcher delivers. The refresh
 * cooldown is set to 0 so that refreshes can keep a steady rate over a bounded set of links; a refresh
 * targets the link refreshed longest ago, never one whose refresh may still run (no 409 by design).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, statSync, writeFileSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { BIN, freePort, freshPostgresSchema, waitForHealth } from './lib.js';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase } from '../src/db/database.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';
import type { SupervisorState } from '../src/processes/status.js';
import { rutCheckDigit } from '../src/rut/rut.js';

const MAX_IN_FLIGHT = 256;
const SAMPLE_EVERY_MS = 5_000;
/** Links created before the measured load, so that reads have something to read from the start. */
const SEED_LINKS = 20;
/** A link is refreshed again only after this long: its previous refresh has long finished by then. */
const REFRESH_SPACING_MS = 60_000;

export interface EndpointFigures {
  count: number;
  p50: number;
  p99: number;
  max: number;
  statuses: Record<string, number>;
}

export interface SoakReport {
  engine: 'sqlite' | 'postgres';
  minutes: number;
  rate: number;
  requests: number;
  dropped: number;
  /** Answers that are neither 2xx nor 429 (a 429 is the limiter doing its job), and failed connections. */
  errors: number;
  rateLimited: number;
  endpoints: Record<string, EndpointFigures>;
  deliveries: {
    events: number;
    received: number;
    duplicates: number;
    pending: number;
    failed: number;
    p50: number;
    p99: number;
  };
  /** Resident memory in MB of each process: after start-up and seeding, after the warm-up, at the end. */
  memory: Record<string, { startMb: number; warmMb: number; endMb: number; maxMb: number }>;
  /** SQLite only: the WAL file in MB, largest over the run and at the end, and per sample. */
  wal: { maxMb: number; endMb: number; samplesMb: number[] } | null;
  databaseMb: number;
  /** Lines the appliance logged at level error or fatal. */
  serverErrorLines: number;
}

interface Sample {
  at: number;
  rssKb: Record<string, number>;
  walBytes: number | null;
}

function args() {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '10' },
      rate: { type: 'string', default: '20' },
      'database-url': { type: 'string' },
      json: { type: 'string' },
    },
  });
  return {
    minutes: Number(values.minutes),
    rate: Number(values.rate),
    databaseUrl: values['database-url'],
    json: values.json,
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

function rssKb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** A valid Chilean RUT for a number, so every created link is its own person. */
function rutFor(body: number): string {
  return `${body}-${rutCheckDigit(String(body))}`;
}

/** The customer's webhook receiver: answers 200 and notes when each event first arrived. */
async function startReceiver(): Promise<{
  url: string;
  server: Server;
  arrivals: Map<string, number>;
  duplicates: () => number;
  latencies: number[];
}> {
  const arrivals = new Map<string, number>();
  const latencies: number[] = [];
  let duplicates = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const now = Date.now();
      try {
        const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          id: string;
          created_at: string;
        };
        if (arrivals.has(event.id)) duplicates += 1;
        else {
          arrivals.set(event.id, now);
          latencies.push(now - Date.parse(event.created_at));
        }
      } catch {
        // not an event: still answered, never counted
      }
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, server, arrivals, duplicates: () => duplicates, latencies };
}

export async function runSoak(options: {
  minutes: number;
  rate: number;
  databaseUrl?: string;
  log?: (line: string) => void;
}): Promise<SoakReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const home = mkdtempSync(join(tmpdir(), 'svc-soak-'));
  const postgres = options.databaseUrl ? await freshPostgresSchema(options.databaseUrl) : undefined;
  // The soak's receiver is on loopback.
  const env = { SVC_HOME: home, SVC_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES_IN_TEST_MODE: 'true' };
  await install({ home, env, databaseUrl: postgres?.url, clock: systemClock, actor: 'soak' });
  const config = loadConfig({ home, env });
  const engine = config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres';
  const setupDb = openDatabase({ url: config.databaseUrl });
  const org = await setupDb.knex('organisations').first('id');
  // Limits well above the offered load: this measures the appliance, not the limiter (429s are counted apart).
  const raised = { perMinute: 600_000, burst: 10_000 };
  const { secret: key } = await setupDb.transaction((trx) =>
    createApiKey(trx, {
      brand: config.brand,
      orgId: org.id,
      mode: 'test',
      type: 'secret',
      name: 'soak',
      rateLimits: { read: raised, resource_write: raised, sync_write: raised, webhook_deliveries: raised },
      actor: 'soak',
      now: Date.now(),
    }),
  );
  await setupDb.close();

  const receiver = await startReceiver();
  const port = await freePort();
  const logFile = join(home, 'svc.log');
  const serverEnv: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && !name.startsWith('SVC_')) serverEnv[name] = value;
  const server: ChildProcess = spawn(process.execPath, [BIN, 'serve', '--port', String(port)], {
    env: {
      ...serverEnv,
      SVC_HOME: home,
      SVC_METRICS_PORT: '0',
      SVC_LOG_FILE: logFile,
      SVC_LOG_LEVEL: 'info',
      SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
      NODE_OPTIONS: '',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  const base = `http://127.0.0.1:${port}`;
  const stopServer = async () => {
    if (server.exitCode !== null || server.signalCode !== null) return;
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    const timer = setTimeout(() => {
      try {
        process.kill(-server.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
    }, 40_000);
    await exited;
    clearTimeout(timer);
  };

  try {
    await waitForHealth(base);
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(base + path, {
        method,
        headers: auth,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      return { status: response.status, body: text ? (JSON.parse(text) as unknown) : null };
    };
    const hook = await call('POST', '/v1/webhook_endpoints', { url: receiver.url, enabled_events: ['*'] });
    if (hook.status !== 200) throw new Error(`could not create the webhook endpoint: ${hook.status}`);

    const links: string[] = [];
    const accounts: string[] = [];
    const intents: string[] = [];
    const refreshedAt = new Map<string, number>();
    let ruts = 0;
    const createLink = async () => {
      const response = await call('POST', '/v1/links', {
        bank_id: 'bancochile',
        holder_type: 'individual',
        credentials: { rut: rutFor(20_000_000 + (ruts += 1)), password: 'sandbox' },
        consent_version: '2026-01',
        consent_text_hash: 'a'.repeat(64),
      });
      if (response.status === 200) {
        const id = (response.body as { id: string }).id;
        links.push(id);
        // Its first sync is a refresh of its own: give it the same spacing.
        refreshedAt.set(id, Date.now());
      }
      return response.status;
    };
    for (let i = 0; i < SEED_LINKS; i++) await createLink();
    for (let i = 0; i < 100 && accounts.length === 0; i++) {
      await sleep(200);
      const listed = await call('GET', `/v1/accounts?link_id=${links[0]}`);
      if (listed.status === 200) accounts.push(...(listed.body as { id: string }[]).map((a) => a.id));
    }

    const pick = <T>(items: T[]): T => items[Math.floor(Math.random() * items.length)]!;
    type Op = { name: string; weight: number; run: () => Promise<number> };
    const ops: Op[] = [
      { name: 'GET /health', weight: 5, run: async () => (await fetch(`${base}/health`)).status },
      {
        name: 'GET /v1/links',
        weight: 10,
        run: async () =>
          (await call('GET', `/v1/links?per_page=30&page=${1 + Math.floor(Math.random() * 3)}`)).status,
      },
      {
        name: 'GET /v1/links/{id}',
        weight: 15,
        run: async () => (await call('GET', `/v1/links/${pick(links)}`)).status,
      },
      {
        name: 'GET /v1/accounts',
        weight: 15,
        run: async () => {
          const response = await call('GET', `/v1/accounts?link_id=${pick(links)}`);
          if (response.status === 200 && accounts.length < 5_000)
            accounts.push(...(response.body as { id: string }[]).map((a) => a.id));
          return response.status;
        },
      },
      {
        name: 'GET /v1/accounts/{id}/movements',
        weight: 20,
        run: async () => (await call('GET', `/v1/accounts/${pick(accounts)}/movements?per_page=100`)).status,
      },
      {
        name: 'GET /v1/events',
        weight: 9,
        run: async () => (await call('GET', '/v1/events?per_page=30')).status,
      },
      {
        name: 'GET /v1/webhook_deliveries',
        weight: 8,
        run: async () => (await call('GET', '/v1/webhook_deliveries?per_page=30')).status,
      },
      {
        name: 'GET /v1/refresh_intents/{id}',
        weight: 8,
        run: async () =>
          intents.length > 0
            ? (await call('GET', `/v1/refresh_intents/${pick(intents)}`)).status
            : (await call('GET', `/v1/links/${pick(links)}`)).status,
      },
      { name: 'POST /v1/links', weight: 5, run: createLink },
      {
        name: 'POST /v1/refresh_intents',
        weight: 5,
        run: async () => {
          const now = Date.now();
          let target: string | null = null;
          let oldest = Infinity;
          for (const [id, at] of refreshedAt) {
            if (at < oldest) {
              oldest = at;
              target = id;
            }
          }
          if (target === null || now - oldest < REFRESH_SPACING_MS) return -1; // nothing due yet: not sent
          refreshedAt.set(target, now);
          const response = await call('POST', '/v1/refresh_intents', {
            link_id: target,
            refresh_type: 'only_last',
          });
          if (response.status === 200 && intents.length < 5_000)
            intents.push((response.body as { id: string }).id);
          return response.status;
        },
      },
    ];
    const totalWeight = ops.reduce((sum, op) => sum + op.weight, 0);
    const chooseOp = () => {
      let roll = Math.random() * totalWeight;
      for (const op of ops) {
        roll -= op.weight;
        if (roll < 0) return op;
      }
      return ops[0]!;
    };

    const processes = (): Record<string, number> => {
      const pids: Record<string, number> = { supervisor: server.pid! };
      try {
        const state = JSON.parse(
          readFileSync(join(home, 'run', `serve-${server.pid}.json`), 'utf8'),
        ) as SupervisorState;
        for (const child of state.children) if (child.pid) pids[child.role] = child.pid;
      } catch {
        // being rewritten: the next sample has it
      }
      return pids;
    };
    const walFile = engine === 'sqlite' ? `${config.databaseUrl.replace(/^sqlite:(\/\/)?/, '')}-wal` : null;
    const samples: Sample[] = [];
    const sample = () => {
      const rss: Record<string, number> = {};
      for (const [role, pid] of Object.entries(processes())) rss[role] = rssKb(pid);
      const walBytes = walFile ? (existsSync(walFile) ? statSync(walFile).size : 0) : null;
      samples.push({ at: Date.now(), rssKb: rss, walBytes });
    };
    sample();
    const startSample = samples[0]!;

    const durations = new Map<string, number[]>();
    const statuses = new Map<string, Record<string, number>>();
    let inFlight = 0;
    let dropped = 0;
    let requests = 0;
    const pendingOps = new Set<Promise<void>>();
    const intervalMs = 1000 / options.rate;
    const runMs = options.minutes * 60_000;
    const warmUpMs = Math.min(60_000, runMs / 5);
    let warmSample: Sample | null = null;
    const loadStarted = performance.now();
    log(`soak: ${engine}, ${options.minutes} min at ${options.rate} requests/s, home ${home}`);
    let nextSampleAt = loadStarted + SAMPLE_EVERY_MS;
    for (let n = 0; ; n++) {
      const due = loadStarted + n * intervalMs;
      if (due - loadStarted >= runMs) break;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      if (performance.now() >= nextSampleAt) {
        sample();
        nextSampleAt += SAMPLE_EVERY_MS;
        if (!warmSample && performance.now() - loadStarted >= warmUpMs) warmSample = samples.at(-1)!;
        const done = Math.round((performance.now() - loadStarted) / 1000);
        if (done % 60 < SAMPLE_EVERY_MS / 1000)
          log(`  ${done} s: ${requests} requests, ${inFlight} in flight`);
      }
      if (inFlight >= MAX_IN_FLIGHT) {
        dropped += 1;
        continue;
      }
      const op = chooseOp();
      inFlight += 1;
      const began = performance.now();
      const running = op
        .run()
        .catch(() => 0)
        .then((status) => {
          if (status === -1) return; // skipped, not sent
          requests += 1;
          const ms = performance.now() - began;
          (durations.get(op.name) ?? durations.set(op.name, []).get(op.name)!).push(ms);
          const counts = statuses.get(op.name) ?? statuses.set(op.name, {}).get(op.name)!;
          counts[String(status)] = (counts[String(status)] ?? 0) + 1;
        })
        .finally(() => {
          inFlight -= 1;
          pendingOps.delete(running);
        });
      pendingOps.add(running);
    }
    await Promise.allSettled([...pendingOps]);
    sample();
    const endSample = samples.at(-1)!;
    warmSample ??= endSample;

    // The load has stopped, but refreshes still running will emit events: wait until every event there is
    // has reached the receiver and nothing is pending (or a minute has passed).
    const total = async (path: string) => {
      const response = await fetch(`${base}${path}`, { headers: auth });
      await response.arrayBuffer();
      return Number(response.headers.get('x-total-count') ?? 0);
    };
    const owed = async () => {
      const [pending, failed, events] = await Promise.all([
        total('/v1/webhook_deliveries?status=pending&per_page=1'),
        total('/v1/webhook_deliveries?status=failed&per_page=1'),
        total('/v1/events?per_page=1'),
      ]);
      return { pending, failed, events };
    };
    let backlog = await owed();
    for (let i = 0; i < 120 && (backlog.pending > 0 || receiver.arrivals.size < backlog.events); i++) {
      await sleep(500);
      backlog = await owed();
    }
    const events = backlog.events;

    const endpoints: Record<string, EndpointFigures> = {};
    let errors = 0;
    let rateLimited = 0;
    for (const op of ops) {
      const values = (durations.get(op.name) ?? []).sort((a, b) => a - b);
      const counts = statuses.get(op.name) ?? {};
      for (const [status, count] of Object.entries(counts)) {
        const code = Number(status);
        if (code === 429) rateLimited += count;
        else if (!(code >= 200 && code < 300)) errors += count;
      }
      endpoints[op.name] = {
        count: values.length,
        p50: Math.round(percentile(values, 0.5) * 10) / 10,
        p99: Math.round(percentile(values, 0.99) * 10) / 10,
        max: Math.round((values.at(-1) ?? 0) * 10) / 10,
        statuses: counts,
      };
    }
    const latencies = [...receiver.latencies].sort((a, b) => a - b);
    const mb = (kb: number | undefined) => Math.round(((kb ?? 0) / 1024) * 10) / 10;
    const memory: SoakReport['memory'] = {};
    for (const role of Object.keys(endSample.rssKb)) {
      memory[role] = {
        startMb: mb(startSample.rssKb[role]),
        warmMb: mb(warmSample.rssKb[role]),
        endMb: mb(endSample.rssKb[role]),
        maxMb: mb(Math.max(...samples.map((s) => s.rssKb[role] ?? 0))),
      };
    }
    const walSamples = samples.map((s) => Math.round(((s.walBytes ?? 0) / 1048576) * 100) / 100);
    const statsDb = openDatabase({ url: config.databaseUrl });
    // On Postgres, this run's schema (the database may hold others).
    const bytes =
      engine === 'sqlite'
        ? await statsDb.sizeBytes()
        : Number(
            (
              await statsDb.knex.raw(
                `select coalesce(sum(pg_total_relation_size(c.oid)), 0) as size from pg_class c
                 join pg_namespace n on n.oid = c.relnamespace where n.nspname = current_schema() and c.relkind = 'r'`,
              )
            ).rows[0].size,
          );
    const databaseMb = Math.round((bytes / 1048576) * 10) / 10;
    await statsDb.close();
    const serverErrorLines = existsSync(logFile)
      ? readFileSync(logFile, 'utf8')
          .split('\n')
          .filter((line) => /"level":(50|60)\b/.test(line)).length
      : 0;
    return {
      engine,
      minutes: options.minutes,
      rate: options.rate,
      requests,
      dropped,
      errors,
      rateLimited,
      endpoints,
      deliveries: {
        events,
        received: receiver.arrivals.size,
        duplicates: receiver.duplicates(),
        pending: backlog.pending,
        failed: backlog.failed,
        p50: percentile(latencies, 0.5),
        p99: percentile(latencies, 0.99),
      },
      memory,
      wal: walFile
        ? { maxMb: Math.max(...walSamples), endMb: walSamples.at(-1)!, samplesMb: walSamples }
        : null,
      databaseMb,
      serverErrorLines,
    };
  } finally {
    await stopServer();
    receiver.server.closeAllConnections();
    await new Promise((resolve) => receiver.server.close(resolve));
    rmSync(home, { recursive: true, force: true });
    await postgres?.drop();
  }
}

export function printReport(report: SoakReport, log: (line: string) => void = console.log): void {
  log(
    `\nSoak on ${report.engine}: ${report.minutes} min at ${report.rate} requests/s: ${report.requests} requests, ` +
      `${report.errors} errors, ${report.rateLimited} rate-limited, ${report.dropped} dropped (over ${MAX_IN_FLIGHT} in flight)`,
  );
  log('endpoint                                   count   p50 ms   p99 ms   max ms  statuses');
  for (const [name, figures] of Object.entries(report.endpoints)) {
    log(
      `${name.padEnd(38)} ${String(figures.count).padStart(9)} ${figures.p50.toFixed(1).padStart(8)} ${figures.p99
        .toFixed(1)
        .padStart(8)} ${figures.max.toFixed(0).padStart(8)}  ${JSON.stringify(figures.statuses)}`,
    );
  }
  const d = report.deliveries;
  log(
    `webhooks: ${d.events} events, ${d.received} received (${d.duplicates} repeats), ${d.pending} pending and ${d.failed} failed after the drain; commit to arrival p50 ${d.p50} ms, p99 ${d.p99} ms`,
  );
  log('memory (RSS, MB)     start    warm     end     max');
  for (const [role, m] of Object.entries(report.memory)) {
    log(
      `${role.padEnd(16)} ${m.startMb.toFixed(1).padStart(7)} ${m.warmMb.toFixed(1).padStart(7)} ${m.endMb
        .toFixed(1)
        .padStart(7)} ${m.maxMb.toFixed(1).padStart(7)}`,
    );
  }
  if (report.wal) log(`WAL file: largest ${report.wal.maxMb} MB, ${report.wal.endMb} MB at the end`);
  log(`database: ${report.databaseMb} MB; error lines in the appliance's log: ${report.serverErrorLines}`);
}

const options = args();
const report = await runSoak(options);
printReport(report);
if (options.json) writeFileSync(options.json, JSON.stringify(report, null, 2));
