#!/usr/bin/env node
// Runs the whole suite with tap on the compiled tests and ends with the plain line `N passed, N failed`,
// so that a run with no tests cannot pass unseen. Extra arguments select test files; flags go to tap.
// Every process the run starts carries a mark in its environment; one still alive after tap has ended
// fails the run, by name, and is killed.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandLine, environment, pids, procStat } from './proc.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
/** Not `SVC_*`: the tests pass the CLI their environment without those, so the mark goes everywhere. */
const RUN_MARK_NAME = 'SUITE_RUN_MARK';
const RUN_MARK_VALUE = randomBytes(8).toString('hex');
/**
 * A killed `svc serve`'s children drain and exit by themselves: give them this long before naming them
 * (SUITE_LEFTOVER_GRACE_MS, for the harness's own test).
 */
const LEFTOVER_GRACE_MS = Number(process.env.SUITE_LEFTOVER_GRACE_MS || 15_000);

const extra = process.argv.slice(2);
const files = extra.filter((arg) => !arg.startsWith('-'));
const flags = extra.filter((arg) => arg.startsWith('-'));
// A file per core at once: tap's default leaves a core free, which on a 2-core machine ran the suite one
// file at a time (15 min in CI). One more than the cores overloaded the machine enough to push a
// crash-loop test past its 10 s bound.
if (!flags.some((flag) => flag.startsWith('--jobs') || flag.startsWith('-j'))) {
  flags.push(`--jobs=${availableParallelism()}`);
}
const args = ['--reporter=tap', ...flags, ...(files.length ? files : ['dist/test/**/*.test.js'])];
/** tap's limit for a file that sets none: `--timeout=<s>`, else package.json's `tap.timeout`, else tap's 30 s. */
const DEFAULT_LIMIT_MS =
  1000 *
  Number(
    flags.find((flag) => flag.startsWith('--timeout='))?.slice('--timeout='.length) ??
      packageJson.tap?.timeout ??
      30,
  );
// `npm ci` installs tap built with its default plugins. tap rebuilds for package.json's plugins on its
// first run, but starts that run's test files with the default plugins' loaders, TypeScript's and mock's
// among them (0.45 s and 0.3 s more per file, and CI has only a first run): build it first, once per
// install and plugin list (a mark inside node_modules, which `npm ci` removes).
const plugins = JSON.stringify(packageJson.tap?.plugin ?? []);
const builtMark = join(ROOT, 'node_modules', '.cache', 'svc-tap-plugins.json');
if (!existsSync(builtMark) || readFileSync(builtMark, 'utf8') !== plugins) {
  const built = spawnSync('npx', ['--no-install', 'tap', 'build'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (built.status === 0) {
    mkdirSync(dirname(builtMark), { recursive: true });
    writeFileSync(builtMark, plugins);
  }
}
const child = spawn('npx', ['--no-install', 'tap', ...args], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, [RUN_MARK_NAME]: RUN_MARK_VALUE },
  // tap and its test files in a group of their own, so that an interruption reaches every test file at
  // once: tap alone let a file run on to its timeout.
  detached: true,
});
// Interrupted (Ctrl-C, a CI job's timeout): each test file's exit handler kills what it started
// (test/helpers/processes.ts); the sweep below kills anything that slipped through.
let interrupted = null;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    interrupted = signal;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  });
}

let summary = null;
let buffered = '';
/** The names of the subtests open at each depth of the TAP stream, for naming a failure by its path. */
const openSubtests = [];
/** Every failing assertion as `file › subtest › assertion`, recapped above the last line. */
const failures = [];
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  buffered += chunk.toString();
  const lines = buffered.split('\n');
  buffered = lines.pop();
  for (const line of lines) {
    noteFailure(line);
    noteFileTime(line);
    // e.g. `# { total: 31, pass: 28, fail: 1, skip: 2 }`
    const match = /^# \{ (total: \d+(?:, \w+: \d+)*) \}/.exec(line);
    if (match)
      summary = Object.fromEntries(
        match[1]
          .split(', ')
          .map((pair) => pair.split(': '))
          .map(([k, v]) => [k, Number(v)]),
      );
  }
});

