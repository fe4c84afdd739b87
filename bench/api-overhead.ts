/*
 * What authentication, rate limiting and logging cost: requests per second and latency of an
 * authenticated GET of one resource (one indexed read) beside GET /health (one `select 1`) on the same
 * `svc serve --roles api` process; beside the same GET on the same API code with those three taken out
 * (unguarded-server.ts), which is the target's measure; and beside a bare Koa handler running the same
 * query. The load generator runs in this process, each server in another.
 *
 *   npm run bench                                   SQLite
 *   BENCH_DATABASE_URL=postgres://… npm run bench   Postgres (in a fresh schema, dropped afterwards)
 */
import { spawn } from 'node:child_process';
import {
  BIN,
  freePort,
  freshPostgresSchema,
  measure as measureWith,
  median,
  waitForHealth,
  type Measurement,
} from './lib.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase } from '../src/db/database.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';

const BARE = fileURLToPath(new URL('./bare-server.js', import.meta.url));
const UNGUARDED = fileURLToPath(new URL('./unguarded-server.js', import.meta.url));
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the server (its children inherit the flags).
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
// e.g. `authed` to profile one target alone; the others are then skipped and their figures left out.
const ONLY = process.env.BENCH_TARGETS?.split(',');

const medianOf = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const measure = (url: string, headers: Record<string, string>, server: number) =>
  measureWith(url, headers, DURATION_SECONDS, CONNECTIONS, server);

async function main(): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const env = { SVC_HOME: home };
  const postgres = process.env.BENCH_DATABASE_URL
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
  const db = openDatabase({ url: config.databaseUrl });
  const org = await db.knex('organisations').first('id');
  const { secret } = await db.transaction((trx) =>
    createApiKey(trx, {
      brand: config.brand,
      orgId: org.id,
      mode: 'test',
      type: 'secret',
      name: 'bench',
      rateLimits: {
        read: { perMinute: 100_000_000, burst: 1_000_000 },
        resource_write: { perMinute: 1000, burst: 100 },
      },
      actor: 'bench',
      now: Date.now(),
    }),
  );
  await db.close();

  const port = await freePort();
  const server = spawn(
    process.execPath,
    [...SERVER_NODE_ARGS, BIN, 'serve', '--roles', 'api', '--port', String(port)],
    {
      env: { ...process.env, SVC_HOME: home, SVC_METRICS_PORT: '0', SVC_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const barePort = await freePort();
  const bare = spawn(process.execPath, [...SERVER_NODE_ARGS, BARE, config.databaseUrl, String(barePort)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const unguardedPort = await freePort();
  const unguarded = spawn(
    process.execPath,
    [...SERVER_NODE_ARGS, UNGUARDED, home, String(unguardedPort), secret],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const base = `http://127.0.0.1:${port}`;
  const pids = { server: server.pid!, unguarded: unguarded.pid!, bare: bare.pid! };
  try {
    await waitForHealth(base);
    await waitForHealth(`http://127.0.0.1:${unguardedPort}`);
    const auth = { authorization: `Bearer ${secret}` };
    const created = await fetch(`${base}/v1/webhook_endpoints`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      // Never delivered to (no event is emitted); a public name, as test mode refuses internal addresses.
      body: JSON.stringify({ url: 'https://receiver.example/hook', enabled_events: ['*'] }),
    });
    const { id } = (await created.json()) as { id: string };
    const resource = `${base}/v1/webhook_endpoints/${id}`;

    const bareResource = `http://127.0.0.1:${barePort}/v1/webhook_endpoints/${id}`;
    const unguardedResource = `http://127.0.0.1:${unguardedPort}/v1/webhook_endpoints/${id}`;

    // Rounds interleave the three targets and the medians are reported, so a burst of other work on the
    // machine skews one round rather than one target.
    const targets = {
      health: () => measure(`${base}/health`, {}, pids.server),
      authed: () => measure(resource, auth, pids.server),
      unguarded: () => measure(unguardedResource, {}, pids.unguarded),
      bare: () => measure(bareResource, {}, pids.bare),
    };
    const rounds = Object.fromEntries(
      Object.keys(targets).map((name) => [name, [] as Measurement[]]),
    ) as Record<keyof typeof targets, Measurement[]>;
    for (let round = 0; round <= ROUNDS; round++) {
      for (const [name, run] of Object.entries(targets)) {
        if (ONLY && !ONLY.includes(name)) continue;
        const measured = await run();
        if (round > 0) rounds[name as keyof typeof targets].push(measured); // round 0 warms up
      }
    }
    if (ONLY) {
      for (const name of ONLY) console.log(name, median(rounds[name as keyof typeof targets]));
      if (ONLY.includes('authed') && ONLY.includes('bare')) {
        const ratios = rounds.authed.map((ours, i) => ours.rps / rounds.bare[i]!.rps);
        console.log(
          'authed / bare by round',
          ratios.map((r) => r.toFixed(2)).join(' '),
          'median',
          medianOf(ratios).toFixed(2),
        );
      }
      return;
    }
    const health = median(rounds.health);
    const authed = median(rounds.authed);
    const unguarded = median(rounds.unguarded);
    const bare = median(rounds.bare);
    const fewer = (than: Measurement) => `${((1 - authed.rps / than.rps) * 100).toFixed(1)}%`;
    const row = (label: string, m: Measurement) =>
      `${label.padEnd(50)}${m.rps.toFixed(0).padStart(8)} ${String(m.p50).padStart(8)} ${String(m.p99).padStart(8)} ${m.cpuUs.toFixed(0).padStart(8)}`;

    const engine = config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres';
    console.log(
      `\nAPI overhead (${engine}, ${CONNECTIONS} connections, median of ${ROUNDS} rounds of ${DURATION_SECONDS} s, logging on)`,
    );
    console.log(`${'endpoint'.padEnd(50)}   req/s   p50 ms   p99 ms  CPU µs/req (server)`);
    console.log(row('GET /health', health));
    console.log(row('GET /v1/webhook_endpoints/{id} (authenticated)', authed));
    console.log(row('same GET, no auth, rate limit or logging', unguarded));
    console.log(row('same query, bare Koa handler', bare));
    console.log(`authenticated GET vs GET /health: ${fewer(health)} fewer requests per second`);
    console.log(
      `authentication + rate limiting + logging cost ${fewer(unguarded)} of the same GET's throughput (target ≤ 15%)`,
    );
    console.log(`the whole stack (also routing, validation, metrics) vs a bare handler: ${fewer(bare)}`);
    // A burst of other work on the machine moves both figures of one round, so the round's ratio is steadier
    // than the ratio of two medians (seen: 0.81 and 0.96 from two runs a minute apart on a shared machine).
    const perRound = (ratio: (ours: Measurement, theirs: Measurement) => number) =>
      medianOf(rounds.authed.map((ours, i) => ratio(ours, rounds.bare[i]!))).toFixed(2);
    console.log(
      `authenticated GET / bare handler, median of the rounds' ratios: ${perRound((o, b) => o.rps / b.rps)} of its throughput, ${perRound((o, b) => b.cpuUs / o.cpuUs)} by CPU per request (target ≥ 0.85)`,
    );
  } finally {
    bare.kill('SIGTERM');
    unguarded.kill('SIGTERM');
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    rmSync(home, { recursive: true, force: true });
    await postgres?.drop();
  }
}

await main();
