import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';
import { openDatabase, type Database } from '../../src/db/database.js';
import type { SupervisorState } from '../../src/processes/status.js';
import {
  HANG_GUARD_MS,
  freshDatabase,
  request,
  type EngineName,
  type TestDatabase,
  type TestResponse,
} from './harness.js';
import { groupIsAlive, killGroup, releaseGroup, spawnOwned } from './processes.js';
import { runInProcess } from './cli-in-process.js';

export { groupIsAlive, killGroup };

/** The CLI a user runs: `bin/run.js` at the repository root (this file compiles to dist/test/helpers). */
export const CLI_ENTRY = fileURLToPath(new URL('../../../bin/run.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface CliOptions {
  /** The data directory, passed as SVC_HOME. */
  home: string;
  /** Extra environment; every inherited SVC_* variable is dropped first so a developer's shell cannot leak in. */
  env?: Record<string, string>;
  /** Kill the command (and everything it started) after this long; the result then has `timedOut`. */
  timeoutMs?: number;
  /**
   * Run it as a process of its own, as a shell would, rather than inside the test process: for tests about
   * the process (its exit, its signals, what it leaves running). Commands that serve or wait for a signal
   * always run as processes.
   */
  ownProcess?: boolean;
  /**
   * The checkout of another build of svc to run (other-build.ts) instead of this one: always a process of
   * its own, so that its modules never mix with this build's.
   */
  root?: string;
}

/** Commands that run until they are stopped: a process of their own, always. */
const LONG_RUNNING = ['serve', 'bank-gateway', 'webhooks listen'];

function needsOwnProcess(args: string[], options: CliOptions): boolean {
  const command = args.filter((arg) => !arg.startsWith('-')).join(' ');
  return (
    options.ownProcess === true ||
    options.root !== undefined ||
    LONG_RUNNING.some((name) => command.startsWith(name))
  );
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stderr as one line: oclif wraps error messages at 80 columns behind ` ›   ` markers. */
  message: string;
  timedOut: boolean;
  elapsedMs: number;
  /** Whether any process the command started was still alive after it exited (they are killed then). */
  leftProcesses: boolean;
}

export function cliEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('SVC_')) env[name] = value;
  }
  // The suite's receivers listen on loopback, which webhooks may reach only when the operator allows it;
  // the tests of that policy set it back to false.
  return { ...env, SVC_HOME: home, SVC_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES_IN_TEST_MODE: 'true', ...extra };
}

/** Joins oclif's wrapped ` ›   Error: …` lines back into one line of text. */
export function oneLine(text: string): string {
  return text
    .replace(/\n\s*›\s*/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** `svc <args>` in a process group of its own (processes.ts), owned until `t` ends when one is given. */
export function spawnCli(args: string[], options: CliOptions, t?: Test): ChildProcess {
  const root = options.root ?? REPO_ROOT;
  return spawnOwned(
    process.execPath,
    [options.root ? join(options.root, 'bin', 'run.js') : CLI_ENTRY, ...args],
    { cwd: root, env: cliEnv(options.home, options.env), stdio: ['ignore', 'pipe', 'pipe'] },
    t,
  );
}

/**
 * Runs `svc <args>` to completion, as a user would from a shell: inside the test process (cli-in-process.ts)
 * unless the command runs until stopped or the test asks for a process of its own.
 */
export async function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  if (!needsOwnProcess(args, options)) {
    const started = Date.now();
    const env = cliEnv(options.home, options.env);
    const result = await runInProcess(REPO_ROOT, args, env, options.timeoutMs ?? HANG_GUARD_MS);
    return {
      ...result,
      signal: null,
      message: oneLine(result.stderr),
      elapsedMs: Date.now() - started,
      leftProcesses: false,
    };
  }
  return runCliProcess(args, options);
}

async function runCliProcess(args: string[], options: CliOptions): Promise<CliResult> {
  const started = Date.now();
  const child = spawnCli(args, options);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid!, 'SIGKILL');
  }, options.timeoutMs ?? HANG_GUARD_MS);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  const elapsedMs = Date.now() - started;
  clearTimeout(timer);
  // Whatever the command forked must not outlive it: note it, then kill it.
  const leftProcesses = groupIsAlive(child.pid!);
  if (leftProcesses) killGroup(child.pid!, 'SIGKILL');
  releaseGroup(child.pid!);
  await closed;
  return { code, signal, stdout, stderr, message: oneLine(stderr), timedOut, elapsedMs, leftProcesses };
}

/** Runs `svc <args> --json`, asserts it succeeded, and returns the parsed output. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSON; callers may name its shape
export async function runCliJson<T = any>(t: Test, args: string[], options: CliOptions): Promise<T> {
  const result = await runCli([...args, '--json'], options);
  if (result.code !== 0) {
    t.fail(`svc ${args.join(' ')} --json exited ${result.code ?? result.signal}`, { stderr: result.stderr });
    throw new Error(`svc ${args.join(' ')} failed: ${result.message}`);
  }
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    t.fail(`svc ${args.join(' ')} --json printed something that is not JSON`, { stdout: result.stdout });
    throw new Error(`svc ${args.join(' ')} printed no JSON`);
  }
}

/** A TCP port that was free a moment ago: bind port 0, read the port, release it. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!port) throw new Error('could not find a free port');
  return port;
}

/** Listens on `port` of loopback and closes again: whether nothing held it just now. */
async function isFree(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  return listening;
}

