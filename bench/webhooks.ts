/*
 * Issue 6's figures, on SQLite and (with BENCH_DATABASE_URL) Postgres:
 *  - deliveries per second from the dispatcher to a local receiver answering 200, beside a bare loop that
 *    signs and POSTs the same payloads with the same HTTP client (DeliverySender: undici on our agent) at
 *    the same concurrency, in the same run (target: the dispatcher at least half the bare loop);
 *  - the time from an event's commit to its first attempt arriving at the receiver, p50 and p99 (target:
 *    p50 under 200 ms), with commit wake-ups (the default) and with polling alone;
 *  - the CPU time each party spent per delivery in both loops (from /proc on Linux): the loop's process,
 *    the receiver and, on Postgres, the database: the backends serving its connections (and, for reference,
 *    every Postgres process on the machine, which other load there shows up in).
 *
 *   node dist/bench/webhooks.js
 *
 * BENCH_DELIVERIES (default 5000) deliveries per throughput run, BENCH_CONCURRENCY (default 16) attempts in
 * flight for both loops (the dispatcher's `concurrency`, `perEndpointConcurrency` and `perOrganisationConcurrency`: one endpoint here),
 * BENCH_LATENCY_EVENTS (default 200) events for the latency figures, BENCH_ROUNDS (default 3) interleaved
 * rounds whose medians are reported, BENCH_CPU_PROF_DIR a directory to write a CPU profile of each
 * dispatcher run and bare loop to, BENCH_TARGETS=postgres (or sqlite) one engine only. The receiver is another process, as a customer's would be.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freshPostgresSchema } from './lib.js';
import { runRaw } from '../src/db/bound-rows.js';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { linkRefreshed } from '../src/events/payloads.js';
import { presentEvent, type EventRow } from '../src/events/store.js';
import { publishEvent } from '../src/webhooks/fan-out.js';
import { newId } from '../src/ids/ids.js';
import { silentLogger } from '../src/logging/logger.js';
import { SecretBox } from '../src/secrets/secret-box.js';
import { Dispatcher, type DispatcherServices } from '../src/webhooks/dispatch/dispatcher.js';
import { DeliverySender } from '../src/webhooks/dispatch/sender.js';
import { headerNames, signatureHeader } from '../src/webhooks/signature.js';

const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const LATENCY_EVENTS = Number(process.env.BENCH_LATENCY_EVENTS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

/** Linux counts process CPU time in ticks of 10 ms (USER_HZ 100). */
const TICK_MS = 10;

/** User plus system CPU time of a process in ms, from /proc; 0 where it cannot be read. */
function cpuMsOf(pid: number | string): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** CPU time of every Postgres process on this machine (backends, WAL writer, autovacuum…): the database's share. */
function postgresCpuMs(): number {
  let total = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') total += cpuMsOf(pid);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** Every run's connections carry this name, so that their backends can be told from other load's. */
const APPLICATION_NAME = `svc_bench_webhooks_${process.pid}`;

/**
 * CPU time of the Postgres backends serving this bench's connections, by pid. Other workers on the same
 * server (a shared machine) do not count, nor do the server's own processes (WAL writer, checkpointer,
 * autovacuum), which `postgresCpuMs` includes.
 */
async function backendsCpuMs(db: Database): Promise<Map<number, number>> {
  if (db.engine !== 'postgres') return new Map();
  const rows = await runRaw<{ pid: number }>(
    db.knex,
    'SELECT pid FROM pg_stat_activity WHERE application_name = ?',
    [APPLICATION_NAME],
  );
  return new Map(rows.map(({ pid }) => [pid, cpuMsOf(pid)]));
}

/**
 * CPU time per delivery, in µs, of the loop's own process, the database server (our backends, and every
 * Postgres process on the machine) and the receiver.
 */
interface CpuShare {
  loop: number;
  database: number;
  server: number;
  receiver: number;
}

/**
 * Runs `work` and returns what it returned with the CPU time each party spent per delivery on it, the
 * loop's own set-up included (the bare loop reads and serialises its bodies; the dispatcher starts).
 */
async function withCpu<T>(
  db: Database,
  receiver: Receiver,
  deliveries: number,
  work: () => Promise<T>,
): Promise<[T, CpuShare]> {
  const backends = await backendsCpuMs(db);
  const own = process.cpuUsage();
  const server = postgresCpuMs();
  const received = cpuMsOf(receiver.child.pid!);
  const result = await work();
  const used = process.cpuUsage(own);
  const serverUsed = postgresCpuMs() - server;
  const receiverUsed = cpuMsOf(receiver.child.pid!) - received;
  let backendsUsed = 0;
  for (const [pid, ms] of await backendsCpuMs(db)) backendsUsed += ms - (backends.get(pid) ?? 0);
  const perDelivery = (ms: number) => (ms * 1000) / deliveries;
  return [
    result,
    {
      loop: (used.user + used.system) / deliveries,
      database: perDelivery(backendsUsed),
      server: perDelivery(serverUsed),
      receiver: perDelivery(receiverUsed),
    },
  ];
}

function medianShare(shares: CpuShare[]): CpuShare {
  return {
    loop: median(shares.map((share) => share.loop)),
    database: median(shares.map((share) => share.database)),
    server: median(shares.map((share) => share.server)),
    receiver: median(shares.map((share) => share.receiver)),
  };
}

/** The receiver process: 200 to everything; tells the parent, by IPC, when each request arrived. */
function runReceiver(): void {
  let report = false;
  process.on('message', (message: { report?: boolean }) => {
    if (typeof message.report === 'boolean') report = message.report;
  });
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = performance.timeOrigin + performance.now();
      if (report) {
        const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id;
        process.send?.({ arrived: id, at });
      }
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    });
  });
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ port: (server.address() as { port: number }).port });
  });
}

