import { execFile, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readlinkSync, realpathSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { serveChildren } from '../processes/other-homes.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { isAlive, runningSupervisors } from '../processes/status.js';
import { systemdUnit } from './plan.js';

const run = promisify(execFile);

/* Steps 3 and 6: the `svc serve` of this home, stopped and started again the way it ran. */

/** A running `svc serve` of this home, as the kernel knows it (Linux's /proc), so it can be started again alike. */
export interface RunningServer {
  pid: number;
  roles: string[];
  /** node, bin/run.js, serve, and its flags. */
  argv: string[];
  /** Its whole environment: the SVC_* settings it ran with (possibly the master key: never printed). */
  env: Record<string, string>;
  cwd: string;
  /** The systemd unit it runs in (install.sh --systemd: `svc.service`), or null. */
  unit: string | null;
  /** The terminal it was started in (`/dev/pts/3`), when its output goes to one; null when detached. */
  terminal: string | null;
}

function parseEnviron(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of text.split('\0')) {
    const at = entry.indexOf('=');
    if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/** The servers of this home, with what it takes to start them again; one that /proc does not show is refused. */
export function runningServers(home: string): RunningServer[] {
  return runningSupervisors(home).map((state) => {
    try {
      const proc = `/proc/${state.pid}`;
      return {
        pid: state.pid,
        roles: state.roles,
        argv: readFileSync(`${proc}/cmdline`, 'utf8').split('\0').filter(Boolean),
        env: parseEnviron(readFileSync(`${proc}/environ`, 'utf8')),
        cwd: readlinkSync(`${proc}/cwd`),
        unit: systemdUnit(readFileSync(`${proc}/cgroup`, 'utf8')),
        terminal: terminalOf(state.pid),
      };
    } catch (error) {
      throw new Error(
        `cannot read how svc serve pid ${state.pid} was started (/proc/${state.pid}: ${(error as Error).message}); run svc upgrade as the user that runs it, on Linux, or upgrade by hand (docs/upgrade.md).`,
      );
    }
  });
}

/** The terminal a process writes to (its stdout is `/dev/pts/N` or `/dev/ttyN`), or null. */
export function terminalOf(pid: number, proc = '/proc'): string | null {
  try {
    const out = readlinkSync(`${proc}/${pid}/fd/1`);
    return /^\/dev\/(pts\/\d+|tty\w*)$/.test(out) ? out : null;
  } catch {
    return null;
  }
}

/** A `svc serve` running this checkout's code, whatever its data directory. */
export interface CheckoutServer {
  /** The supervisor's pid. */
  pid: number;
  /** Its data directory (its children's SVC_HOME), or null when /proc does not show it to this user. */
  home: string | null;
  /** Its terminal, when it runs in one. */
  terminal: string | null;
}

/**
 * Every `svc serve` of this machine whose processes run this checkout's dist/, found by its children in /proc:
 * a child's command line names `<checkout>/dist/src/processes/child.js` (world-readable, so found whoever
 * runs it), and its environment holds SVC_HOME, which the supervisor sets for its children whatever flag or
 * default it had (readable for this user's processes, or as root). A swap of dist/ changes the code under
 * every one of them, whichever home `svc upgrade` was told.
 */
export function serversOfCheckout(checkout: string, proc = '/proc'): CheckoutServer[] {
  let root: string;
  try {
    root = realpathSync(checkout);
  } catch {
    return [];
  }
  const childEntry = join(root, 'dist', 'src', 'processes', 'child.js');
  const found = new Map<number, CheckoutServer>();
  for (const child of serveChildren(proc)) {
    if (!child.argv.includes(childEntry) || found.get(child.ppid)?.home) continue;
    found.set(child.ppid, { pid: child.ppid, home: child.home, terminal: terminalOf(child.ppid, proc) });
  }
  return [...found.values()].sort((a, b) => a.pid - b.pid);
}

/**
 * The command that starts a server again as it ran: its directory, the SVC_* settings of its environment
 * and its command line. A setting whose name says it is a secret (the master key, a password) is not
 * printed: the command takes it from the shell (`SVC_MASTER_KEY="$SVC_MASTER_KEY"`).
 */
export function restartCommand(server: Pick<RunningServer, 'argv' | 'env' | 'cwd'>): string {
  const quote = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);
  const settings = Object.entries(server.env)
    .filter(([name]) => name.startsWith('SVC_') && name !== 'SVC_LOG_FORMAT')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) =>
      /KEY|SECRET|PASSWORD|TOKEN|DATABASE_URL/.test(name) && value !== ''
        ? `${name}="$${name}"`
        : `${name}=${quote(value)}`,
    );
  return `cd ${quote(server.cwd)} && ${[...settings, ...server.argv.map(quote)].join(' ')}`;
}

