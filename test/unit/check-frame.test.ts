import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { checkTree } from '../helpers/tree-check.js';

/* scripts/check-frame.js: no feature imports the HTTP frame (src/http/), on a planted tree and on ours. */

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-frame.js', import.meta.url));
const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** The check on a planted tree, or with null on this checkout. */
function check(t: Test, files: Record<string, string> | null): { status: number | null; stderr: string } {
  if (files) return checkTree(t, SCRIPT, files);
  const run = spawnSync(process.execPath, [SCRIPT, REPO], { encoding: 'utf8' });
  return { status: run.status, stderr: run.stderr };
}

const FRAME = {
  'src/http/app.ts': "import { linkRoutes } from '../links/routes.js';\n",
  'src/http/server.ts': "import { createApp } from './app.js';\n",
  'src/processes/roles.ts': "const { startApiServer } = await import('../http/server.js');\n",
  'src/links/routes.ts': "import { defineRoute } from '../api/route.js';\n",
};

t.test('the frame, the processes that start it and features that use the kit pass', async (t) => {
  const { status, stderr } = check(t, FRAME);
  t.equal(status, 0, stderr);
});

t.test('a feature importing the frame fails, naming file and line', async (t) => {
  const { status, stderr } = check(t, {
    ...FRAME,
    'src/links/inspect.ts': "// the catalogue\nimport type { AnyRoute } from '../http/catalogue.js';\n",
    'src/console/http.ts': "const { createApp } = await import('../http/app.js');\n",
  });
  t.equal(status, 1);
  t.match(stderr, 'src/links/inspect.ts:2: imports src/http/catalogue.js');
  t.match(stderr, 'src/console/http.ts:1: imports src/http/app.js');
  t.match(stderr, '2 import(s) of src/http/ from a feature');
});

t.test("this checkout's features import no frame", async (t) => {
  const { status, stderr } = check(t, null);
  t.equal(status, 0, stderr);
});
