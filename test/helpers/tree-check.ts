import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Test } from 'tap';

/**
 * Runs a check of the source tree (`scripts/check-*.js ROOT`) on a tree of the given files (path → text),
 * made for the test and removed after it, and returns the check's exit code and stderr.
 */
export function checkTree(
  t: Test,
  script: string,
  files: Record<string, string>,
): { status: number | null; stderr: string } {
  const root = mkdtempSync(join(tmpdir(), 'tree-check-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const run = spawnSync(process.execPath, [script, root], { encoding: 'utf8' });
  return { status: run.status, stderr: run.stderr };
}
