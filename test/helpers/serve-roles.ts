import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';
import type { SupervisorState } from '../../src/processes/status.js';
import { freePort, killGroup, spawnCli, within } from './cli.js';
import { HANG_GUARD_MS } from './harness.js';

export interface WorkerProcess {
  pid: number;
  roles: string;
  process: ChildProcess;
  /** The supervisor's state file: each child's pid, status and restarts. */
  state(): SupervisorState | null;
  /** The last 200 kB of the children's JSON log lines. */
  stdout(): string;
  stderr(): string;
  /** Resolves when `svc serve` has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

/**
 * Starts `svc serve --roles <roles>` for roles without an API port (scheduler, dispatcher), waits until the
 * supervisor reports every child running, and stops it (SIGTERM, then SIGKILL to its group) at teardown.
 * `startServe` (cli.ts) is the one for roles that include the API: it waits for /health instead.
 */
export async function startWorkers(
  t: Test,
  options: {
    home: string;
    roles: string;
    env?: Record<string, string>;
    readyTimeoutMs?: number;
    /** Another build's root to run (other-build.ts, previous-build.ts) instead of this checkout. */
    root?: string;
    /** Called with every log line the children write (JSON lines), e.g. to count what each one did. */
    onLine?: (line: string) => void;
  },
): Promise<WorkerProcess> {
  const child = spawnCli(
    ['serve', '--roles', options.roles],
    {
      home: options.home,
      ...(options.root ? { root: options.root } : {}),
      env: {
        SVC_METRICS_PORT: String(await freePort()),
        SVC_SUPERVISOR_SHUTDOWN_TIMEOUT_SECONDS: '5',
        ...options.env,
      },
    },
    t,
  );
  let stdout = '';
  let stderr = '';
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stdout = (stdout + text).slice(-200_000);
    if (!options.onLine) return;
    const lines = (partial + text).split('\n');
    partial = lines.pop()!;
    for (const line of lines) options.onLine(line);
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-200_000)));
  let exited = false;
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve({ code, signal });
    }),
  );
  const pid = child.pid!;
  const state = (): SupervisorState | null => {
    try {
      return JSON.parse(readFileSync(join(options.home, 'run', `serve-${pid}.json`), 'utf8'));
    } catch {
      return null; // not written yet, or being rewritten
    }
  };
  const stop = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      await within(exit, 8000);
    }
    killGroup(pid, 'SIGKILL');
  };
  t.teardown(async () => {
    if (!t.passing()) t.comment(`svc serve --roles ${options.roles} stderr:\n${stderr.slice(-3000)}`);
    await stop();
  });

  const deadline = Date.now() + (options.readyTimeoutMs ?? HANG_GUARD_MS);
  for (;;) {
    if (exited) throw new Error(`svc serve --roles ${options.roles} exited at start:\n${stderr}`);
    const current = state();
    if (current && current.children.every((c) => c.status === 'running')) break;
    if (Date.now() > deadline)
      throw new Error(`svc serve --roles ${options.roles} did not start:\n${stderr}`);
    await sleep(100);
  }
  return {
    pid,
    roles: options.roles,
    process: child,
    state,
    stdout: () => stdout,
    stderr: () => stderr,
    exited: exit,
    stop,
  };
}
