import './untracked-children.js';
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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
 * Whether any process of the group led by `pgid` is alive. Unlike `killGroup(pgid, 0)`, a zombie (exited,
 * waiting for init to reap it, which on a loaded machine can take a while) does not count: it holds no
 * port, file or CPU.
 */
export function groupIsAlive(pgid: number): boolean {
  if (!killGroup(pgid, 0)) return false;
  const members = procEntries().filter((entry) => entry.pgrp === pgid);
  // Without /proc (not Linux) the signal check is all there is.
  return members.length === 0 && !hasProc() ? true : members.some((entry) => entry.state !== 'Z');
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

/** Pids whose parent is `parent`; empty where there is no /proc. */
function childrenOf(parent: number): number[] {
  return procEntries()
    .filter((entry) => entry.ppid === parent)
    .map((entry) => entry.pid);
}

interface ProcEntry {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
}

function hasProc(): boolean {
  return existsSync('/proc/self/stat');
}

/** Every process's state, parent and group, read from /proc (Linux); empty where there is none. */
function procEntries(): ProcEntry[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const entries: ProcEntry[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The command name (field 2) is in parentheses and may hold spaces; state, ppid and pgrp follow it.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      entries.push({ pid: Number(name), state: state!, ppid: Number(ppid), pgrp: Number(pgrp) });
    } catch {
      // gone while we looked
    }
  }
  return entries;
}