interface Receiver {
  url: string;
  child: ChildProcess;
  report(on: boolean): void;
}

async function startReceiver(): Promise<Receiver> {
  const child = fork(fileURLToPath(import.meta.url), ['receiver'], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve) =>
    child.on('message', (message: { port?: number }) => message.port && resolve(message.port)),
  );
  return { url: `http://127.0.0.1:${port}/hook`, child, report: (on) => child.send({ report: on }) };
}

interface Target {
  name: string;
  url: string;
  cleanup(): Promise<void>;
}

/** BENCH_TARGETS=postgres (or sqlite) measures one engine only, e.g. to profile it. */
const WANTED = (process.env.BENCH_TARGETS ?? 'sqlite,postgres').split(',');

async function targets(): Promise<Target[]> {
  const list: Target[] = [];
  if (WANTED.includes('sqlite')) {
    const home = mkdtempSync(join(tmpdir(), 'svc-bench-webhooks-'));
    list.push({
      name: 'sqlite',
      url: `sqlite://${home}/svc.db`,
      cleanup: async () => rmSync(home, { recursive: true, force: true }),
    });
  }
  const base = process.env.BENCH_DATABASE_URL;
  if (base && WANTED.includes('postgres')) {
    const postgres = await freshPostgresSchema(base);
    const url = `${postgres.url}&application_name=${APPLICATION_NAME}`;
    list.push({ name: 'postgres', url, cleanup: postgres.drop });
  }
  return list;
}

interface Setup {
  db: Database;
  services: DispatcherServices;
  orgId: string;
  endpointId: string;
  secret: string;
}

async function setUp(url: string, receiverUrl: string, overrides: Record<string, unknown>): Promise<Setup> {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-home-'));
  const config = loadConfig({
    home,
    env: {},
    overrides: {
      databaseUrl: url,
      log: { level: 'silent' },
      dispatcher: {
        concurrency: CONCURRENCY,
        perEndpointConcurrency: CONCURRENCY,
        perOrganisationConcurrency: CONCURRENCY,
        ...overrides,
      },
      webhooks: { allowPrivateAddressesInTestMode: true }, // the receiver is on loopback
    },
  });
  // The configuration wants a home; nothing is written there (the database is `url`, the key made below).
  rmSync(home, { recursive: true, force: true });
  const db = openDatabase({ url });
  await migrateUp(db);
  const secrets = new SecretBox({ id: 'mk_bench', key: randomBytes(32) });
  const orgId = newId('org');
  const endpointId = newId('we');
  const secret = `whsec_${randomBytes(20).toString('hex')}`;
  const now = Date.now();
  await db.knex('organisations').insert({ id: orgId, name: 'bench', created_at: now });
  await db.knex('webhook_endpoints').insert({
    id: endpointId,
    org_id: orgId,
    mode: 'test',
    url: receiverUrl,
    enabled_events: JSON.stringify(['*']),
    disabled: false,
    secret_encrypted: secrets.seal(secret, endpointId),
    created_at: now,
    updated_at: now,
  });
  return {
    db,
    services: { db, clock: systemClock, logger: silentLogger, secrets, config },
    orgId,
    endpointId,
    secret,
  };
}

