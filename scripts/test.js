#!/usr/bin/env node
// Runs the whole suite with tap on the compiled tests and ends with the plain line `N passed, N failed`,
// so that a run with no tests cannot pass unseen. Extra arguments select test files; flags go to tap.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

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
const child = spawn('npx', ['--no-install', 'tap', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });

let summary = null;
let buffered = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  buffered += chunk.toString();
  const lines = buffered.split('\n');
  buffered = lines.pop();
  for (const line of lines) {
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

child.on('exit', (code) => {
  const passed = summary?.pass ?? 0;
  // A test skipped with a reason (e.g. Postgres-only tests without SVC_TEST_DATABASE_URL) is not a failure.
  const skipped = summary?.skip ?? 0;
  const failed = summary ? summary.total - summary.pass - skipped : 1;
  if (skipped > 0) console.log(`${skipped} skipped`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(code === 0 && summary && passed > 0 && failed === 0 ? 0 : 1);
});
