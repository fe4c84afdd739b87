import { existsSync, lstatSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { upgradeDirectory } from './stage.js';

/*
 * Step 4: the previous build moves to `.svc-upgrade/previous` and the staged one takes its place, one rename a
 * part (dist/, oclif.manifest.json, and node_modules when the dependencies were staged). Each rename is atomic
 * on one file system; `.svc-upgrade` is inside the checkout, so it is the same one.
 */

/** The parts of a build that move: the code, the command manifest, and the dependencies when they were staged. */
function parts(withDependencies: boolean): string[] {
  return ['dist', 'oclif.manifest.json', ...(withDependencies ? ['node_modules'] : [])];
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

export interface Swap {
  /** What was moved, in order, so that `swapBack` undoes exactly that. */
  moved: { from: string; to: string }[];
}

export function swapIn(checkout: string, withDependencies: boolean): Swap {
  const next = join(upgradeDirectory(checkout), 'next');
  const previous = join(upgradeDirectory(checkout), 'previous');
  // The build kept by the last upgrade goes: only one previous build is kept.
  rmSync(previous, { recursive: true, force: true });
  mkdirSync(previous, { recursive: true, mode: 0o700 });
  const swap: Swap = { moved: [] };
  const move = (from: string, to: string) => {
    renameSync(from, to);
    swap.moved.push({ from, to });
  };
  try {
    for (const part of parts(withDependencies)) {
      if (!exists(join(next, part))) throw new Error(`the staged build has no ${part}`);
      if (exists(join(checkout, part))) move(join(checkout, part), join(previous, part));
      move(join(next, part), join(checkout, part));
    }
  } catch (error) {
    swapBack(swap);
    throw error;
  }
  return swap;
}

/** Puts the previous build back and the new one back into `next` (so that a rerun reuses it). */
export function swapBack(swap: Swap): void {
  for (const { from, to } of [...swap.moved].reverse()) {
    if (exists(from) && !lstatSync(from).isDirectory()) rmSync(from, { force: true });
    else if (existsSync(from)) rmSync(from, { recursive: true, force: true });
    renameSync(to, from);
  }
  swap.moved = [];
}