function eventData(i: number) {
  return linkRefreshed(
    { id: `link_${(i % 65536).toString(16).padStart(16, '0')}` },
    { syncedAt: Date.now(), nextSyncAt: Date.now() + 4 * 3_600_000, accountsCount: 3, newMovements: i % 17 },
  );
}

async function emitMany(setup: Setup, count: number): Promise<void> {
  for (let done = 0; done < count; done += 500) {
    await setup.db.transaction(async (trx) => {
      for (let i = done; i < Math.min(count, done + 500); i++) {
        await publishEvent(trx, {
          orgId: setup.orgId,
          mode: 'test',
          type: 'link.refreshed',
          linkId: null,
          data: eventData(i),
          now: Date.now(),
        });
      }
    });
  }
}

/**
 * Whether any delivery is still pending: one index probe, as cheap as can be, because it runs beside the
 * dispatcher it times, on a connection whose CPU is counted as the dispatcher's database's (a count of the
 * pending rows every 50 ms took a few per cent of a core, and the bare loop pays nothing like it). Ordered
 * by the due index's second column so that Postgres walks that index: unordered, once a fifth of the rows
 * were pending it chose a sequential scan, 10 ms at 50,000 rows, every 10 ms, and the Postgres CPU per
 * delivery rose from 72 µs in the first round to 177 µs in the fifth.
 */
async function anyPending(db: Database): Promise<boolean> {
  const first = await db
    .reader('webhook_deliveries')
    .where('status', 'pending')
    .orderBy('next_attempt_at')
    .first('id');
  return first !== undefined;
}

/** The same bodies, signed the same way, POSTed by the same client, `CONCURRENCY` at a time. */
async function bareLoop(setup: Setup, receiverUrl: string): Promise<number> {
  const rows: EventRow[] = await setup.db
    .reader('events')
    .where({ org_id: setup.orgId })
    .orderBy('seq', 'desc')
    .limit(DELIVERIES);
  const bodies = rows.map((row) => JSON.stringify(presentEvent(row)));
  const names = headerNames('svc');
  const sender = new DeliverySender({
    attemptTimeoutMs: 10_000,
    responseBytesKept: 2048,
  });
  let next = 0;
  let failures = 0;
  const began = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        const id = (JSON.parse(body) as { id: string }).id;
        const outcome = await sender.send(
          receiverUrl,
          true, // the dispatcher's own choice for a loopback receiver the operator allowed
          {
            'content-type': 'application/json',
            'user-agent': 'Svc-Webhooks/1.0',
            [names.signature]: signatureHeader([setup.secret], Math.floor(Date.now() / 1000), body),
            [names.eventId]: id,
          },
          body,
        );
        if (!outcome.ok) failures += 1;
      }
    }),
  );
  const seconds = (performance.now() - began) / 1000;
  await sender.close();
  if (failures > 0) throw new Error(`bare loop: ${failures} failures`);
  return bodies.length / seconds;
}

/**
 * With BENCH_CPU_PROF_DIR set, each dispatcher run and each bare loop is profiled on its own and written
 * there as a .cpuprofile, so the two can be compared function by function.
 */
async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_CPU_PROF_DIR;
  if (!dir) return work();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${name}-${Date.now()}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}

const PROBE = /^select ["`]id["`] from ["`]webhook_deliveries["`] where ["`]status["`] = \S+ order by/;

/** Statements the dispatcher ran in its last throughput run, by kind (their first words): how many, and
 * how long each kind took from send to answer in all (the database's work, the round trip, the parse). */
let statements = new Map<string, { n: number; ms: number }>();

