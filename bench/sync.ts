/*
 * Issue 3's figures, on SQLite and (with BENCH_DATABASE_URL) Postgres:
 *  - movements ingested per second by the sync engine, matching included, beside a plain batched insert
 *    of the same rows in the same run (target: at least half of the plain insert);
 *  - the time of one scheduler tick over 100,000 links (target: under 1 s).
 *
 *   node dist/bench/sync.js
 *
 * BENCH_TARGETS=postgres (or sqlite) measures one engine; BENCH_ONLY=tick (or ingest) runs one part; BENCH_ROUNDS (default 1) repeats the tick part, each round on a
 * fresh database, and prints each tick's median and range over the rounds.
 */
import { ConsentClients } from '../src/banks/consent/client.js';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { silentLogger } from '../src/logging/logger.js';
import { SecretBox } from '../src/secrets/secret-box.js';
import { newId } from '../src/ids/ids.js';
import type { BankMovement, Connector } from '../src/banks/connector.js';
import { claimJob, syncJob } from '../src/jobs/jobs.js';
import { runSyncJob } from '../src/sync/engine.js';
import { fingerprintOf } from '../src/sync/reconcile.js';
import { enqueueDueLinks } from '../src/scheduler/enqueue-due.js';
import { firstSyncAt } from '../src/links/schedule.js';
import { freshPostgresSchema } from './lib.js';

const MOVEMENTS = Number(process.env.BENCH_MOVEMENTS ?? 20_000);
const LINKS = Number(process.env.BENCH_LINKS ?? 100_000);
const ONLY = process.env.BENCH_ONLY ?? '';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const DAY = 86_400_000;
const NOW = Date.UTC(2026, 5, 15, 12);

/** A bank answering with `movements` for one checking account: the engine's input, without network. */
function benchBank(movements: BankMovement[]): Connector {
  const account = {
    ref: 'CC-1',
    name: 'Cuenta Corriente',
    type: 'checking' as const,
    currency: 'CLP',
    last4: '1234',
    holderName: 'Bench',
    balance: { available: 1, current: 1, limit: null },
  };
  return {
    login: async () => ({ kind: 'session', session: { holderName: 'Bench', state: {} } }),
    submitMfa: async () => ({ holderName: 'Bench', state: {} }),
    listAccounts: async () => [account],
    listMovements: async () => movements,
  };
}

function generate(count: number): BankMovement[] {
  return Array.from({ length: count }, (_, i) => {
    const postedAt = NOW - Math.floor((i / count) * 85 * DAY);
    const pending = i % 50 === 0;
    return {
      ref: `${pending ? 'P' : 'M'}-${i}`,
      amount: -((i * 7919) % 200_000) - 100,
      currency: 'CLP',
      description: `COMPRA COMERCIO ${i % 300}`,
      type: 'card_purchase',
      referenceId: `REF${i}`,
      counterparty: null,
      postedAt,
      transactionDate: new Date(postedAt).toISOString().slice(0, 10),
      pending,
    };
  });
}

async function seedOrgAndLink(db: Database, secrets: SecretBox): Promise<{ orgId: string; linkId: string }> {
  const orgId = newId('org');
  const linkId = newId('link');
  await db.knex('organisations').insert({ id: orgId, name: 'bench', created_at: NOW });
  await db.knex('links').insert({
    id: linkId,
    org_id: orgId,
    mode: 'test',
    bank_id: 'bancochile',
    holder_type: 'individual',
    status: 'active',
    credentials_encrypted: secrets.seal(
      JSON.stringify({ rut: '11111111-1', password: 'x', rutEmpresa: null }),
      linkId,
    ),
    created_at: NOW,
    updated_at: NOW,
  });
  return { orgId, linkId };
}

