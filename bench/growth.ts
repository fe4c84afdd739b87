/*
 * Issue 17, item 2 ("a year at scale"): does the appliance stay as fast after a year of growth? Seeds a
 * large operator (many links, movements, events, deliveries, attempts and finished sync jobs spread over
 * twelve months) and a small one (1/50th) in the same run, set-based (bench/growth-seed.ts: INSERT ... SELECT
 * over a series, indexes built after the rows), and measures every figure on both, interleaved round by
 * round in one process (on two shared cores only interleaved runs compare), printing medians, p99 and the
 * ratio large/small. Target: p99 ratio ≤ 1.5×.
 *
 * Figures: movement pages over real HTTP with a real API key (30 and 300 per page, first and deep), the
 * `synced_since` cursor feed, the event list and the delivery list with filters, a one-row GET, the income
 * snapshot (`GET /v1/links/{id}/income` of the measured account's link), the dispatcher's claim (`claimDue`,
 * rolled back so every round claims the same rows), a scheduler tick (`enqueueDueLinks`), a sync of one link
 * (claim and run on the sandbox connector), and commit-to-first-attempt (the dispatcher in this process
 * delivering to a local receiver, as bench/webhooks.ts measures it).
 *
 * Then housekeeping as production runs it, in a process of its own (bench/growth-prune.ts, the scheduler's
 * part): GROWTH_PRUNE_ROUNDS passes on the large database, each beside a quiet window of the same length,
 * while this process takes one-row GETs and claims (target: p99 during ≤ 1.5× quiet); the rest of the
 * year's backlog drained with `maxRowsPerPass` raised to GROWTH_DRAIN_ROWS (only to save time); the database
 * size before and after. Last the steady state: GROWTH_DAYS simulated days of the large operator's load
 * (a day's events, deliveries, attempts and finished jobs), each followed by housekeeping with its clock a
 * day on (and, on Postgres, a plain VACUUM as autovacuum would run), printing the size per day (target: flat
 * after the first retention cycle).
 *
 *   npm run bench:growth                                   (SQLite; defaults run in a few minutes)
 *   SVC_BENCH_DATABASE_URL=postgres://… npm run bench:growth   (a fresh schema per database, dropped after)
 *
 * Scale: GROWTH_LINKS (2000), GROWTH_MOVEMENTS (500000), GROWTH_EVENTS (500000; one delivery and one attempt
 * each, half as many finished jobs); GROWTH_ROUNDS (5), GROWTH_REQUESTS (requests per figure per round, 20),
 * GROWTH_PRUNE_ROUNDS (6), GROWTH_DRAIN_ROWS (500000), GROWTH_DAYS (10). The issue's full run is
 * GROWTH_LINKS=100000 GROWTH_MOVEMENTS=10000000 GROWTH_EVENTS=3000000 on Postgres (seeds in minutes); SQLite
 * as far as one file sensibly goes (GROWTH_LINKS=50000 GROWTH_MOVEMENTS=5000000 GROWTH_EVENTS=1500000).
 */
import { ConsentClients } from '../src/banks/consent/client.js';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import type { Config } from '../src/config/defaults.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';
import { silentLogger } from '../src/logging/logger.js';
import { enqueueDueLinks } from '../src/scheduler/enqueue-due.js';
import { claimJob, syncJob } from '../src/jobs/jobs.js';
import { loadSecretBox } from '../src/secrets/master-key-file.js';
import type { SecretBox } from '../src/secrets/secret-box.js';
import { defaultConnectors } from '../src/banks/default-connectors.js';
import { runSyncJob } from '../src/sync/engine.js';
import { Dispatcher } from '../src/webhooks/dispatch/dispatcher.js';
import { publishEvent } from '../src/webhooks/fan-out.js';
import { linkRefreshed } from '../src/events/payloads.js';
import { claimDue } from '../src/webhooks/dispatch/queue.js';
import { freshPostgresSchema, startApi, stop } from './lib.js';
import { DAY, hexOf, seedDay, seedSetBased } from './growth-seed.js';
import type { PassReport, PassRequest } from './growth-prune.js';

