import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { onExit } from 'signal-exit';
import type { Test } from 'tap';

/**
 * Every process a test starts is owned here: it runs in a process group of its own, and the group is
 * killed with SIGKILL when its test ends, when tap times the file out (tap sends SIGALRM, which
 * signal-exit turns into this module's exit handler), when the runner is interrupted (SIGINT, SIGTERM,
 * SIGHUP) and when the test process exits. A `svc serve` killed with the file used to run on after the
 * suite, at a few percent of CPU, slowing every later run on the machine.
 */
const ownedGroups = new Set<number>();
let exitHandlerInstalled = false;

/** Sends `signal` to every process in the group led by `pid`; false when none is left. */
export function killGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/**
 * Spawns `command` in a process group of its own and owns that group: with a test, until the test ends
 * (a graceful stop the caller registers runs first, if registered first; this kills whatever is left);
 * without one, until the caller kills the group and calls `releaseGroup`.
 */
export function spawnOwned(
  command: string,
  args: readonly string[],
  options: Omit<SpawnOptions, 'detached'>,
  t?: Test,
): ChildProcess {
  installExitHandler();
  const child = spawn(command, args, { ...options, detached: true });
  const pid = child.pid;
  if (pid === undefined) return child; // the 'error' event says why
  ownedGroups.add(pid);
  t?.teardown(() => {
    killGroup(pid, 'SIGKILL');
    releaseGroup(pid);
  });
  return child;
}

/** Forgets a group its owner has killed, so that a later pid with the same number is left alone. */
export function releaseGroup(pid: number): void {
  ownedGroups.delete(pid);
}

/**
 * Processes a library starts for us (Chromium through playwright) are not in our registry: at exit, the
 * direct children of this process are killed with their groups too.
 */
function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  onExit(() => {
    for (const pid of ownedGroups) killGroup(pid, 'SIGKILL');
    for (const pid of childrenOf(process.pid)) {
      if (!killGroup(pid, 'SIGKILL')) killQuietly(pid);
    }
  });
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Pids whose parent is `parent`, read from /proc (Linux); empty where there is no /proc. */
function childrenOf(parent: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name (field 2) is in parentheses and may hold spaces; the ppid follows the state.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {
      // gone while we looked
    }
  }
  return children;
}