async function ingest(url: string, home: string) {
  const config = loadConfig({ home, env: {}, overrides: { databaseUrl: url, log: { level: 'silent' } } });
  const db = openDatabase({ url });
  await migrateUp(db);
  const secrets = new SecretBox({ id: 'mk_bench', key: randomBytes(32) });
  const movements = generate(MOVEMENTS);

  // The engine: one full sync of an account with MOVEMENTS new rows.
  const { orgId, linkId } = await seedOrgAndLink(db, secrets);
  await db
    .knex('jobs')
    .insert(syncJob({ id: linkId, org_id: orgId }, { refresh_type: 'full', interactive: false }, NOW));
  const clock = new ManualClock(NOW);
  const job = (await claimJob(db, 'bench', NOW, 600_000))!;
  const services = {
    db,
    clock,
    secrets,
    logger: silentLogger,
    config,
    connectors: () => benchBank(movements),
    // No consent link here: the clients are never opened, so there is nothing to close.
    consentClients: new ConsentClients(secrets),
  };
  let started = performance.now();
  const outcome = await runSyncJob(services, job);
  const engineSeconds = (performance.now() - started) / 1000;
  if (outcome.status !== 'succeeded') throw new Error(`sync ${outcome.status}`);

  // The baseline: the same rows, already shaped, inserted in batches of 200 into another account.
  const other = await seedOrgAndLink(db, secrets);
  const accountId = newId('acc');
  await db.knex('accounts').insert({
    id: accountId,
    org_id: other.orgId,
    mode: 'test',
    link_id: other.linkId,
    bank_account_ref: 'CC-1',
    name: 'x',
    type: 'checking',
    currency: 'CLP',
    created_at: NOW,
    updated_at: NOW,
  });
  const rows = movements.map((m, i) => ({
    id: newId('mov'),
    org_id: other.orgId,
    mode: 'test',
    link_id: other.linkId,
    account_id: accountId,
    bank_ref: m.ref,
    fingerprint: fingerprintOf(m),
    amount: m.amount,
    currency: m.currency,
    description: m.description,
    type: m.type,
    reference_id: m.referenceId,
    counterparty: null,
    posted_at: m.postedAt,
    transaction_date: m.transactionDate,
    pending: m.pending,
    status: 'normal',
    canonical_id: null,
    synced_at: NOW + i,
    created_at: NOW,
  }));
  started = performance.now();
  await db.transaction(async (trx) => {
    for (let i = 0; i < rows.length; i += 200) await trx('movements').insert(rows.slice(i, i + 200));
  });
  const plainSeconds = (performance.now() - started) / 1000;

  // A second sync of the same answer: everything matches, nothing is written.
  await db
    .knex('jobs')
    .insert(syncJob({ id: linkId, org_id: orgId }, { refresh_type: 'full', interactive: false }, NOW + 1));
  const again = (await claimJob(db, 'bench', NOW + 1, 600_000))!;
  started = performance.now();
  await runSyncJob(services, again);
  const resyncSeconds = (performance.now() - started) / 1000;
  await db.close();
  return {
    engine: MOVEMENTS / engineSeconds,
    plain: MOVEMENTS / plainSeconds,
    resync: MOVEMENTS / resyncSeconds,
  };
}

/**
 * 100,000 links with their phases spread over the interval, as links are in steady state: a tick finds
 * about 1/240th of them due. Then a catch-up tick after the scheduler was stopped for an hour.
 */