const LINKS = Number(process.env.GROWTH_LINKS ?? 2000);
const MOVEMENTS = Number(process.env.GROWTH_MOVEMENTS ?? 500_000);
const EVENTS = Number(process.env.GROWTH_EVENTS ?? 500_000);
const ROUNDS = Number(process.env.GROWTH_ROUNDS ?? 5);
const REQUESTS = Number(process.env.GROWTH_REQUESTS ?? 20);
/** The account whose pages are measured holds the same number of movements on both databases. */
const BIG = 5_000;
const PENDING = 200;
const NOW = Date.now();
const BASE_URL = process.env.SVC_BENCH_DATABASE_URL ?? process.env.BENCH_DATABASE_URL;

interface Scale {
  links: number;
  movements: number;
  events: number;
}

interface Instance {
  label: string;
  scale: Scale;
  home: string;
  db: Database;
  config: Config;
  secret: string;
  account: string;
  /** The measured account's link (the income snapshot's). */
  link: string;
  cursor: string;
  endpoint: string;
  eventId: string;
  api?: Awaited<ReturnType<typeof startApi>>;
  drop?: () => Promise<void>;
  seedSeconds: number;
  /** How far the scheduler tick's clock is moved: a minute more for every tick. */
  tickOffset: number;
  /** How far housekeeping's clock is moved: a minute more for every pass, so each pass wins its tick. */
  clockOffset: number;
  secrets: SecretBox;
  orgId: string;
  /** A link with real (sealed) sandbox credentials, for the sync figure. */
  syncLink: string;
  /** An endpoint at the local receiver subscribed to `link.expired` only, for commit-to-first-attempt. */
  receiverEndpoint?: string;
  /** The housekeeping process (bench/growth-prune.ts), forked when pruning starts. */
  pruner?: Pruner;
}

async function seed(db: Database, orgId: string, scale: Scale, label: string) {
  const endpoint = hexOf('we', 0);
  await seedSetBased(
    db,
    scale,
    { orgId, now: NOW, big: BIG, pending: PENDING, endpointId: endpoint },
    (step) =>
      process.stderr.write(
        `seeding ${label}: ${step} (${((performance.now() - seedStarted) / 1000).toFixed(0)} s)\n`,
      ),
  );
  const account = hexOf('acc', 0);
  // A cursor half-way through the big account's feed.
  const mid = await db
    .knex('movements')
    .where({ account_id: account })
    .orderBy('synced_at')
    .offset(BIG / 2)
    .first('synced_at');
  return {
    account,
    link: hexOf('link', 0),
    cursor: new Date(Number(mid.synced_at)).toISOString(),
    endpoint,
    eventId: hexOf('evt', scale.events - 1),
  };
}

let seedStarted = 0;

async function setUp(label: string, scale: Scale): Promise<Instance> {
  const home = mkdtempSync(join(tmpdir(), `svc-bench-growth-${label}-`));
  const env = { SVC_HOME: home };
  const postgres = BASE_URL ? await freshPostgresSchema(BASE_URL) : undefined;
  await install({ home, env, databaseUrl: postgres?.url, clock: systemClock, actor: 'bench' });
  const config = loadConfig({ home, env });
  // The receiver of the commit-to-first-attempt figure is on loopback.
  writeFileSync(
    join(home, 'config.json'),
    JSON.stringify({
      databaseUrl: config.databaseUrl,
      log: { level: 'warn' },
      webhooks: { allowPrivateAddressesInTestMode: true },
    }),
  );
  const db = openDatabase({ url: config.databaseUrl });
  const org = await db.knex('organisations').first('id');
  seedStarted = performance.now();
  process.stderr.write(`seeding ${label}: ${JSON.stringify(scale)}\n`);
  const seeded = await seed(db, org.id, scale, label);
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  const secrets = loadSecretBox({ masterKeyFile: config.masterKeyFile, masterKey: config.masterKey });
  // The sync figure's link: real sealed credentials for the sandbox, never due for the scheduler tick.
  const syncLink = hexOf('link', scale.links);
  await db.knex('links').insert({
    id: syncLink,
    org_id: org.id,
    mode: 'test',
    bank_id: 'bancochile',
    holder_type: 'individual',
    status: 'active',
    credentials_encrypted: secrets.seal(
      JSON.stringify({ rut: '11111111-1', password: 'sandbox', rutEmpresa: null }),
      syncLink,
    ),
    next_sync_at: NOW + 100 * DAY,
    created_at: NOW - 365 * DAY,
    updated_at: NOW,
  });
  const { secret } = await db.transaction((trx) =>
    createApiKey(trx, {
      brand: config.brand,
      orgId: org.id,
      mode: 'test',
      type: 'secret',
      rateLimits: {
        read: { perMinute: 100_000_000, burst: 1_000_000 },
        webhook_deliveries: { perMinute: 100_000_000, burst: 1_000_000 },
      },
      actor: 'bench',
      now: Date.now(),
    }),
  );
  const instance: Instance = {
    label,
    scale,
    home,
    db,
    config: loadConfig({ home, env }),
    secret,
    secrets,
    syncLink,
    orgId: org.id,
    ...seeded,
    seedSeconds,
    clockOffset: 0,
    tickOffset: 0,
    drop: postgres?.drop,
  };
  await syncOnce(instance, 'full'); // the link's first sync: its accounts and history
  return instance;
}

