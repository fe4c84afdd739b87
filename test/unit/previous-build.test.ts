import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from '../helpers/cli.js';
import { previousCommit } from '../helpers/previous-build.js';

/**
 * The rolling-upgrade test (test/e2e/rolling-upgrade.test.ts) builds the previous release from git history:
 * where that history is missing, the person running it reads what is missing and how to fetch it.
 */
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-previous-build-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};

t.test('outside a git checkout (an exported tarball)', async (t) => {
  const dir = scratch();
  t.throws(() => previousCommit(dir), {
    name: 'PreviousBuildUnavailable',
    message: new RegExp(`${dir} is not a git checkout.*git clone`),
  });
});

t.test('in a shallow clone: how to fetch the whole history', async (t) => {
  const dir = join(scratch(), 'clone');
  execFileSync('git', ['clone', '--quiet', '--depth', '1', `file://${REPO_ROOT}`, dir], { stdio: 'ignore' });
  t.throws(() => previousCommit(dir), {
    message: /is not in this checkout \(a shallow clone\): fetch the whole history \(`git fetch --unshallow`/,
  });
});

t.test('SVC_ROLLING_FROM naming no commit', async (t) => {
  const saved = process.env.SVC_ROLLING_FROM;
  process.env.SVC_ROLLING_FROM = 'no-such-commit';
  t.teardown(() => {
    if (saved === undefined) delete process.env.SVC_ROLLING_FROM;
    else process.env.SVC_ROLLING_FROM = saved;
  });
  t.throws(() => previousCommit(REPO_ROOT), { message: /SVC_ROLLING_FROM=no-such-commit names no commit/ });
});

t.test('in this checkout: the parent of the newest commit that adds a migration', async (t) => {
  const saved = process.env.SVC_ROLLING_FROM;
  delete process.env.SVC_ROLLING_FROM;
  t.teardown(() => {
    if (saved !== undefined) process.env.SVC_ROLLING_FROM = saved;
  });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  const added = git('log', '--diff-filter=A', '--format=%H', '-1', '--', 'migrations/');
  const picked = previousCommit(REPO_ROOT);
  t.equal(picked.commit, git('rev-parse', `${added}^`));
  t.match(picked.picked, `the parent of ${added.slice(0, 12)}`);
  const files = (commit: string) => git('ls-tree', '--name-only', commit, 'migrations/').split('\n');
  const before = files(picked.commit);
  t.ok(
    files(added).some((path) => !before.includes(path)),
    'the picked build lacks the migration its child adds',
  );
});