async function tick(url: string) {
  const db = openDatabase({ url });
  await migrateUp(db);
  const orgId = newId('org');
  await db.knex('organisations').insert({ id: orgId, name: 'bench', created_at: NOW });
  const interval = 4 * 3_600_000;
  for (let i = 0; i < LINKS; i += 400) {
    const batch = Array.from({ length: Math.min(400, LINKS - i) }, () => {
      const id = newId('link');
      // firstSyncAt from half an interval ago lands in [NOW, NOW + interval): evenly spread phases.
      const next = firstSyncAt(id, NOW - interval / 2, interval);
      return {
        id,
        org_id: orgId,
        mode: 'test',
        bank_id: 'bancochile',
        holder_type: 'individual',
        status: 'active',
        credentials_encrypted: 'x',
        created_at: NOW,
        updated_at: NOW,
        next_sync_at: next,
      };
    });
    await db.transaction((trx) => trx('links').insert(batch));
  }
  const timings: { label: string; due: number; ms: number }[] = [];
  const run = async (label: string, at: number) => {
    const started = performance.now();
    const due = await enqueueDueLinks(db, at, interval);
    timings.push({ label, due, ms: performance.now() - started });
  };
  for (let minute = 1; minute <= 3; minute++) await run(`tick at +${minute} min`, NOW + minute * 60_000);
  await run('catch-up after 1 h down', NOW + 63 * 60_000);
  await db.close();
  return timings;
}

async function main() {
  const targets = [{ name: 'sqlite', url: (home: string) => `sqlite://${home}/bench.db` }];
  // A schema of its own, which `resetSchema` may empty between phases without touching anything else.
  const postgres = process.env.BENCH_DATABASE_URL
    ? await freshPostgresSchema(process.env.BENCH_DATABASE_URL)
    : undefined;
  if (postgres) targets.push({ name: 'postgres', url: () => postgres.url });
  const wanted = process.env.BENCH_TARGETS?.split(',');
  try {
    await runTargets(targets.filter((target) => !wanted || wanted.includes(target.name)));
  } finally {
    await postgres?.drop();
  }
}

async function runTargets(targets: { name: string; url: (home: string) => string }[]) {
  for (const target of targets) {
    const home = mkdtempSync(join(tmpdir(), 'svc-bench-sync-'));
    try {
      if (ONLY !== 'tick') {
        const figures = await ingest(target.url(home), home);
        console.log(
          `\nSync ingestion (${target.name}, ${MOVEMENTS} new movements in one account, one transaction)`,
        );
        console.log(
          `  sync engine, matching included   ${figures.engine.toFixed(0).padStart(8)} movements/s`,
        );
        console.log(`  plain batched insert             ${figures.plain.toFixed(0).padStart(8)} movements/s`);
        console.log(
          `  engine / plain                   ${(figures.engine / figures.plain).toFixed(2).padStart(8)} (target ≥ 0.5)`,
        );
        console.log(
          `  re-sync, all rows already known  ${figures.resync.toFixed(0).padStart(8)} movements/s`,
        );
        if (target.name === 'postgres') await resetSchema(target.url(home));
      }
      if (ONLY === 'ingest') continue;
      const rounds: Awaited<ReturnType<typeof tick>>[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const url = target.name === 'sqlite' ? `sqlite://${home}/tick-${round}.db` : target.url(home);
        rounds.push(await tick(url));
        if (target.name === 'postgres') await resetSchema(target.url(home));
      }
      console.log(
        `\nScheduler tick (${target.name}, ${LINKS} links spread over the 4-hour interval; ${ROUNDS} round(s), median [min–max])`,
      );
      for (const [i, { label, due }] of rounds[0]!.entries()) {
        const times = rounds.map((timings) => timings[i]!.ms).sort((a, b) => a - b);
        const median = times[Math.floor(times.length / 2)]!;
        const range = `[${times[0]!.toFixed(0)}–${times[times.length - 1]!.toFixed(0)}]`;
        console.log(
          `  ${label.padEnd(24)} ${String(due).padStart(6)} due links queued in ${median.toFixed(0).padStart(5)} ms ${range.padEnd(13)} (target < 1000 ms)`,
        );
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }
}

async function resetSchema(url: string) {
  const db = openDatabase({ url });
  const schema = new URL(url).searchParams.get('schema')!;
  await db.knex.raw(`drop schema if exists ${schema} cascade`);
  await db.knex.raw(`create schema ${schema}`);
  await db.close();
}

await main();