async function tearDown(instance: Instance): Promise<void> {
  if (instance.api) await stop(instance.api.process);
  if (instance.pruner) await instance.pruner.close();
  await instance.db.close();
  rmSync(instance.home, { recursive: true, force: true });
  await instance.drop?.();
}

async function get(instance: Instance, path: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${instance.api!.url}${path}`, {
    headers: { authorization: `Bearer ${instance.secret}` },
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`${path}: ${response.status}`);
  return performance.now() - started;
}

class Rollback extends Error {}

/** One claim of up to 32 due deliveries, rolled back so that the next claim finds the same rows. */
async function claim(db: Database): Promise<number> {
  const started = performance.now();
  let claimed = 0;
  try {
    await db.transaction(async (trx: Knex.Transaction) => {
      const rows = await claimDue(db, trx, {
        token: 'bench',
        now: Date.now(),
        leaseMs: 30_000,
        busy: { endpoints: [], organisations: [] },
        limit: 32,
      });
      claimed = rows.length;
      throw new Rollback();
    });
  } catch (error) {
    if (!(error instanceof Rollback)) throw error;
  }
  if (claimed === 0) throw new Error('the claim found no due deliveries');
  return performance.now() - started;
}

/** One scheduler tick a minute after the last: enqueues the links due in that minute. */
async function tick(instance: Instance): Promise<number> {
  instance.tickOffset += 60_000;
  const now = Date.now() + instance.tickOffset;
  const started = performance.now();
  await enqueueDueLinks(instance.db, now, instance.config.scheduler.syncIntervalMinutes * 60_000);
  return performance.now() - started;
}

/** Bytes the schema's tables take: SQLite after a checkpoint (file size and used pages), Postgres summed. */
async function size(db: Database): Promise<{ bytes: number; used: number }> {
  if (db.engine === 'postgres') {
    const result = await db.knex.raw(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS size
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind = 'r'`);
    const bytes = Number(result.rows[0].size);
    return { bytes, used: bytes };
  }
  await db.knex.raw('PRAGMA wal_checkpoint(TRUNCATE)');
  const pages = Number((await db.knex.raw('PRAGMA page_count'))[0].page_count);
  const free = Number((await db.knex.raw('PRAGMA freelist_count'))[0].freelist_count);
  const pageSize = Number((await db.knex.raw('PRAGMA page_size'))[0].page_size);
  return { bytes: await db.sizeBytes(), used: (pages - free) * pageSize };
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
};
const ms = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(1));
const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;

interface Figure {
  label: string;
  run(instance: Instance): Promise<number>;
}

/** Each figure, round by round: REQUESTS samples on the small database, then on the large one. */
async function measureInterleaved(figures: Figure[], small: Instance, large: Instance) {
  const samples = new Map(figures.map((f) => [f.label, { small: [] as number[], large: [] as number[] }]));
  for (let round = 0; round <= ROUNDS; round++) {
    for (const figure of figures) {
      for (const instance of round % 2 === 0 ? [small, large] : [large, small]) {
        const taken: number[] = [];
        for (let i = 0; i < REQUESTS; i++) taken.push(await figure.run(instance));
        if (round > 0) samples.get(figure.label)![instance === small ? 'small' : 'large'].push(...taken);
      }
    }
    process.stderr.write(`\rmeasuring: round ${round}/${ROUNDS}`);
  }
  process.stderr.write('\n');
  return samples;
}