/*
 * The simulated banks take three ports from the one configured (the Chilean bank's, + 1 the Brazilian
 * bank's, + 2 their pages'), and a port the kernel called free says nothing about its two neighbours: in the
 * kernel's ephemeral range (32768–60999 on Linux) any test's outgoing connection may hold one of them, and
 * the Brazilian bank then starts off with a warning (seen once in CI, in serve.test). So the base comes from
 * below that range, where only tests that listen on purpose take ports, and all three are checked free.
 */
const BANK_PORTS_FROM = 20_000;
const BANK_PORTS_TO = 32_000;

/** A base port for the simulated banks whose next two ports are free too (see above). */
export async function freeBankPorts(): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const base = BANK_PORTS_FROM + Math.floor(Math.random() * (BANK_PORTS_TO - BANK_PORTS_FROM));
    if ((await isFree(base)) && (await isFree(base + 1)) && (await isFree(base + 2))) return base;
  }
  throw new Error(`no three free ports in a row between ${BANK_PORTS_FROM} and ${BANK_PORTS_TO}`);
}

export interface ServeOptions extends CliOptions {
  /** Further `svc serve` flags, e.g. `['--roles', 'api']`. */
  args?: string[];
  /** The API port; by default a free one. */
  port?: number;
  /** How long to wait for /health to answer 200 and every child to be up (about 1 s idle). */
  readyTimeoutMs?: number;
}

export interface ServeProcess {
  pid: number;
  port: number;
  /** The simulated consent bank's mTLS port; its pages listen on this + 2 (issue 44, item 7). */
  consentBankPort: number;
  url: string;
  process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when `svc serve` has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  request(method: string, path: string, options?: Parameters<typeof request>[3]): Promise<TestResponse>;
}

/**
 * Starts `svc serve` on a free port, waits until GET /health answers 200, and registers a teardown that
 * stops it (SIGTERM, then SIGKILL to its whole process group) so that no test leaks a process.
 */
export async function startServe(t: Test, options: ServeOptions): Promise<ServeProcess> {
  const port = options.port ?? (await freePort());
  const metricsPort = await freePort();
  // The simulated consent bank's own ports too, so that tests side by side do not share 8443–8445.
  const consentBankPort = await freeBankPorts();
  const child = spawnCli(
    ['serve', '--port', String(port), ...(options.args ?? [])],
    {
      ...options,
      env: {
        SVC_METRICS_PORT: String(metricsPort),
        SVC_SANDBOX_CONSENT_BANK_PORT: String(consentBankPort),
        SVC_SUPERVISOR_SHUTDOWN_TIMEOUT_SECONDS: '5',
        ...options.env,
      },
    },
    t,
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout = (stdout + chunk.toString()).slice(-200_000);
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-200_000);
  });
  let hasExited = false;
  let exitedAt: { code: number | null; signal: NodeJS.Signals | null; at: string } | null = null;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      hasExited = true;
      exitedAt = { code, signal, at: new Date().toISOString() };
      resolve({ code, signal });
    }),
  );
  const pid = child.pid!;
  t.teardown(async () => {
    // The group is killed whatever happens here: a teardown that threw once left a scheduler running for
    // half an hour after its test.
    try {
      if (!t.passing()) {
        t.comment(`svc serve ${hasExited ? `exited ${JSON.stringify(exitedAt)}` : 'still running'}`);
        t.comment(`svc serve stderr:\n${stderr.slice(-4000)}`);
        t.comment(`supervisor state:\n${supervisorState(options.home, pid)}`);
        t.comment(`svc serve stdout (end):\n${stdout.slice(-4000)}`);
        t.comment(`svc serve errors, one line per message:\n${distinctErrorLines(stdout).join('\n')}`);
      }
      if (!hasExited) {
        child.kill('SIGTERM');
        await within(exited, 8000);
      }
    } finally {
      killGroup(pid, 'SIGKILL');
    }
  });

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? HANG_GUARD_MS);
  for (;;) {
    if (hasExited) {
      throw new Error(`svc serve exited before answering /health:\n${stderr}\n${stdout.slice(-2000)}`);
    }
    const answer = await request(url, 'GET', '/health').catch(() => null);
    if (answer?.status === 200) break;
    if (Date.now() > deadline)
      throw new Error(`svc serve did not answer /health within the time:\n${stderr}`);
    await sleep(100);
  }
  // The API answers before the scheduler and the dispatcher are up: each checks the schema as it starts and
  // stops for good (exit 78) if it does not fit. A test that changes the schema at once (upgrade.test undoes
  // migrations under the server) raced them on a loaded machine, and the supervisor gave up before the check.
  while (childrenStarting(options.home, pid) && !hasExited && Date.now() < deadline) await sleep(100);
  return {
    pid,
    port,
    consentBankPort,
    url,
    process: child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    request: (method, path, requestOptions) => request(url, method, path, requestOptions),
  };
}

