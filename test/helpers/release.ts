import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { REPO_ROOT } from './cli.js';

/*
 * Releases as an operator has them in the checkout svc runs from: this build installed (sources and dist/),
 * then the next release's sources pulled over it (svc upgrade's tests, test/e2e/svc-upgrade.test.ts).
 */

/** This checkout's package.json version. */
export const THIS_VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

/** The next patch version after this one. */
export function nextPatch(version: string): string {
  const [major, minor, patch] = version.split('.').map(Number);
  return `${major}.${minor}.${patch! + 1}`;
}

/**
 * A checkout of this release, built and installable: its sources (what the next release's build needs:
 * bin, commands, migrations, scripts, src, package.json, package-lock.json, tsconfig.json, CHANGELOG.md) and
 * its build (dist without the tests and benches, the oclif manifest), node_modules linked. Not a git
 * checkout: its builds carry no commit. About 20 MB; removed when the test ends.
 */
export function previousRelease(t: Test): string {
  const root = mkdtempSync(join(tmpdir(), 'svc-release-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const part of [
    'bin',
    'commands',
    'migrations',
    'scripts',
    'src',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'CHANGELOG.md',
    'oclif.manifest.json',
    'dist/src',
    'dist/commands',
    'dist/migrations',
    'dist/build-info.json',
  ])
    cpSync(join(REPO_ROOT, part), join(root, part), { recursive: true });
  // Node resolves a linked package to its real path, so the copy's own modules stay the copy's.
  symlinkSync(realpathSync(join(REPO_ROOT, 'node_modules')), join(root, 'node_modules'));
  return root;
}

/** The organisation name the next release's migration refuses (`NEXT_MIGRATION`): a migration that fails on data. */
export const BLOCKING_NAME = 'blocks-the-next-migration';

export const NEXT_MIGRATION = '29990101000000_upgrade_probe';

const NEXT_MIGRATION_SOURCE = `import type { Knex } from 'knex';

// The next release's one migration (svc upgrade's tests): an expand step that fails on an organisation named
// ${BLOCKING_NAME}, as a migration can meet data it did not expect.
export async function up(knex: Knex): Promise<void> {
  const blocker = await knex('organisations').where({ name: '${BLOCKING_NAME}' }).first('id');
  if (blocker) throw new Error(\`organisation \${blocker.id} is named ${BLOCKING_NAME}: rename it first\`);
  await knex.schema.createTable('upgrade_probe', (t) => {
    t.string('id', 32).primary();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('upgrade_probe');
}
`;

/** The CHANGELOG section the next release adds. */
export function nextChangelogSection(version: string): string {
  return `## [${version}] — 2026-12-01

### Added

- The upgrade probe table (migration \`${NEXT_MIGRATION}\`).

### Upgrade notes

- One expand migration: \`svc upgrade\` applies it.
`;
}

/** `git pull` of the next release into `root`: the version bumped, a CHANGELOG section, one new migration. */
export function pullNextRelease(root: string, version: string): void {
  const pkgFile = join(root, 'package.json');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { version: string };
  pkg.version = version;
  writeFileSync(pkgFile, JSON.stringify(pkg, null, 2) + '\n');
  const changelogFile = join(root, 'CHANGELOG.md');
  const changelog = readFileSync(changelogFile, 'utf8');
  const first = changelog.indexOf('\n## ');
  writeFileSync(
    changelogFile,
    `${changelog.slice(0, first + 1)}${nextChangelogSection(version)}\n${changelog.slice(first + 1)}`,
  );
  mkdirSync(join(root, 'migrations'), { recursive: true });
  writeFileSync(join(root, 'migrations', `${NEXT_MIGRATION}.ts`), NEXT_MIGRATION_SOURCE);
}
