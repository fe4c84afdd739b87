/*
 * Issue 17, item 2 ("a year at scale"): does the appliance stay as fast after a year of growth? Seeds a
 * large operator (many links, movements, events, deliveries and attempts spread over twelve months) and a
 * small one in the same run, and measures every figure on both, interleaved round by round in one process
 * (on two shared cores only interleaved runs compare), printing medians, p99 and the ratio large/small.
 * Target: p99 ratio ≤ 1.5×.
 *
 * Figures: movement pages over real HTTP with a real API key (30 and 300 per page, first and deep), the
 * `synced_since` cursor feed, the event list and the delivery list with filters, the dispatcher's claim
 * (`claimDue`, rolled back so every round claims the same rows), a scheduler tick (`enqueueDueLinks`), the housekeeping pass (`runHousekeeping`:
 * rows removed and time) with the database size before and after pruning, and one-row GETs and claims on
 * the large database while a pruning pass runs beside the same without it.
 *
 *   npm run bench:growth                                   (SQLite; defaults run in a few minutes)
 *   SVC_BENCH_DATABASE_URL=postgres://… npm run bench:growth   (a fresh schema per database, dropped after)
 *
 * Scale: GROWTH_LINKS (2000), GROWTH_MOVEMENTS (500000), GROWTH_EVENTS (500000; one delivery and one attempt
 * each); GROWTH_ROUNDS (5), GROWTH_REQUESTS (requests per figure per round, 20). The full run is
 * GROWTH_LINKS=100000 GROWTH_MOVEMENTS=10000000 GROWTH_EVENTS=3000000 on Postgres (SQLite as far as one file
 * sensibly goes).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { systemClock, type Clock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import type { Config } from '../src/config/defaults.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';
import { silentLogger } from '../src/logging/logger.js';
import { enqueueDueLinks } from '../src/scheduler/enqueue-due.js';
import { runHousekeeping } from '../src/scheduler/housekeeping.js';
import { claimDue } from '../src/webhooks/queue.js';
import { freshPostgresSchema, startApi, stop } from './lib.js';
import { hexOf, seedSetBased } from './growth-seed.js';

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
  writeFileSync(
    join(home, 'config.json'),
    JSON.stringify({ databaseUrl: config.databaseUrl, log: { level: 'warn' } }),
  );
  const db = openDatabase({ url: config.databaseUrl });
  const org = await db.knex('organisations').first('id');
  seedStarted = performance.now();
  process.stderr.write(`seeding ${label}: ${JSON.stringify(scale)}\n`);
  const seeded = await seed(db, org.id, scale, label);
  const seedSeconds = (performance.now() - seedStarted) / 1000;
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
  return {
    label,
    scale,
    home,
    db,
    config,
    secret,
    ...seeded,
    seedSeconds,
    clockOffset: 0,
    tickOffset: 0,
    drop: postgres?.drop,
  };
}

async function tearDown(instance: Instance): Promise<void> {
  if (instance.api) await stop(instance.api.process);
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

/** Housekeeping passes until one removes nothing (at most `maxPasses`), on a clock a minute apart each. */
async function prune(instance: Instance, maxPasses: number) {
  const clock: Clock = { now: () => Date.now() + instance.clockOffset };
  const passes: { ms: number; removed: number }[] = [];
  for (let pass = 0; pass < maxPasses; pass++) {
    const before = await counts(instance.db);
    const started = performance.now();
    await runHousekeeping({ db: instance.db, clock, config: instance.config, logger: silentLogger });
    const elapsed = performance.now() - started;
    const after = await counts(instance.db);
    const removed = before - after;
    passes.push({ ms: elapsed, removed });
    instance.clockOffset += 60_000;
    if (removed === 0) break;
  }
  return passes;
}

async function counts(db: Database): Promise<number> {
  let total = 0;
  for (const table of ['events', 'webhook_deliveries', 'webhook_attempts', 'jobs', 'audit_log']) {
    const result = await db.knex(table).count({ n: '*' });
    total += Number(result[0]!.n);
  }
  return total;
}