function row(label: string, small: number[], large: number[], target = 'p99 ratio ≤ 1.5×') {
  const ratio = quantile(large, 0.99) / quantile(small, 0.99);
  return `| ${label} | ${ms(quantile(small, 0.5))} / ${ms(quantile(small, 0.99))} | ${ms(quantile(large, 0.5))} / ${ms(
    quantile(large, 0.99),
  )} | ${(quantile(large, 0.5) / quantile(small, 0.5)).toFixed(2)}× / ${ratio.toFixed(2)}× | ${target}${
    ratio <= 1.5 ? '' : ' **missed**'
  } |`;
}

/** One sync of the sync figure's link (claim and run, as a worker does), on the sandbox connector. */
async function syncOnce(instance: Instance, kind: 'full' | 'scheduled' = 'scheduled'): Promise<number> {
  const { db } = instance;
  // run_at 1: the first due job, ahead of those the scheduler tick figure queues.
  await db.knex('jobs').insert({
    ...syncJob(
      { id: instance.syncLink, org_id: instance.orgId },
      { refresh_type: kind, interactive: false },
      Date.now(),
    ),
    run_at: 1,
  });
  const started = performance.now();
  const job = await claimJob(db, 'bench', Date.now(), 600_000);
  if (job?.link_id !== instance.syncLink) throw new Error(`claimed ${job?.link_id} instead of the sync link`);
  const outcome = await runSyncJob(
    {
      db,
      clock: systemClock,
      secrets: instance.secrets,
      logger: silentLogger,
      config: instance.config,
      connectors: defaultConnectors(instance.config),
      // No consent link here: the clients are never opened, so there is nothing to close.
      consentClients: new ConsentClients(instance.secrets),
    },
    job,
  );
  const elapsed = performance.now() - started;
  if (outcome.status !== 'succeeded') throw new Error(`sync ${outcome.status}`);
  await db
    .knex('links')
    .where({ id: instance.syncLink })
    .update({ next_sync_at: NOW + 100 * DAY });
  return elapsed;
}

/** The receiver process: 200 to everything; tells the parent, by IPC, when each request arrived. */
function runReceiver(): void {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = performance.timeOrigin + performance.now();
      const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id;
      process.send?.({ arrived: id, at });
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    });
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as { port: number }).port }));
  process.on('disconnect', () => process.exit(0));
}

interface Receiver {
  url: string;
  child: ChildProcess;
  arrivals: Map<string, number>;
}

async function startReceiver(): Promise<Receiver> {
  const child = fork(fileURLToPath(import.meta.url), ['receiver'], { stdio: 'inherit' });
  const arrivals = new Map<string, number>();
  const port = await new Promise<number>((resolve) =>
    child.on('message', (message: { port?: number; arrived?: string; at?: number }) => {
      if (message.port) resolve(message.port);
      if (message.arrived && message.at) arrivals.set(message.arrived, message.at);
    }),
  );
  return { url: `http://127.0.0.1:${port}/hook`, child, arrivals };
}

/**
 * Commit-to-first-attempt (as bench/webhooks.ts measures it): the dispatcher runs in this process with its
 * commit wake-ups; `count` events, spaced out, are committed for an endpoint at the local receiver, and each
 * one's delay is the time from its commit to its first attempt's arrival. The seeded endpoint's pending
 * deliveries (at an address that does not answer) are moved out of the way meanwhile, so that the
 * dispatcher's work is the measured deliveries and they stay due for the claim figure.
 */
