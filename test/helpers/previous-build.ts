import { execFile, execFileSync } from 'node:child_process';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { REPO_ROOT } from './cli.js';

const run = promisify(execFile);

/** A release of svc built from an older commit of this checkout's history, beside it. */
export interface PreviousBuild {
  /** Its root: pass it as `root` to runCli or startServe. */
  root: string;
  /** The full commit it was built from. */
  commit: string;
  /** Why this commit: the rule it was picked by, for the test's log. */
  picked: string;
  /** Its migrations' names, in order. */
  migrations: string[];
  /** How long exporting and building it took. */
  buildMs: number;
}

/** The error a person reads when the history is not there: what is missing and the command that fetches it. */
export class PreviousBuildUnavailable extends Error {
  override name = 'PreviousBuildUnavailable';
}

function git(root: string, args: string[]): string {
  return execFileSync('git', args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

function tryGit(root: string, args: string[]): string | null {
  try {
    return git(root, args);
  } catch {
    return null;
  }
}

const FETCH_HINT =
  'fetch the whole history (`git fetch --unshallow`, or `fetch-depth: 0` for actions/checkout) and run it again';

/**
 * Which commit is "the previous release" for a rolling upgrade: the parent of the newest commit that added a
 * migration, i.e. the last build whose schema this checkout's migrations move on. SVC_ROLLING_FROM names
 * another commit (any `git rev-parse` form, e.g. `HEAD~1`) for trying the test against a chosen build.
 */
export function previousCommit(root = REPO_ROOT): { commit: string; picked: string } {
  if (tryGit(root, ['rev-parse', '--git-dir']) === null)
    throw new PreviousBuildUnavailable(
      `${root} is not a git checkout: the rolling-upgrade test builds the previous release from git history; run it in a clone of the repository (git clone, not an exported tarball)`,
    );
  const shallow = tryGit(root, ['rev-parse', '--is-shallow-repository']) === 'true';
  const override = process.env.SVC_ROLLING_FROM;
  if (override) {
    const commit = tryGit(root, ['rev-parse', '--verify', '--quiet', `${override}^{commit}`]);
    if (!commit)
      throw new PreviousBuildUnavailable(
        `SVC_ROLLING_FROM=${override} names no commit of this checkout${shallow ? ` (a shallow clone: ${FETCH_HINT})` : ''}`,
      );
    return { commit, picked: `SVC_ROLLING_FROM=${override}` };
  }
  const added = tryGit(root, ['log', '--diff-filter=A', '--format=%H', '-1', '--', 'migrations/']);
  if (!added)
    throw new PreviousBuildUnavailable(
      `no commit of this checkout's history adds a migration${shallow ? `: it is a shallow clone; ${FETCH_HINT}` : ''}`,
    );
  const parent = tryGit(root, ['rev-parse', '--verify', '--quiet', `${added}^`]);
  if (!parent)
    throw new PreviousBuildUnavailable(
      `the parent of ${added.slice(0, 12)} (the newest commit that adds a migration) is not in this checkout${shallow ? ` (a shallow clone)` : ''}: ${FETCH_HINT}`,
    );
  const subject = git(root, ['log', '-1', '--format=%s', added]).slice(0, 80);
  return {
    commit: parent,
    picked: `the parent of ${added.slice(0, 12)} ("${subject}"), the newest commit that adds a migration`,
  };
}

/**
 * The previous release built as an operator's old install would be: `git archive` of `previousCommit()` into
 * a temporary directory, this checkout's node_modules linked (Node resolves a linked package to its real
 * path, so the build's own modules stay its own), compiled with its own tsconfig (src, commands and
 * migrations only: its tests and benches are not part of a release and took a third of the time), its
 * build-info written with the commit (the export is no git checkout, so scripts/build-info.js would find
 * none) and its oclif manifest generated, as `npm run build` does. About 30 s; removed when `t` ends.
 */
export async function previousBuild(t: Test): Promise<PreviousBuild> {
  const started = Date.now();
  const { commit, picked } = previousCommit();
  const root = mkdtempSync(join(tmpdir(), 'svc-previous-build-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  await run('sh', ['-c', `git -C "$0" archive --format=tar "$1" | tar -x -C "$2"`, REPO_ROOT, commit, root]);
  symlinkSync(realpathSync(join(REPO_ROOT, 'node_modules')), join(root, 'node_modules'));
  writeFileSync(
    join(root, 'tsconfig.release.json'),
    JSON.stringify({
      extends: './tsconfig.json',
      compilerOptions: { declaration: false, sourceMap: false },
      include: ['src', 'commands', 'migrations'],
    }),
  );
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await run(process.execPath, [tsc, '-p', 'tsconfig.release.json'], { cwd: root, maxBuffer: 16 << 20 });
  } catch (error) {
    const { stdout } = error as { stdout?: string };
    throw new Error(
      `the previous build (${commit.slice(0, 12)}) does not compile:\n${stdout ?? String(error)}`,
    );
  }
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(
    join(root, 'dist', 'build-info.json'),
    `${JSON.stringify({ version, commit: commit.slice(0, 12), dirty: false, builtAt: new Date().toISOString() }, null, 2)}\n`,
  );
  const oclif = join(REPO_ROOT, 'node_modules', 'oclif', 'bin', 'run.js');
  await run(process.execPath, [oclif, 'manifest'], { cwd: root, maxBuffer: 16 << 20 });
  const migrations = readdirSync(join(root, 'migrations'))
    .filter((name) => name.endsWith('.ts'))
    .map((name) => name.slice(0, -'.ts'.length))
    .sort();
  return { root, commit, picked, migrations, buildMs: Date.now() - started };
}