/**
 * Tells the terminal a server ran in that it now runs detached, and how to have it there again (best effort:
 * the terminal may be gone). The person who started it looks there, not at svc upgrade's output.
 */
export function tellTerminal(terminal: string, text: string): void {
  try {
    const fd = openSync(terminal, 'w');
    try {
      writeSync(fd, `\r\n${text.replace(/\n/g, '\r\n')}\r\n`);
    } finally {
      closeSync(fd);
    }
  } catch {
    // closed, or not ours: svc upgrade's own output says the same
  }
}

/** Whether a server runs this checkout's bin/run.js (possibly through the `svc` link install.sh made). */
export function runsFrom(server: RunningServer, checkout: string): boolean {
  const script = server.argv[1];
  if (!script) return false;
  try {
    return realpathSync(resolve(server.cwd, script)) === realpathSync(join(checkout, 'bin', 'run.js'));
  } catch {
    return false;
  }
}

/** Stops a server: `systemctl stop` for a unit, else SIGTERM, and waits (bounded) for its supervisor to exit. */
export async function stopServer(
  server: RunningServer,
  waitMs: number,
  say: (line: string) => void,
): Promise<void> {
  if (server.unit) {
    say(`systemctl stop ${server.unit}`);
    await run('systemctl', ['stop', server.unit]);
  } else {
    say(
      `SIGTERM to svc serve pid ${server.pid} (${server.roles.join(',')}); waiting up to ${Math.round(waitMs / 1000)} s for it to drain its work and exit`,
    );
    try {
      process.kill(server.pid, 'SIGTERM');
    } catch {
      return; // gone already
    }
  }
  const deadline = Date.now() + waitMs;
  while (isAlive(server.pid)) {
    if (Date.now() > deadline)
      throw new Error(
        `svc serve pid ${server.pid} did not exit within ${Math.round(waitMs / 1000)} s of being asked to stop`,
      );
    await sleep(200);
  }
}

export interface StartedServer {
  /** The supervisor's pid when started here; null under systemd (systemctl knows it). */
  pid: number | null;
  log: string | null;
}

/** Starts a server again as it ran: `systemctl start`, or the same command line and environment, detached. */
export async function startServer(server: RunningServer, home: string, now: Date): Promise<StartedServer> {
  if (server.unit) {
    await run('systemctl', ['start', server.unit]);
    return { pid: null, log: null };
  }
  const logs = join(home, 'logs');
  mkdirSync(logs, { recursive: true, mode: 0o700 });
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const log = join(logs, `serve-${stamp}-${server.roles.join('-')}.log`);
  const fd = openSync(log, 'a', 0o600);
  try {
    const [command, ...args] = server.argv;
    const child = spawn(command!, args, {
      cwd: server.cwd,
      env: server.env,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', () => resolve());
      child.once('error', reject);
    });
    child.unref();
    return { pid: child.pid!, log };
  } finally {
    closeSync(fd);
  }
}

/** Polls `probe` until it returns true or the time is up; the last reason it gave is the error. */
export async function waitUntil(
  probe: () => Promise<string | true>,
  timeoutMs: number,
  intervalMs = 500,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await probe().catch((error: Error) => error.message);
    if (answer === true) return;
    if (Date.now() > deadline) throw new Error(`${answer} (after ${Math.round(timeoutMs / 1000)} s)`);
    await sleep(intervalMs);
  }
}

/** GET /health: true for a 200, else why not. */
export async function healthAnswers(url: string): Promise<string | true> {
  const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
  await response.body?.cancel();
  return response.status === 200 ? true : `${url}/health answered ${response.status}`;
}