async function commitToFirstAttempt(
  instance: Instance,
  receiver: Receiver,
  count: number,
): Promise<number[]> {
  const { db } = instance;
  if (!instance.receiverEndpoint) {
    instance.receiverEndpoint = hexOf('we', 1);
    await db.knex('webhook_endpoints').insert({
      id: instance.receiverEndpoint,
      org_id: instance.orgId,
      mode: 'test',
      url: receiver.url,
      enabled_events: JSON.stringify(['link.expired']),
      disabled: false,
      secret_encrypted: instance.secrets.seal('whsec_bench', instance.receiverEndpoint),
      created_at: Date.now(),
      updated_at: Date.now(),
    });
  }
  const shift = 1000 * DAY;
  const moveSeeded = (by: number) =>
    db.transaction((trx) =>
      trx('webhook_deliveries')
        .where({ endpoint_id: instance.endpoint, status: 'pending' })
        .update({ next_attempt_at: trx.raw('next_attempt_at + ?', [by]) }),
    );
  await moveSeeded(shift);
  const dispatcher = new Dispatcher({
    db,
    clock: systemClock,
    logger: silentLogger,
    secrets: instance.secrets,
    config: instance.config,
  });
  const controller = new AbortController();
  const running = dispatcher.run(controller.signal);
  const committed = new Map<string, number>();
  try {
    await sleep(300);
    for (let i = 0; i < count; i++) {
      await sleep(20 + Math.random() * 40);
      const event = await db.transaction((trx) =>
        publishEvent(trx, {
          orgId: instance.orgId,
          mode: 'test',
          type: 'link.expired',
          linkId: null,
          data: linkRefreshed(
            { id: instance.link },
            { syncedAt: Date.now(), nextSyncAt: Date.now(), accountsCount: 1, newMovements: i },
          ) as never,
          now: Date.now(),
        }),
      );
      committed.set(event.id, performance.timeOrigin + performance.now());
    }
    const deadline = Date.now() + 10_000;
    while ([...committed.keys()].some((id) => !receiver.arrivals.has(id)) && Date.now() < deadline)
      await sleep(20);
  } finally {
    controller.abort();
    await running;
    await moveSeeded(-shift);
  }
  return [...committed].map(([id, at]) => (receiver.arrivals.get(id) ?? Number.POSITIVE_INFINITY) - at);
}

/** The housekeeping process of one instance (bench/growth-prune.ts), one pass per request. */
class Pruner {
  private readonly child: ChildProcess;
  private readonly ready: Promise<void>;
  private waiting: ((report: PassReport) => void) | null = null;

  constructor(home: string) {
    this.child = fork(fileURLToPath(new URL('./growth-prune.js', import.meta.url)), [home], {
      stdio: 'inherit',
    });
    this.ready = new Promise((resolve) =>
      this.child.on('message', (message: PassReport | { ready: true }) => {
        if ('ready' in message) resolve();
        else this.waiting?.(message);
      }),
    );
  }

  async pass(request: PassRequest): Promise<PassReport> {
    await this.ready;
    const report = new Promise<PassReport>((resolve) => (this.waiting = resolve));
    this.child.send(request);
    return report;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.send({ exit: true });
    await exited;
  }
}

/** One housekeeping pass in the instance's housekeeping process, its clock a minute past the last. */
async function pass(instance: Instance, maxRowsPerPass?: number): Promise<PassReport> {
  instance.pruner ??= new Pruner(instance.home);
  const report = await instance.pruner.pass({ offsetMs: instance.clockOffset, maxRowsPerPass });
  instance.clockOffset += 60_000;
  return report;
}

/** Passes until one removes less than a batch (at most `maxPasses`). */
async function drain(instance: Instance, maxPasses: number, maxRowsPerPass?: number): Promise<PassReport[]> {
  const passes: PassReport[] = [];
  const vacuum = await autovacuumOff(instance.db);
  for (let i = 0; i < maxPasses; i++) {
    // Where the server runs without autovacuum (this machine's test server does), a plain VACUUM of the
    // pruned tables every five passes stands in for it: otherwise each batch's index walk steps over every
    // row removed before it, and the drain slows pass by pass (measured: 258,000 rows per 20 s pass down to
    // 66,000 by the 24th).
    if (vacuum && i > 0 && i % 5 === 0) await instance.db.knex.raw(`VACUUM ${PRUNED_TABLES.join(', ')}`);
    const report = await pass(instance, maxRowsPerPass);
    passes.push(report);
    process.stderr.write(
      `\rdraining ${instance.label}: pass ${i + 1}, ${report.removed} rows in ${(report.ms / 1000).toFixed(1)} s   `,
    );
    // Done when a pass removes less than a batch: the backlog is gone, and what is left is the trickle that
    // crosses the cut-off in each minute the clock moves (a pass removing nothing may never come).
    if (report.removed < instance.config.retention.batchSize) break;
  }
  process.stderr.write('\n');
  return passes;
}

const PRUNED_TABLES = ['events', 'webhook_deliveries', 'jobs'];

/** Whether the database is Postgres with autovacuum turned off. */
async function autovacuumOff(db: Database): Promise<boolean> {
  if (db.engine !== 'postgres') return false;
  const result = await db.knex.raw('SHOW autovacuum');
  return result.rows[0].autovacuum === 'off';
}