function statementKind(sql: string): string {
  const words = sql.replace(/["`]/g, '').trim().split(/\s+/);
  const verb = words[0]!.toUpperCase();
  if (verb === 'INSERT') return `INSERT INTO ${words[2]}`;
  if (verb === 'UPDATE') return `UPDATE ${words[1]}${/RETURNING\s+id, org_id/.test(sql) ? ' (claim)' : ''}`;
  if (verb === 'SELECT' || verb === 'WITH') {
    const from = /\bfrom\s+(\w+)/i.exec(sql);
    return `${verb} … ${from?.[1] ?? ''}${/returning\s+id, org_id/i.test(sql) ? ' (claim)' : ''}`;
  }
  return verb.replace(/;$/, '');
}

interface QueryEvent {
  sql: string;
  __knexQueryUid: string;
}

/**
 * Counts and times the statements the dispatcher sends (knex's `query` and `query-response` events, which
 * its transactions inherit), and writes the throughput run's profile when asked.
 */
async function dispatcherThroughput(setup: Setup): Promise<number> {
  const counted = new Map<string, { n: number; ms: number }>();
  const sent = new Map<string, { kind: string; at: number }>();
  const count = ({ sql, __knexQueryUid: uid }: QueryEvent) => {
    if (PROBE.test(sql)) return; // anyPending's, the bench's own
    const kind = statementKind(sql);
    const seen = counted.get(kind) ?? { n: 0, ms: 0 };
    counted.set(kind, { n: seen.n + 1, ms: seen.ms });
    sent.set(uid, { kind, at: performance.now() });
  };
  const answered = (_response: unknown, { __knexQueryUid: uid }: QueryEvent) => {
    const query = sent.get(uid);
    if (!query) return;
    sent.delete(uid);
    counted.get(query.kind)!.ms += performance.now() - query.at;
  };
  const connections = new Set([setup.db.knex, setup.db.reader]);
  for (const knex of connections) knex.on('query', count).on('query-response', answered);
  try {
    return await profiled(`dispatcher-${setup.db.engine}`, () => dispatcherRun(setup));
  } finally {
    for (const knex of connections) knex.off('query', count).off('query-response', answered);
    statements = counted;
  }
}

function statementsLine(deliveries: number): string {
  const total = [...statements.values()].reduce((sum, { n }) => sum + n, 0);
  const kinds = [...statements]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(
      ([kind, { n, ms }]) =>
        `${kind} ${(n / deliveries).toFixed(3)} (${((ms * 1000) / deliveries).toFixed(0)} µs)`,
    )
    .join(', ');
  return `statements per delivery ${(total / deliveries).toFixed(2)} (last run; in brackets, send to answer per delivery, waits for a busy event loop included): ${kinds}`;
}

async function dispatcherRun(setup: Setup): Promise<number> {
  const dispatcher = new Dispatcher(setup.services);
  const controller = new AbortController();
  const began = performance.now();
  const running = dispatcher.run(controller.signal);
  // Checked every 10 ms: the end is known to within 1% of a run of a second.
  while (await anyPending(setup.db)) await sleep(10);
  const seconds = (performance.now() - began) / 1000;
  controller.abort();
  await running;
  return DELIVERIES / seconds;
}

async function latency(setup: Setup, receiver: Receiver): Promise<{ p50: number; p99: number; max: number }> {
  const arrivals = new Map<string, number>();
  const onMessage = (message: { arrived?: string; at?: number }) => {
    if (message.arrived && message.at) arrivals.set(message.arrived, message.at);
  };
  receiver.child.on('message', onMessage);
  receiver.report(true);
  const dispatcher = new Dispatcher(setup.services);
  const controller = new AbortController();
  const running = dispatcher.run(controller.signal);
  await sleep(300);
  const committed = new Map<string, number>();
  for (let i = 0; i < LATENCY_EVENTS; i++) {
    // Spaced out, so each event lands on an idle dispatcher at a random point of its poll cycle.
    await sleep(20 + Math.random() * 40);
    const event = await setup.db.transaction((trx) =>
      publishEvent(trx, {
        orgId: setup.orgId,
        mode: 'test',
        type: 'link.refreshed',
        linkId: null,
        data: eventData(i),
        now: Date.now(),
      }),
    );
    committed.set(event.id, performance.timeOrigin + performance.now());
  }
  const deadline = Date.now() + 10_000;
  while (arrivals.size < committed.size && Date.now() < deadline) await sleep(20);
  controller.abort();
  await running;
  receiver.report(false);
  receiver.child.off('message', onMessage);
  const delays = [...committed]
    .map(([id, at]) => (arrivals.get(id) ?? Number.POSITIVE_INFINITY) - at)
    .sort((a, b) => a - b);
  const pick = (q: number) => delays[Math.min(delays.length - 1, Math.floor(q * delays.length))]!;
  return { p50: pick(0.5), p99: pick(0.99), max: delays[delays.length - 1]! };
}

/**
 * Where the CPU went, per delivery: the throughput ratio is a ratio of CPU on a small machine, and this says
 * which party to look at. The database's share counts every local Postgres process, so other load on the
 * same server shows up in it; on SQLite the database works inside the dispatcher's process.
 */
/** Issue 17: the dispatcher and the database together, per delivery, against the bare loop's CPU. */
function costOf(share: CpuShare, postgres: boolean): number {
  return share.loop + (postgres ? share.database : 0);
}

/**
 * `rounds` pairs each round's bare loop with its dispatcher run; the ratio is the median of each round's
 * ratio: both halves of a round see the same bursts of other load on a shared machine, so it is steadier
 * than the ratio of the two medians (the bare loop alone ranged 85-135 µs over one hour's runs).
 */
function cpuLine(rounds: readonly [CpuShare, CpuShare][], postgres: boolean): string {
  const bare = medianShare(rounds.map(([share]) => share));
  const ours = medianShare(rounds.map(([, share]) => share));
  const us = (value: number) => `${value.toFixed(0)} µs`;
  const database = postgres
    ? `, Postgres ${us(ours.database)} (its backends; ${us(ours.server)} for every Postgres process on the machine)`
    : '';
  const ratios = rounds.map(([b, o]) => costOf(o, postgres) / b.loop);
  const versus = `dispatcher${postgres ? ' + Postgres' : ''} ${us(costOf(ours, postgres))} = ${median(ratios).toFixed(2)}× the bare loop (median of the rounds' ${ratios.map((r) => r.toFixed(2)).join(', ')}; target ≤ 2)`;
  return `CPU per delivery: bare loop ${us(bare.loop)} + receiver ${us(bare.receiver)}; dispatcher ${us(ours.loop)}${database} + receiver ${us(ours.receiver)}; ${versus}`;
}

async function main(): Promise<void> {
  const receiver = await startReceiver();
  const lines: string[] = [];
  try {
    for (const target of await targets()) {
      try {
        const setup = await setUp(target.url, receiver.url, {});
        // Interleaved rounds, medians reported; the first bare loop warms the client and the receiver.
        const bares: number[] = [];
        const ourss: number[] = [];
        const cpu: [CpuShare, CpuShare][] = [];
        await emitMany(setup, DELIVERIES);
        await bareLoop(setup, receiver.url);
        for (let round = 0; round < ROUNDS; round++) {
          if (round > 0) await emitMany(setup, DELIVERIES);
          // A table loaded in one burst has no planner statistics until autovacuum's next pass, and
          // Postgres then sorts every due row on each claim; a running appliance's table has them.
          if (setup.db.engine === 'postgres') await setup.db.knex.raw('vacuum analyze');
          const [bare, bareShare] = await withCpu(setup.db, receiver, DELIVERIES, () =>
            profiled(`bare-${setup.db.engine}`, () => bareLoop(setup, receiver.url)),
          );
          const [ours, ourShare] = await withCpu(setup.db, receiver, DELIVERIES, () =>
            dispatcherThroughput(setup),
          );
          bares.push(bare);
          ourss.push(ours);
          cpu.push([bareShare, ourShare]);
        }
        const bare = median(bares);
        const ours = median(ourss);
        const woken = await latency(setup, receiver);
        await setup.db.close();
        const polled = await (async () => {
          const quiet = await setUp(
            target.url.includes('sqlite') ? target.url.replace('svc.db', 'poll.db') : target.url,
            receiver.url,
            {
              wakeOnCommit: false,
            },
          );
          try {
            return await latency(quiet, receiver);
          } finally {
            await quiet.db.close();
          }
        })();
        const ms = (v: number) => `${v.toFixed(1)} ms`;
        lines.push(
          `${target.name.padEnd(8)} bare loop ${bare.toFixed(0)}/s, dispatcher ${ours.toFixed(0)}/s (${((ours / bare) * 100).toFixed(0)}%), ${DELIVERIES} deliveries at concurrency ${CONCURRENCY}, median of ${ROUNDS} (dispatcher rounds ${ourss.map((v) => v.toFixed(0)).join(', ')})`,
          `${target.name.padEnd(8)} commit → first attempt: p50 ${ms(woken.p50)}, p99 ${ms(woken.p99)} (wake on commit); polling alone every 500 ms: p50 ${ms(polled.p50)}, p99 ${ms(polled.p99)}`,
          `${target.name.padEnd(8)} ${cpuLine(cpu, target.name === 'postgres')}`,
          `${target.name.padEnd(8)} ${statementsLine(DELIVERIES)}`,
        );
        console.log(lines.slice(-4).join('\n'));
      } finally {
        await target.cleanup();
      }
    }
  } finally {
    receiver.child.kill();
  }
}

if (process.argv[2] === 'receiver') runReceiver();
else
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
