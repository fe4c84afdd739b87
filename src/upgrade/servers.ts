import { execFile, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
      };
    } catch (error) {
      throw new Error(
        `cannot read how svc serve pid ${state.pid} was started (/proc/${state.pid}: ${(error as Error).message}); run svc upgrade as the user that runs it, on Linux, or upgrade by hand (docs/upgrade.md).`,
      );
    }
  });
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