/** Bytes per pruned table (Postgres: `pg_total_relation_size`, indexes and TOAST included). */
async function tableSizes(db: Database): Promise<Record<string, number>> {
  const sizes: Record<string, number> = {};
  if (db.engine !== 'postgres') return sizes;
  for (const table of PRUNED_TABLES) {
    const result = await db.knex.raw(`SELECT pg_total_relation_size(?::regclass) AS size`, [table]);
    sizes[table] = Number(result.rows[0].size);
  }
  return sizes;
}

/** Bytes of the SQLite file plus its WAL, before any checkpoint. */
async function sqliteFileAndWal(instance: Instance): Promise<number> {
  const { statSync } = await import('node:fs');
  const file = join(instance.home, 'svc.db');
  const bytes = (path: string) => {
    try {
      return statSync(path).size;
    } catch {
      return 0;
    }
  };
  return bytes(file) + bytes(`${file}-wal`);
}

const GROWTH_DAYS = Number(process.env.GROWTH_DAYS ?? 10);
/** Passes of the pruning-beside-load comparison, each beside a quiet window of the same figures. */
const PRUNE_ROUNDS = Number(process.env.GROWTH_PRUNE_ROUNDS ?? 6);
/** Rows per kind per pass while draining the year's backlog after the measured passes (default 20,000). */
const DRAIN_ROWS = Number(process.env.GROWTH_DRAIN_ROWS ?? 500_000);

