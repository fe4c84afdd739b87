import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url));

export interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time the server's processes spent per request, in µs (NaN when not asked for). */
  cpuUs: number;
}

/** Linux counts process CPU time in ticks of 10 ms (USER_HZ 100). */
const TICK_MS = 10;

/** User plus system CPU time of a process in ms, from /proc; 0 where it cannot be read. */
export function cpuMsOf(pid: number | string): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** A process and its descendants (`svc serve` runs its roles in children), from /proc. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      const parent = Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]!) ?? []));
  return tree;
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

/**
 * Throughput and latency of `url`; with `server` (a pid), also the CPU time that process and its children
 * spent per request, which other load on a shared machine disturbs less than throughput.
 */
export async function measure(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  connections = 32,
  server?: number,
): Promise<Measurement> {
  const pids = server === undefined ? [] : processTree(server);
  const cpuMs = () => pids.reduce((sum, pid) => sum + cpuMsOf(pid), 0);
  const before = cpuMs();
  const result = await autocannon({ url, connections, duration: seconds, headers });
  const cpuUs = server === undefined ? NaN : ((cpuMs() - before) * 1000) / result.requests.total;
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, cpuUs };
}

export function median(values: Measurement[]): Measurement {
  const pick = (key: keyof Measurement) =>
    [...values.map((v) => v[key])].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return { rps: pick('rps'), p50: pick('p50'), p99: pick('p99'), cpuUs: pick('cpuUs') };
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
  `${label.padEnd(44)} ${m.rps.toFixed(0).padStart(8)} ${String(m.p50).padStart(8)} ${String(m.p99).padStart(8)}${Number.isNaN(m.cpuUs) ? '' : m.cpuUs.toFixed(0).padStart(8)}`;

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
