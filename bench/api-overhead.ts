/*
 * What authentication, rate limiting and logging cost: requests per second and latency of an
 * authenticated GET of one resource (one indexed read) beside GET /health (one `select 1`) on the same
 * `svc serve --roles api` process. The load generator runs in this process, the server in another, so
 * each gets one of the machine's cores.
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
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 32;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the server (its children inherit the flags).
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);

const measure = (url: string, headers: Record<string, string>) =>
  measureWith(url, headers, DURATION_SECONDS, CONNECTIONS);

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
  const bare = spawn(process.execPath, [BARE, config.databaseUrl, String(barePort)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(base);
    const auth = { authorization: `Bearer ${secret}` };
    const created = await fetch(`${base}/v1/webhook_endpoints`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', enabled_events: ['*'] }),
    });
    const { id } = (await created.json()) as { id: string };
    const resource = `${base}/v1/webhook_endpoints/${id}`;

    const bareResource = `http://127.0.0.1:${barePort}/v1/webhook_endpoints/${id}`;

    // Rounds interleave the three targets and the medians are reported, so a burst of other work on the
    // machine skews one round rather than one target.
    const rounds: Record<'health' | 'authed' | 'baseline', Measurement[]> = {
      health: [],
      authed: [],
      baseline: [],
    };
    for (let round = 0; round <= ROUNDS; round++) {
      const health = await measure(`${base}/health`, {});
      const authed = await measure(resource, auth);
      const baseline = await measure(bareResource, {});
      if (round === 0) continue; // warm-up
      rounds.health.push(health);
      rounds.authed.push(authed);
      rounds.baseline.push(baseline);
    }
    const health = median(rounds.health);
    const authed = median(rounds.authed);
    const baseline = median(rounds.baseline);
    const overhead = 1 - authed.rps / baseline.rps;

    const engine = config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres';
    console.log(
      `\nAPI overhead (${engine}, ${CONNECTIONS} connections, median of ${ROUNDS} rounds of ${DURATION_SECONDS} s, logging on)`,
    );
    console.log('endpoint                                   req/s     p50 ms   p99 ms');
    console.log(
      `GET /health                             ${health.rps.toFixed(0).padStart(8)} ${String(health.p50).padStart(8)} ${String(health.p99).padStart(8)}`,
    );
    console.log(
      `GET /v1/webhook_endpoints/{id} (auth)   ${authed.rps.toFixed(0).padStart(8)} ${String(authed.p50).padStart(8)} ${String(authed.p99).padStart(8)}`,
    );
    console.log(
      `same query, bare Koa handler (no auth)  ${baseline.rps.toFixed(0).padStart(8)} ${String(baseline.p50).padStart(8)} ${String(baseline.p99).padStart(8)}`,
    );
    console.log(
      `authenticated GET vs GET /health: ${((1 - authed.rps / health.rps) * 100).toFixed(1)}% fewer requests per second`,
    );
    console.log(
      `authentication + rate limiting + validation + logging + metrics cost ${(overhead * 100).toFixed(1)}% of the bare handler's throughput (target ≤ 15%)`,
    );
  } finally {
    bare.kill('SIGTERM');
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    rmSync(home, { recursive: true, force: true });
    await postgres?.drop();
  }
}

await main();
