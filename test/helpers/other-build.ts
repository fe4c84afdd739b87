import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { REPO_ROOT } from './cli.js';

/**
 * The migration a newer build adds by default in these tests: a table nothing else reads, but with no `kind`,
 * so it counts as contract (the safe default) and is never applied under a running server of another build.
 */
export const NEWER_MIGRATION = '29990101000000_newer_build_probe';
/** A newer build's expand step: a new table, which this build never reads. */
export const NEWER_EXPAND = '29990102000000_newer_build_notes';
/** The same build's contract step: a column of that table dropped (no build here reads it). */
export const NEWER_CONTRACT = '29990103000000_newer_build_notes_contract';

const NEWER_MIGRATION_SOURCE = `export async function up(knex) {
  await knex.schema.createTable('newer_build_probe', (t) => {
    t.string('id', 32).primary();
  });
}

export async function down(knex) {
  await knex.schema.dropTableIfExists('newer_build_probe');
}
`;

const SOURCES: Record<string, string> = {
  [NEWER_MIGRATION]: NEWER_MIGRATION_SOURCE,
  [NEWER_EXPAND]: `export const kind = 'expand';

export async function up(knex) {
  await knex.schema.createTable('newer_build_notes', (t) => {
    t.string('id', 32).primary();
    t.string('note', 64);
    t.string('legacy_note', 64);
  });
}

export async function down(knex) {
  await knex.schema.dropTableIfExists('newer_build_notes');
}
`,
  [NEWER_CONTRACT]: `export const kind = 'contract';

export async function up(knex) {
  await knex.schema.alterTable('newer_build_notes', (t) => {
    t.dropColumn('legacy_note');
  });
}

export async function down(knex) {
  await knex.schema.alterTable('newer_build_notes', (t) => {
    t.string('legacy_note', 64);
  });
}
`,
};

/**
 * A newer release of svc beside this checkout, as an operator would have after pulling it: a copy of the
 * compiled code (bin, dist without its tests and benches, package.json, the oclif manifest; node_modules and
 * the static sources linked) whose migrations are this build's plus `migrations` (by default
 * `NEWER_MIGRATION`; or `NEWER_EXPAND` and `NEWER_CONTRACT`). Pass its root as `root` to runCli or
 * startServe. About 5 MB and 50 ms; removed when the test ends.
 */
export function newerBuild(t: Test, migrations: readonly string[] = [NEWER_MIGRATION]): string {
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
  for (const name of migrations)
    writeFileSync(join(root, 'dist', 'migrations', `${name}.js`), SOURCES[name]!);
  return root;
}