child.on('exit', async (code) => {
  const leftovers = await leftoverProcesses();
  for (const leftover of leftovers) {
    console.log(`not ok - left running after the suite: pid ${leftover.pid}: ${leftover.command}`);
    kill(leftover.pid);
  }
  const passed = summary?.pass ?? 0;
  // A test skipped with a reason (e.g. Postgres-only tests without SVC_TEST_DATABASE_URL) is not a failure.
  const skipped = summary?.skip ?? 0;
  const failed = (summary ? summary.total - summary.pass - skipped : 1) + leftovers.length;
  printFileTimes();
  const recap = leafFailures();
  if (recap.length > 0) {
    // A CI log keeps only its tail: what failed must be there, not thousands of lines above.
    console.log(`# failed (${recap.length}):`);
    for (const failure of recap.slice(0, MAX_RECAPPED)) console.log(`#   ${failure}`);
    if (recap.length > MAX_RECAPPED) console.log(`#   and ${recap.length - MAX_RECAPPED} more`);
  }
  if (interrupted) console.log(`interrupted by ${interrupted}`);
  if (skipped > 0) console.log(`${skipped} skipped`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(code === 0 && summary && passed > 0 && failed === 0 && !interrupted ? 0 : 1);
});

const MAX_RECAPPED = 40;
const TAP_INDENT = 4;

/** Follows the TAP stream's nesting: `# Subtest: x` opens x one level deeper; `not ok` records a failure. */
function noteFailure(line) {
  const depth = Math.floor((line.length - line.trimStart().length) / TAP_INDENT);
  const subtest = /^\s*# Subtest: (.*)$/.exec(line);
  if (subtest) {
    openSubtests.length = depth;
    openSubtests[depth] = subtest[1];
    return;
  }
  const failed = /^\s*not ok \d* ?-? ?(.*?)(?: # time=.*)?$/.exec(line);
  if (failed) failures.push([...openSubtests.slice(0, depth), failed[1]].join(' › '));
}

/** Each test file's time and its limit (the `# time limit: N ms` comment of test/helpers/harness.ts setTimeLimit). */
const fileTimes = new Map();

function noteFileTime(line) {
  const limit = /^ {4}# time limit: (\d+) ms$/.exec(line);
  if (limit && openSubtests[0]) {
    fileTimes.set(openSubtests[0], { ...fileTimes.get(openSubtests[0]), limitMs: Number(limit[1]) });
    return;
  }
  const done = /^(?:not )?ok \d+ - (\S+).* # time=([\d.]+)ms/.exec(line);
  if (done) fileTimes.set(done[1], { ...fileTimes.get(done[1]), ms: Number(done[2]) });
}

/**
 * Every file's time beside its limit, the largest share first; a file past half of its limit is flagged
 * (not failed), so that a file slowing towards its timeout is seen while it still passes on a slow day.
 */
function printFileTimes() {
  const rows = [...fileTimes]
    .filter(([, times]) => times.ms !== undefined)
    .map(([file, { ms, limitMs = DEFAULT_LIMIT_MS }]) => ({ file, ms, limitMs, share: ms / limitMs }))
    .sort((a, b) => b.share - a.share);
  if (rows.length === 0) return;
  const over = rows.filter((row) => row.share > 0.5);
  console.log(`# time per file, against its limit (${over.length} above half of it):`);
  for (const { file, ms, limitMs, share } of rows) {
    const figures = `${(ms / 1000).toFixed(1).padStart(6)} s of ${String(limitMs / 1000).padStart(4)} s`;
    console.log(
      `#   ${figures} ${String(Math.round(share * 100)).padStart(3)}%${share > 0.5 ? ' SLOW' : '     '} ${file}`,
    );
  }
}

/** Failures that are not merely the parent of another failure (a failing file fails its failing subtest). */
function leafFailures() {
  return failures.filter((failure) => !failures.some((other) => other.startsWith(`${failure} › `)));
}

/** Processes other than this one whose environment carries this run's mark, after a grace period. */
async function leftoverProcesses() {
  const deadline = Date.now() + LEFTOVER_GRACE_MS;
  for (;;) {
    const marked = markedProcesses();
    if (marked.length === 0 || Date.now() >= deadline) return marked;
    await sleep(250);
  }
}

function markedProcesses() {
  const mark = `${RUN_MARK_NAME}=${RUN_MARK_VALUE}`;
  const found = [];
  for (const pid of pids()) {
    if (pid === process.pid) continue;
    try {
      // A zombie has exited and holds nothing; it only waits for its parent.
      if (!environment(pid).includes(mark) || procStat(pid).state === 'Z') continue;
      found.push({ pid, command: commandLine(pid) });
    } catch {
      // gone while we looked, or not ours to read
    }
  }
  return found;
}

function kill(pid) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
