import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { checkTree } from '../helpers/tree-check.js';

/* scripts/check-floors.js: every import of src/ points down a floor (issue 42), on planted trees and on ours. */

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-floors.js', import.meta.url));
const REPO = fileURLToPath(new URL('../../../', import.meta.url));

function check(t: Test, files: Record<string, string> | null): { status: number | null; stderr: string } {
  if (files) return checkTree(t, SCRIPT, files);
  const run = spawnSync(process.execPath, [SCRIPT, REPO], { encoding: 'utf8' });
  return { status: run.status, stderr: run.stderr };
}

const DOWNWARD = {
  'src/db/snapshot.ts':
    "import { maskUrl } from './database-url.js';\nimport { newId } from '../ids/ids.js';\n",
  'src/links/links.ts': "import { insertJobs } from '../jobs/jobs.js';\n",
  'src/jobs/jobs.ts': "import { markLinkQueued } from '../links/link-states.js';\n", // a named exception
  'commands/serve.ts': "const { supervise } = await import('../src/processes/supervisor.js');\n",
};

t.test('imports that point down, and the named exceptions, pass', async (t) => {
  const { status, stderr } = check(t, DOWNWARD);
  t.equal(status, 0, stderr);
});

t.test('this checkout passes', async (t) => {
  const { status, stderr } = check(t, null);
  t.equal(status, 0, stderr);
});

t.test('the ground importing upward fails, naming file, line and floor', async (t) => {
  const { status, stderr } = check(t, {
    ...DOWNWARD,
    // What the ground floor did before issue 42: db/ took its errors and masks from above.
    'src/db/restore-data.ts': "// restore\nimport { ArchiveError } from '../backup/tar.js';\n",
    'src/db/snapshot.ts': "import { maskUrl } from '../config/load-config.js';\n",
  });
  t.equal(status, 1);
  t.match(stderr, 'src/db/restore-data.ts:2: imports src/backup/tar.ts, of backup/, which stands above it');
  t.match(
    stderr,
    'src/db/snapshot.ts:1: imports src/config/load-config.ts, of config/, which stands above it',
  );
  t.match(stderr, '2 import(s) that do not point down');
});

t.test(
  'two rooms of one floor may not import each other; an exception covers its own file only',
  async (t) => {
    const { status, stderr } = check(t, {
      ...DOWNWARD,
      'src/sync/engine.ts': "import type { WidgetSession } from '../widget/sessions.js';\n",
      'src/jobs/claims.ts': "import { markLinkQueued } from '../links/link-states.js';\n",
    });
    t.equal(status, 1);
    t.match(
      stderr,
      'src/sync/engine.ts:1: imports src/widget/sessions.ts, of widget/, which stands on its own floor',
    );
    t.match(stderr, 'src/jobs/claims.ts:1: imports src/links/link-states.ts');
  },
);

t.test('a new room must be given a floor', async (t) => {
  const { status, stderr } = check(t, { ...DOWNWARD, 'src/payouts/payouts.ts': 'export const x = 1;\n' });
  t.equal(status, 1);
  t.match(stderr, 'src/payouts/: a room on no floor');
});
