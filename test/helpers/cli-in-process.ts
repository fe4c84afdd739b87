import { AsyncLocalStorage } from 'node:async_hooks';
import { Config, run } from '@oclif/core';
import { Exit, handle } from '@oclif/core/handle';

/**
 * `svc <args>` run inside the test process, for tests about what a command prints, returns and writes
 * rather than about the process itself. A `svc` process costs node's start-up and the CLI's imports every
 * time: 0.27 s idle and several seconds on a loaded machine, where the e2e files that ran a few dozen
 * commands each came within seconds of their time limit. In here a command costs its own work.
 *
 * The command sees what it would see as a process of its own (bin/run.js): its environment alone, umask
 * 077, no terminal, and oclif's error handling and exit code. What it prints is captured by async context,
 * so the test's own output (tap's stream, a receiver's log) never mixes with it. Commands run one at a time
 * (the environment is the process's); the harness sends commands that serve or wait for a signal to a
 * process of their own (cli.ts).
 */

export interface InProcessResult {
  code: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

interface Capture {
  stdout: string;
  stderr: string;
  exitCode: number | null;
}

const capture = new AsyncLocalStorage<Capture>();
let queue: Promise<unknown> = Promise.resolve();

export async function runInProcess(
  root: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<InProcessResult> {
  const turn = queue.then(() => runAlone(root, args, env, timeoutMs));
  queue = turn.catch(() => undefined);
  return turn;
}

async function runAlone(
  root: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<InProcessResult> {
  installHooks();
  // A configuration per command (2 ms): oclif's help renames the commands it shows inside its configuration.
  const config = await Config.load(root);
  const output: Capture = { stdout: '', stderr: '', exitCode: null };
  const restoreEnv = useEnvironment(env);
  const restoreTerminal = withoutTerminal();
  const previousUmask = process.umask(0o077);
  const previousExitCode = process.exitCode;
  process.exitCode = undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const finished = capture.run(output, async () => {
      try {
        await run(args, config);
        return Number(process.exitCode ?? 0);
      } catch (error) {
        // oclif's own handler prints the error as bin/run.js would and "exits" (Exit.exit, below).
        await handle(error as Error);
        return output.exitCode ?? 1;
      }
    });
    const timedOut = new Promise<'timed out'>(
      (resolve) => (timer = setTimeout(() => resolve('timed out'), timeoutMs)),
    );
    const code = await Promise.race([finished, timedOut]);
    return code === 'timed out'
      ? { code: 1, stdout: output.stdout, stderr: output.stderr, timedOut: true }
      : { code, stdout: output.stdout, stderr: output.stderr, timedOut: false };
  } finally {
    clearTimeout(timer);
    process.exitCode = previousExitCode;
    process.umask(previousUmask);
    restoreTerminal();
    restoreEnv();
  }
}

let hooksInstalled = false;

/** Writes and exits made inside a command's async context go to its capture instead of the process. */
function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = process[name];
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const output = capture.getStore();
      if (!output) return write(chunk, ...rest);
      output[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      if (callback) process.nextTick(callback);
      return true;
    }) as typeof stream.write;
  }
  // Inside a command, oclif's handler has printed the error and only needs the code: it returns after.
  const exit = Exit.exit.bind(Exit);
  Exit.exit = ((code = 0) => {
    const output = capture.getStore();
    if (!output) return exit(code);
    output.exitCode = code;
  }) as typeof Exit.exit;
}

/** Makes `process.env` exactly `env` until the returned function puts it back. */
function useEnvironment(env: Record<string, string>): () => void {
  const saved = { ...process.env };
  for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name];
  Object.assign(process.env, env);
  return () => {
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  };
}

/** A command started by a test has pipes, not a terminal, even when the developer's stderr is one. */
function withoutTerminal(): () => void {
  const streams = [process.stdin, process.stdout, process.stderr].filter((stream) => stream.isTTY);
  for (const stream of streams) Object.defineProperty(stream, 'isTTY', { value: false, configurable: true });
  return () => {
    for (const stream of streams) Object.defineProperty(stream, 'isTTY', { value: true, configurable: true });
  };
}
