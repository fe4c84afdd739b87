/*
 * Issue 4's figures: the movement list with 1,000,000 movements in the database, one account holding
 * 10,000 of them. Requests per second and p99 of 30 and 300 per page, first and last page, of our endpoint
 * (authentication, rate limiting, validation, both pagination headers) beside a bare Koa handler running
 * the plain page query and a count(*) for the total, and beside a bare Koa handler running the statements
 * our endpoint runs (bare-movements-server.ts). Targets: ours at least as fast as the first bare handler;
 * at least 0.85 of the second (issue 17: what the whole stack costs); the last page of the
 * 10,000-movement account no more than twice as slow as the first.
 *
 *   node dist/bench/movements.js                 (SQLite; BENCH_DATABASE_URL=postgres://… for Postgres)
 *
 * BENCH_ONLY=<text> measures only the scenarios whose label contains it (e.g. `30 per page, first`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';
import { newId } from '../src/ids/ids.js';
import {
  freePort,
  freshPostgresSchema,
  measure,
  median,
  row,
  startApi,
  stop,
  waitForHealth,
  type Measurement,
} from './lib.js';

const TOTAL = Number(process.env.BENCH_MOVEMENTS ?? 1_000_000);
const BIG = 10_000;
const PER_SMALL_ACCOUNT = 1_000;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BARE = fileURLToPath(new URL('./bare-movements-server.js', import.meta.url));
const NOW = Date.UTC(2026, 5, 15, 12);

async function seed(db: Database, orgId: string): Promise<string> {
  const linkId = newId('link');
  await db.knex('links').insert({
    id: linkId,
    org_id: orgId,
    mode: 'test',
    bank_id: 'bancochile',
    holder_type: 'individual',
    status: 'active',
    credentials_encrypted: 'x',
    created_at: NOW,
    updated_at: NOW,
  });
  const accounts = [{ id: newId('acc'), size: BIG }];
  for (let n = BIG; n < TOTAL; n += PER_SMALL_ACCOUNT)
    accounts.push({ id: newId('acc'), size: Math.min(PER_SMALL_ACCOUNT, TOTAL - n) });
  let synced = NOW - 400 * 86_400_000;
  for (const [index, account] of accounts.entries()) {
    await db.knex('accounts').insert({
      id: account.id,
      org_id: orgId,
      mode: 'test',
      link_id: linkId,
      bank_account_ref: `CC-${index}`,
      name: 'Cuenta',
      type: 'checking',
      currency: 'CLP',
      created_at: NOW,
      updated_at: NOW,
    });
    const rows = Array.from({ length: account.size }, (_, i) => {
      const pending = i % 50 === 0;
      const status = i % 97 === 0 ? 'duplicated' : 'normal';
      return {
        id: newId('mov'),
        org_id: orgId,
        mode: 'test',
        link_id: linkId,
        account_id: account.id,
        bank_ref: `M-${index}-${i}`,
        fingerprint: `f${i}`,
        amount: -((i * 7919) % 100_000),
        currency: 'CLP',
        description: `COMPRA ${i % 200}`,
        type: 'card_purchase',
        reference_id: `R${index}-${i}`,
        counterparty: null,
        posted_at: NOW - Math.floor((i / account.size) * 365) * 86_400_000 - i,
        transaction_date: '2026-01-01',
        pending,
        status,
        canonical_id: null,
        synced_at: (synced += 1),
        created_at: NOW,
      };
    });
    await db.transaction(async (trx) => {
      for (let i = 0; i < rows.length; i += 500) await trx('movements').insert(rows.slice(i, i + 500));
    });
    const visible = rows.filter((r) => r.status === 'normal' && !r.pending).length;
    await db
      .knex('accounts')
      .where({ id: account.id })
      .update({
        visible_count: visible,
        pending_count: rows.filter((r) => r.status === 'normal' && r.pending).length,
      });
    if (index % 100 === 0)
      process.stderr.write(`\rseeding: ${Math.round((100 * (index + 1)) / accounts.length)}%`);
  }
  process.stderr.write('\n');
  return accounts[0]!.id;
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-movements-'));
  let postgres: Awaited<ReturnType<typeof freshPostgresSchema>> | undefined;
  try {
    const env = { SVC_HOME: home };
    postgres = process.env.BENCH_DATABASE_URL
      ? await freshPostgresSchema(process.env.BENCH_DATABASE_URL)
      : undefined;
    await install({
      home,
      env,
      databaseUrl: postgres?.url,
      clock: systemClock,
      actor: 'bench',
    });
    const config = loadConfig({ home, env });
    writeFileSync(
      join(home, 'config.json'),
      JSON.stringify({ databaseUrl: config.databaseUrl, log: { level: 'info' } }),
    );
    const db = openDatabase({ url: config.databaseUrl });
    const org = await db.knex('organisations').first('id');
    const started = performance.now();
    const account = await seed(db, org.id);
    const seedSeconds = (performance.now() - started) / 1000;
    // A million rows loaded in a minute, which autovacuum may not have reached yet, where a running
    // appliance's rows arrive over months: until it has, Postgres visits the table for every index entry a
    // deep page's OFFSET skips (30 per page: the last page measured 2.55x the first before, 1.83x after).
    if (db.engine === 'postgres') await db.knex.raw('VACUUM (ANALYZE) movements');
    const { secret } = await db.transaction((trx) =>
      createApiKey(trx, {
        brand: config.brand,
        orgId: org.id,
        mode: 'test',
        type: 'secret',
        rateLimits: { read: { perMinute: 100_000_000, burst: 1_000_000 } },
        actor: 'bench',
        now: Date.now(),
      }),
    );
    await db.close();

    const api = await startApi(home);
    const barePort = await freePort();
    const bare = spawn(process.execPath, [BARE, config.databaseUrl, String(barePort)], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const bareUrl = `http://127.0.0.1:${barePort}`;
    await waitForHealth(bareUrl);
    try {
      const visible = Math.floor(BIG * 0.98 * (96 / 97));
      const allScenarios = [
        { label: '30 per page, first page', query: 'per_page=30&page=1' },
        { label: '30 per page, last page', query: `per_page=30&page=${Math.ceil(visible / 30)}` },
        { label: '300 per page, first page', query: 'per_page=300&page=1' },
        { label: '300 per page, last page', query: `per_page=300&page=${Math.ceil(visible / 300)}` },
      ];
      const scenarios = allScenarios.filter((s) => s.label.includes(process.env.BENCH_ONLY ?? ''));
      const path = `/v1/accounts/${account}/movements`;
      const results = new Map<string, { ours: Measurement[]; bare: Measurement[]; same: Measurement[] }>(
        scenarios.map((s) => [s.label, { ours: [], bare: [], same: [] }]),
      );
      for (let round = 0; round <= ROUNDS; round++) {
        for (const scenario of scenarios) {
          const ours = await measure(
            `${api.url}${path}?${scenario.query}`,
            { authorization: `Bearer ${secret}` },
            SECONDS,
            16,
            api.process.pid,
          );
          const plain = await measure(`${bareUrl}${path}?${scenario.query}`, {}, SECONDS, 16, bare.pid);
          const same = await measure(`${bareUrl}/same${path}?${scenario.query}`, {}, SECONDS, 16, bare.pid);
          if (round === 0) continue; // warm-up
          results.get(scenario.label)!.ours.push(ours);
          results.get(scenario.label)!.bare.push(plain);
          results.get(scenario.label)!.same.push(same);
        }
      }
      const engine = config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres';
      console.log(
        `\nMovement list (${engine}, ${TOTAL} movements, one account of ${BIG}; seeded in ${seedSeconds.toFixed(0)} s; median of ${ROUNDS} rounds of ${SECONDS} s)`,
      );
      console.log(`${'scenario'.padEnd(44)}    req/s   p50 ms   p99 ms  CPU µs/req (server)`);
      const firstLast: Record<string, number> = {};
      for (const scenario of scenarios) {
        const ours = median(results.get(scenario.label)!.ours);
        const plain = median(results.get(scenario.label)!.bare);
        const same = median(results.get(scenario.label)!.same);
        firstLast[scenario.label] = ours.rps;
        console.log(row(`ours: ${scenario.label}`, ours));
        console.log(row(`bare + count(*): ${scenario.label}`, plain));
        console.log(row(`bare, our statements: ${scenario.label}`, same));
        console.log(`  ours / bare + count(*): ${(ours.rps / plain.rps).toFixed(2)} (target ≥ 1)`);
        console.log(
          `  ours / bare, our statements: ${(ours.rps / same.rps).toFixed(2)}, ${(same.cpuUs / ours.cpuUs).toFixed(2)} by CPU per request (target ≥ 0.85)`,
        );
      }
      for (const size of ['30', '300']) {
        if (!firstLast[`${size} per page, first page`] || !firstLast[`${size} per page, last page`]) continue;
        const ratio = firstLast[`${size} per page, first page`]! / firstLast[`${size} per page, last page`]!;
        console.log(
          `${size} per page: the last page takes ${ratio.toFixed(2)}× the first page's time (target ≤ 2)`,
        );
      }
    } finally {
      bare.kill('SIGTERM');
      await stop(api.process);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
    await postgres?.drop();
  }
}

await main();