async function main() {
  const engine = BASE_URL ? 'postgres' : 'sqlite';
  const largeScale = { links: LINKS, movements: MOVEMENTS, events: EVENTS };
  const smallScale = {
    links: Math.max(2, Math.ceil(LINKS / 50)),
    movements: Math.max(BIG + 1000, Math.ceil(MOVEMENTS / 50)),
    events: Math.max(PENDING + 1000, Math.ceil(EVENTS / 50)),
  };
  const instances: Instance[] = [];
  try {
    const small = await setUp('small', smallScale);
    instances.push(small);
    const large = await setUp('large', largeScale);
    instances.push(large);
    for (const instance of instances) instance.api = await startApi(instance.home);

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
      { label: 'dispatcher claim (32 rows, rolled back)', run: (i) => claim(i.db) },
      { label: 'scheduler tick (enqueueDueLinks)', run: tick },
    ];
    const samples = await measureInterleaved(figures, small, large);

    // Beside a pruning pass on the large database: one-row GETs and claims, without and then during it.
    const quiet = { get: [] as number[], claim: [] as number[] };
    for (let i = 0; i < 200; i++) {
      quiet.get.push(await get(large, `/v1/events/${large.eventId}`));
      quiet.claim.push(await claim(large.db));
    }
    const sizes = new Map<Instance, { before: Awaited<ReturnType<typeof size>> }>();
    for (const instance of instances) sizes.set(instance, { before: await size(instance.db) });
    const during = { get: [] as number[], claim: [] as number[] };
    let pruning = true;
    const firstPass = (async () => {
      try {
        return await prune(large, 1);
      } finally {
        pruning = false;
      }
    })();
    while (pruning) {
      during.get.push(await get(large, `/v1/events/${large.eventId}`));
      during.claim.push(await claim(large.db));
    }
    const largeFirst = (await firstPass)[0]!;
    const smallPasses = await prune(small, 1000);
    const largeRest = await prune(large, 1000);

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
    console.log(row('large: one event GET, quiet → during pruning', quiet.get, during.get));
    console.log(row('large: claim, quiet → during pruning', quiet.claim, during.claim));

    console.log('\n| housekeeping | small | large |');
    console.log('| --- | --- | --- |');
    const smallFirst = smallPasses[0]!;
    const total = (passes: { ms: number; removed: number }[]) =>
      passes.reduce((sum, p) => sum + p.removed, 0);
    const time = (passes: { ms: number; removed: number }[]) => passes.reduce((sum, p) => sum + p.ms, 0);
    const allLarge = [largeFirst, ...largeRest];
    console.log(
      `| first pass | ${smallFirst.removed} rows in ${(smallFirst.ms / 1000).toFixed(2)} s | ${largeFirst.removed} rows in ${(
        largeFirst.ms / 1000
      ).toFixed(2)} s |`,
    );
    console.log(
      `| until a pass removes nothing | ${total(smallPasses)} rows, ${smallPasses.length} passes, ${(
        time(smallPasses) / 1000
      ).toFixed(
        1,
      )} s | ${total(allLarge)} rows, ${allLarge.length} passes, ${(time(allLarge) / 1000).toFixed(1)} s |`,
    );
    const after = new Map<Instance, Awaited<ReturnType<typeof size>>>();
    for (const instance of instances) after.set(instance, await size(instance.db));
    const sizeText = (s: { bytes: number; used: number }) =>
      engine === 'sqlite' ? `${mb(s.bytes)} file, ${mb(s.used)} in use` : mb(s.bytes);
    console.log(
      `| size before pruning | ${sizeText(sizes.get(small)!.before)} | ${sizeText(sizes.get(large)!.before)} |`,
    );
    console.log(`| size after pruning | ${sizeText(after.get(small)!)} | ${sizeText(after.get(large)!)} |`);
  } finally {
    for (const instance of instances) await tearDown(instance);
  }
}

await main();