async function main() {
  const engine = BASE_URL ? 'postgres' : 'sqlite';
  const largeScale = { links: LINKS, movements: MOVEMENTS, events: EVENTS };
  const smallScale = {
    links: Math.max(2, Math.ceil(LINKS / 50)),
    movements: Math.max(BIG + 1000, Math.ceil(MOVEMENTS / 50)),
    events: Math.max(PENDING + 1000, Math.ceil(EVENTS / 50)),
  };
  const instances: Instance[] = [];
  let receiver: Receiver | undefined;
  try {
    const small = await setUp('small', smallScale);
    instances.push(small);
    const large = await setUp('large', largeScale);
    instances.push(large);
    for (const instance of instances) instance.api = await startApi(instance.home);
    receiver = await startReceiver();

    const visible = await small.db.knex('accounts').where({ id: small.account }).first('visible_count');
    const deep30 = Math.ceil(Number(visible.visible_count) / 30);
    const deep300 = Math.ceil(Number(visible.visible_count) / 300);
    const movements = (i: Instance) => `/v1/accounts/${i.account}/movements`;
    const figures: Figure[] = [
      { label: 'movements, 30/page, first', run: (i) => get(i, `${movements(i)}?per_page=30&page=1`) },
      {
        label: `movements, 30/page, page ${deep30}`,
        run: (i) => get(i, `${movements(i)}?per_page=30&page=${deep30}`),
      },
      { label: 'movements, 300/page, first', run: (i) => get(i, `${movements(i)}?per_page=300&page=1`) },
      {
        label: `movements, 300/page, page ${deep300}`,
        run: (i) => get(i, `${movements(i)}?per_page=300&page=${deep300}`),
      },
      {
        label: 'movements feed (synced_since, 300)',
        run: (i) =>
          get(
            i,
            `${movements(i)}?synced_since=${i.cursor}&include_removals=true&confirmed_only=false&per_page=300`,
          ),
      },
      {
        label: 'events, type filter, 30/page',
        run: (i) => get(i, '/v1/events?type=link.refreshed&per_page=30'),
      },
      {
        label: 'deliveries, status=failed, 30/page',
        run: (i) => get(i, '/v1/webhook_deliveries?status=failed&per_page=30'),
      },
      {
        label: 'deliveries, endpoint filter, 30/page',
        run: (i) => get(i, `/v1/webhook_deliveries?endpoint_id=${i.endpoint}&per_page=30`),
      },
      { label: 'one event (GET /v1/events/{id})', run: (i) => get(i, `/v1/events/${i.eventId}`) },
      {
        label: 'income snapshot (GET /v1/links/{id}/income)',
        run: (i) => get(i, `/v1/links/${i.link}/income`),
      },
      { label: 'dispatcher claim (32 rows, rolled back)', run: (i) => claim(i.db) },
      { label: 'scheduler tick (enqueueDueLinks)', run: tick },
      { label: 'sync of one link (sandbox, claim + run)', run: (i) => syncOnce(i) },
    ];
    const samples = await measureInterleaved(figures, small, large);

    // Commit-to-first-attempt, round by round on each database in turn.
    const c2fa = { small: [] as number[], large: [] as number[] };
    for (let round = 0; round <= ROUNDS; round++) {
      for (const instance of round % 2 === 0 ? [small, large] : [large, small]) {
        const delays = await commitToFirstAttempt(instance, receiver, REQUESTS);
        if (round > 0) c2fa[instance === small ? 'small' : 'large'].push(...delays);
      }
      process.stderr.write(`\rcommit-to-first-attempt: round ${round}/${ROUNDS}`);
    }
    process.stderr.write('\n');

    const scaleText = (s: Scale) => `${s.links} links, ${s.movements} movements, ${s.events} events`;
    console.log(
      `\nGrowth (${engine}; small: ${scaleText(smallScale)}, seeded in ${small.seedSeconds.toFixed(0)} s; large: ${scaleText(
        largeScale,
      )}, seeded in ${large.seedSeconds.toFixed(0)} s; ${ROUNDS} interleaved rounds of ${REQUESTS} requests per figure)\n`,
    );
    console.log('| figure | small p50 / p99 ms | large p50 / p99 ms | ratio p50 / p99 | target |');
    console.log('| --- | --- | --- | --- | --- |');
    for (const figure of figures) {
      const s = samples.get(figure.label)!;
      console.log(row(figure.label, s.small, s.large));
    }
    console.log(row('commit-to-first-attempt (dispatcher, local receiver)', c2fa.small, c2fa.large));
    const sizes = new Map<Instance, Awaited<ReturnType<typeof size>>>();
    for (const instance of instances) sizes.set(instance, await size(instance.db));
    const tablesBefore = await tableSizes(large.db);

    // Pruning beside load, as production runs it: housekeeping in its own process (the scheduler's) on the
    // large database, one pass at a time, while this process takes one-row GETs and claims; each pass
    // beside a quiet window of the same figures just before it.
    const quiet = { get: [] as number[], claim: [] as number[] };
    const during = { get: [] as number[], claim: [] as number[] };
    const measuredPasses: PassReport[] = [];
    const smallPasses = [await pass(small)];
    for (let round = 0; round < PRUNE_ROUNDS; round++) {
      const quietUntil = performance.now() + (measuredPasses.at(-1)?.ms ?? 3000);
      while (performance.now() < quietUntil) {
        quiet.get.push(await get(large, `/v1/events/${large.eventId}`));
        quiet.claim.push(await claim(large.db));
      }
      let pruning = true;
      const running = pass(large).finally(() => (pruning = false));
      while (pruning) {
        during.get.push(await get(large, `/v1/events/${large.eventId}`));
        during.claim.push(await claim(large.db));
      }
      measuredPasses.push(await running);
      process.stderr.write(`\rpruning beside load: pass ${round + 1}/${PRUNE_ROUNDS}`);
    }
    process.stderr.write('\n');
    console.log(
      `\nPruning beside load (large; housekeeping in its own process, ${PRUNE_ROUNDS} passes each beside a quiet window of the same length; ${quiet.get.length} quiet and ${during.get.length} during samples)\n`,
    );
    console.log('| figure | quiet p50 / p99 ms | during pruning p50 / p99 ms | ratio p50 / p99 | target |');
    console.log('| --- | --- | --- | --- | --- |');
    console.log(row('one event GET', quiet.get, during.get));
    console.log(row('dispatcher claim', quiet.claim, during.claim));
    console.log(
      `\nmeasured passes (large): ${measuredPasses.map((p) => `${p.removed} rows in ${(p.ms / 1000).toFixed(2)} s`).join('; ')}`,
    );

    // The rest of the year's backlog, faster: `maxRowsPerPass` raised (the pass's 20 s budget still holds).
    if (await autovacuumOff(large.db))
      console.log(
        '\n(autovacuum is off on this server: the drain runs a plain VACUUM of the pruned tables every five passes)',
      );
    const drainStarted = performance.now();
    const largeRest = await drain(large, 100_000, DRAIN_ROWS);
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    smallPasses.push(...(await drain(small, 100_000, DRAIN_ROWS)));
    const after = new Map<Instance, Awaited<ReturnType<typeof size>>>();
    for (const instance of instances) after.set(instance, await size(instance.db));
    const tablesAfter = await tableSizes(large.db);

    console.log('\n| housekeeping | small | large |');
    console.log('| --- | --- | --- |');
    const total = (passes: PassReport[]) => passes.reduce((sum, p) => sum + p.removed, 0);
    const time = (passes: PassReport[]) => passes.reduce((sum, p) => sum + p.ms, 0);
    const allLarge = [...measuredPasses, ...largeRest];
    console.log(
      `| first pass (production settings) | ${smallPasses[0]!.removed} rows in ${(smallPasses[0]!.ms / 1000).toFixed(2)} s | ${measuredPasses[0]!.removed} rows in ${(
        measuredPasses[0]!.ms / 1000
      ).toFixed(2)} s |`,
    );
    console.log(
      `| until a pass removes less than a batch (after the first ${PRUNE_ROUNDS} large passes: maxRowsPerPass ${DRAIN_ROWS}) | ${total(smallPasses)} rows, ${smallPasses.length} passes, ${(
        time(smallPasses) / 1000
      ).toFixed(
        1,
      )} s | ${total(allLarge)} rows, ${allLarge.length} passes, ${(time(allLarge) / 1000).toFixed(1)} s (drain ${drainSeconds.toFixed(0)} s) |`,
    );
    const sizeText = (s: { bytes: number; used: number }) =>
      engine === 'sqlite' ? `${mb(s.bytes)} file, ${mb(s.used)} in use` : mb(s.bytes);
    console.log(`| size before pruning | ${sizeText(sizes.get(small)!)} | ${sizeText(sizes.get(large)!)} |`);
    console.log(`| size after pruning | ${sizeText(after.get(small)!)} | ${sizeText(after.get(large)!)} |`);
    if (engine === 'postgres')
      console.log(
        `\nlarge, pruned tables before → after pruning (no VACUUM yet): ${PRUNED_TABLES.map((t) => `${t} ${mb(tablesBefore[t]!)} → ${mb(tablesAfter[t]!)}`).join(', ')}`,
      );

    // Steady state: GROWTH_DAYS days of the large operator's load, a day of housekeeping after each.
    const perDay = Math.round(EVENTS / 365);
    const jobsPerDay = Math.round(EVENTS / 2 / 365);
    console.log(
      `\nSteady state (large): each day ${perDay} events, deliveries and attempts and ${jobsPerDay} finished jobs, then housekeeping with its clock a day on${
        engine === 'postgres' ? ', then a plain VACUUM (as autovacuum would)' : ''
      }\n`,
    );
    console.log(
      engine === 'postgres'
        ? `| day | rows pruned | ${PRUNED_TABLES.join(' | ')} | all tables |\n${'| --- '.repeat(PRUNED_TABLES.length + 3)}|`
        : '| day | rows pruned | file + WAL before checkpoint | file | in use |\n| --- | --- | --- | --- | --- |',
    );
    let next = EVENTS + 1000;
    for (let day = 1; day <= GROWTH_DAYS; day++) {
      const start = Date.now() + large.clockOffset;
      await seedDay(
        large.db,
        { orgId: large.orgId, endpointId: large.endpoint, links: LINKS },
        { start, first: next, events: perDay, jobs: jobsPerDay },
      );
      next += perDay;
      large.clockOffset += DAY;
      const passes = await drain(large, 1000);
      if (engine === 'postgres') await large.db.knex.raw('VACUUM'); // as autovacuum would, between days
      const wal = engine === 'sqlite' ? await sqliteFileAndWal(large) : 0;
      const now = await size(large.db);
      const tables = await tableSizes(large.db);
      const removed = passes.reduce((sum, p) => sum + p.removed, 0);
      const seconds = passes.reduce((sum, p) => sum + p.ms, 0) / 1000;
      console.log(
        engine === 'postgres'
          ? `| ${day} | ${removed} in ${seconds.toFixed(1)} s | ${PRUNED_TABLES.map((t) => mb(tables[t]!)).join(' | ')} | ${mb(now.bytes)} |`
          : `| ${day} | ${removed} in ${seconds.toFixed(1)} s | ${mb(wal)} | ${mb(now.bytes)} | ${mb(now.used)} |`,
      );
      process.stderr.write(`\rsteady state: day ${day}/${GROWTH_DAYS}`);
    }
    process.stderr.write('\n');
  } finally {
    if (receiver) receiver.child.kill();
    for (const instance of instances) await tearDown(instance);
  }
}

if (process.argv[2] === 'receiver') runReceiver();
else await main();
