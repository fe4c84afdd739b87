import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { REPO_ROOT } from './cli.js';

/** The migration a newer build adds in these tests: an expand step (a table nothing else reads). */
export const NEWER_MIGRATION = '29990101000000_newer_build_probe';

const NEWER_MIGRATION_SOURCE = `export async function up(knex) {
  await knex.schema.createTable('newer_build_probe', (t) => {
    t.string('id', 32).primary();
  });
}

export async function down(knex) {
  await knex.schema.dropTableIfExists('newer_build_probe');
}
`;

/**
 * A newer release of svc beside this checkout, as an operator would have after pulling it: a copy of the
 * compiled code (bin, dist without its tests and benches, package.json, the oclif manifest; node_modules and
 * the static sources linked) whose migrations are this build's plus `NEWER_MIGRATION`. Pass its root as
 * `root` to runCli or startServe. About 5 MB and 50 ms; removed when the test ends.
 */
export function newerBuild(t: Test): string {
  const root = mkdtempSync(join(tmpdir(), 'svc-newer-build-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const part of [
    'bin',
    'package.json',
    'oclif.manifest.json',
    'dist/src',
    'dist/commands',
    'dist/migrations',
  ])
    cpSync(join(REPO_ROOT, part), join(root, part), { recursive: true });
  // Node resolves a linked package to its real path, so the copy's own modules stay the copy's.
  symlinkSync(realpathSync(join(REPO_ROOT, 'node_modules')), join(root, 'node_modules'));
  symlinkSync(join(REPO_ROOT, 'src'), join(root, 'src'));
  mkdirSync(join(root, 'dist', 'migrations'), { recursive: true });
  writeFileSync(join(root, 'dist', 'migrations', `${NEWER_MIGRATION}.js`), NEWER_MIGRATION_SOURCE);
  return root;
}
