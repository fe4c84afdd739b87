import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { waitFor } from '../helpers/cli.js';
import { groupIsAlive, killGroup } from '../helpers/processes.js';

/**
 * The harness's promise that nothing a test starts outlives it: a test file stopped by tap's timeout
 * (SIGALRM) or by an interrupted runner (SIGINT, SIGTERM) kills the process groups it owns, and the runner
 * names and kills, and counts as a failure, any process of its run still alive at the end.
 */
const OWNED_FIXTURE = fileURLToPath(new URL('../fixtures/owned-process.js', import.meta.url));
const LEAK_FIXTURE = fileURLToPath(new URL('../fixtures/leaks-a-process.fixture.js', import.meta.url));
const FAILING_FIXTURE = fileURLToPath(new URL('../fixtures/fails-once.fixture.js', import.meta.url));
const SLOW_FIXTURE = fileURLToPath(new URL('../fixtures/slow.fixture.js', import.meta.url));
const RUNNER = fileURLToPath(new URL('../../../scripts/test.js', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

for (const signal of ['SIGALRM', 'SIGTERM', 'SIGINT'] as const) {
  t.test(`a test process stopped by ${signal} kills the process group it owns`, async (t) => {
    const holder = spawn(process.execPath, [OWNED_FIXTURE], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => void holder.kill('SIGKILL'));
    let output = '';
    holder.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const group = await waitFor(async () => Number(output.split('\n')[0]) || undefined, 60_000, 20);
    t.ok(group, 'the fixture started its process');
    if (!group) return;
    t.teardown(() => void killGroup(group, 'SIGKILL'));
    t.ok(groupIsAlive(group), 'its group is alive');
    const exited = new Promise((resolve) => holder.once('exit', (code, sig) => resolve(sig ?? code)));
    holder.kill(signal);
    t.equal(await exited, signal, `the test process ended by ${signal}`);
    const gone = await waitFor(async () => (groupIsAlive(group) ? undefined : true), 60_000, 20);
    t.ok(gone, 'and no process of its group is left');
  });
}

t.test('the runner names a process its run left running, kills it and fails', async (t) => {
  const { code, stdout } = await runRunner(t, [LEAK_FIXTURE], { SUITE_LEFTOVER_GRACE_MS: '500' });
  const leaked = Number(/ok 1 - sleep (\d+) started/.exec(stdout)?.[1]);
  t.ok(leaked, 'the fixture started a sleep');
  t.match(stdout, new RegExp(`not ok - left running after the suite: pid ${leaked}: sleep 600`), 'named');
  t.match(stdout, /\n1 passed, 1 failed\n$/, 'counted as a failure on the last line');
  t.equal(code, 1, 'the run fails');
  t.notOk(isAlive(leaked), 'and the process was killed');
});

t.test('the runner recaps each failing assertion by its path just above the last line', async (t) => {
  const { code, stdout } = await runRunner(t, [FAILING_FIXTURE]);
  const tail = stdout.trimEnd().split('\n').slice(-3);
  t.same(
    tail,
    [
      '# failed (1):',
      `#   ${FAILING_FIXTURE.slice(REPO_ROOT.length)} › outer › inner › one is two`,
      '2 passed, 1 failed',
    ],
    'the failure is named by file, subtests and assertion, and only once',
  );
  t.equal(code, 1, 'the run fails');
});

/** Alive and not a zombie (a killed process whose parent has not reaped it yet holds nothing). */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/** scripts/test.js on `files`, as a runner of its own (not a child of this tap: as from a shell). */
async function runRunner(
  t: Test,
  files: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string }> {
  const runner = spawn(process.execPath, [RUNNER, ...files], {
    cwd: REPO_ROOT,
    env: { ...outsideTap(process.env), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => void runner.kill('SIGKILL'));
  let stdout = '';
  runner.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => runner.once('exit', resolve));
  return { code, stdout };
}

function outsideTap(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => !name.startsWith('TAP') && name !== 'NODE_OPTIONS'),
  );
}

t.test("the runner prints each file's time beside its limit and flags one past half of it", async (t) => {
  const { stdout } = await runRunner(t, [SLOW_FIXTURE, FAILING_FIXTURE]);
  const relative = (file: string) => file.slice(REPO_ROOT.length);
  t.match(stdout, /# time per file, against its limit \(1 above half of it\):/, 'one file is flagged');
  t.match(
    stdout,
    new RegExp(`#\\s+\\d\\.\\d s of\\s+6 s\\s+\\d+% SLOW ${relative(SLOW_FIXTURE)}\\n`),
    'the slow one, against the limit it set',
  );
  t.match(
    stdout,
    new RegExp(`#\\s+\\d+\\.\\d s of\\s+300 s\\s+\\d+%\\s+${relative(FAILING_FIXTURE)}\\n`),
    "the other against tap's default, unflagged",
  );
  t.match(stdout, /\n3 passed, 1 failed\n$/, 'a slow file does not fail the run');
});

t.test("a process a test starts carries none of tap's process tracker", async (t) => {
  const printed = spawnSync(
    process.execPath,
    ['-e', 'console.log(JSON.stringify([process.env.NODE_OPTIONS ?? "", Object.keys(process.env)]))'],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '--max-old-space-size=512' } },
  );
  const [nodeOptions, names] = JSON.parse(printed.stdout) as [string, string[]];
  t.ok(process.env.NODE_OPTIONS?.includes('@tapjs/processinfo'), 'this test file runs with the tracker');
  t.equal(
    nodeOptions,
    '--max-old-space-size=512',
    "the child's own NODE_OPTIONS are kept, the tracker's dropped",
  );
  t.same(
    names.filter((name) => name.startsWith('_TAPJS_PROCESSINFO_')),
    [],
    "and none of the tracker's variables",
  );
});
