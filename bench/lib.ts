import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url));

export interface Measurement {
  rps: number;
  p50: number;
  p99: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function waitForHealth(url: string, path = '/health'): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}${path}`)).status < 500) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not start`);
}

export async function measure(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  connections = 32,
): Promise<Measurement> {
  const result = await autocannon({ url, connections, duration: seconds, headers });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

export function median(values: Measurement[]): Measurement {
  const pick = (key: keyof Measurement) =>
    [...values.map((v) => v[key])].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return { rps: pick('rps'), p50: pick('p50'), p99: pick('p99') };
}

/** Starts `svc serve --roles api` on a free port for a home; the caller stops it. */
export async function startApi(
  home: string,
  env: Record<string, string> = {},
): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  // BENCH_SERVER_NODE_ARGS, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`, profiles the server.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const serve = [...nodeArgs, BIN, 'serve', '--roles', 'api', '--port', String(port)];
  const child = spawn(process.execPath, serve, {
    env: { ...process.env, SVC_HOME: home, SVC_METRICS_PORT: '0', SVC_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHealth(url);
  return { url, process: child };
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
}

export const row = (label: string, m: Measurement) =>
  `${label.padEnd(44)} ${m.rps.toFixed(0).padStart(8)} ${String(m.p50).padStart(8)} ${String(m.p99).padStart(8)}`;

/**
 * A fresh schema in the Postgres database at `base`, so that runs neither collide with each other nor
 * leave tables behind in `public`; `drop` removes it.
 */
export async function freshPostgresSchema(base: string): Promise<{ url: string; drop(): Promise<void> }> {
  const { default: knexFactory } = await import('knex');
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  await admin.raw(`create schema ${schema}`);
  await admin.destroy();
  return {
    url: `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`,
    async drop() {
      const dropper = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
      await dropper.raw(`drop schema if exists ${schema} cascade`);
      await dropper.destroy();
    },
  };
}