/** The log's error lines (JSON, level 50 and up), one per distinct message, so a rare one is not lost in the tail. */
function distinctErrorLines(log: string): string[] {
  const byMessage = new Map<string, string>();
  for (const line of log.split('\n')) {
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
      const message = `${entry.msg} ${entry.err?.message ?? ''}`;
      if ((entry.level ?? 0) >= 50 && !byMessage.has(message)) byMessage.set(message, line.slice(0, 3000));
    } catch {
      // not a JSON log line
    }
  }
  return [...byMessage.values()].slice(0, 20);
}

/** Polls `probe` until it returns something other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 100,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) return undefined;
    await sleep(intervalMs);
  }
}

/** `promise`'s value, or undefined if it takes longer than `ms` (without keeping the process alive after). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * True while a process with this pid exists and has not exited: a zombie (dead, not yet reaped by its
 * parent, which on a loaded machine can take a while) holds no port, file or CPU, so it does not count.
 */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch (error) {
    // Gone since the signal check; or, with no /proc at all (not Linux), the signal check has to do.
    return !((error as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc'));
  }
}

/** `svc install` for this engine: Postgres needs the URL of its fresh schema, SQLite uses the default file. */
export function installArgs(engine: 'sqlite' | 'postgres', url: string, extra: string[] = []): string[] {
  return ['install', ...(engine === 'postgres' ? ['--database-url', url] : []), ...extra];
}

/**
 * A fresh database with `svc install` run on it, as a new user's home: its home, the printed test secret key
 * and the default organisation's id.
 */
export async function installedHome(
  t: Test,
  engine: EngineName,
): Promise<{ database: TestDatabase; home: string; key: string; orgId: string }> {
  const database = await freshDatabase(t, engine);
  const installed = await runCliJson<{ organisation: { id: string }; keys: { secret: string } }>(
    t,
    installArgs(engine, database.url),
    { home: database.home },
  );
  return { database, home: database.home, key: installed.keys.secret, orgId: installed.organisation.id };
}

/** Points the home's live-mode `bancochile` connector at a reference bank gateway, as an operator would. */
export function useBankGateway(home: string, gateway: { url: string; secret: string }): void {
  const configFile = join(home, 'config.json');
  const config = JSON.parse(readFileSync(configFile, 'utf8'));
  config.banks = {
    connectors: { bancochile: { url: gateway.url, secret: gateway.secret, timeoutMs: 10_000 } },
  };
  writeFileSync(configFile, JSON.stringify(config, null, 2));
}

/** Opens the appliance's database from the test process, for checks a user would make with a SQL client. */
export async function withDatabase<T>(url: string, work: (db: Database) => Promise<T>): Promise<T> {
  const db = openDatabase({ url });
  try {
    return await work(db);
  } finally {
    await db.close();
  }
}

/** The migrations the database at `url` has applied, in the order they ran. */
export async function appliedMigrations(url: string): Promise<string[]> {
  return withDatabase(url, async (db) =>
    (await db.knex('knex_migrations').select('name').orderBy('id')).map((row: { name: string }) => row.name),
  );
}

/** `svc serve`'s JSON log lines so far; a line that is not JSON (a child's stray output) is passed over. */
export function serveLogLines(serve: ServeProcess): { level: number; name?: string; msg: string }[] {
  return serve
    .stdout()
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as { level: number; name?: string; msg: string }];
      } catch {
        return [];
      }
    });
}

/** What `svc serve` logged at error level or above (pino's 50), message by message. */
export function serveErrors(serve: ServeProcess): string[] {
  return serveLogLines(serve)
    .filter((line) => line.level >= 50)
    .map((line) => line.msg);
}

/** The state file a `svc serve` supervisor keeps (what `svc status` reads); undefined while it is replaced. */
export function supervisorStateOf(
  home: string,
  serve: Pick<ServeProcess, 'pid'>,
): SupervisorState | undefined {
  try {
    return JSON.parse(readFileSync(join(home, 'run', `serve-${serve.pid}.json`), 'utf8')) as SupervisorState;
  } catch {
    return undefined; // not written yet, or being replaced
  }
}

/** True while the supervisor's state file is missing or names a child that has not said it is ready. */
function childrenStarting(home: string, pid: number): boolean {
  const state = supervisorStateOf(home, { pid });
  return !state || state.children.some((child) => child.status === 'starting');
}

function supervisorState(home: string, pid: number): string {
  try {
    return readFileSync(join(home, 'run', `serve-${pid}.json`), 'utf8');
  } catch (error) {
    return (error as Error).message;
  }
}

/** `work` over `items`, at most `limit` at a time, results in order. */
export async function mapLimit<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
