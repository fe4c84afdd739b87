#!/usr/bin/env node
// Runs the whole suite with tap on the compiled tests and ends with the plain line `N passed, N failed`,
// so that a run with no tests cannot pass unseen. Extra arguments select test files.
import { spawn } from 'node:child_process';

const files = process.argv.slice(2);
const args = ['--reporter=tap', ...(files.length ? files : ['dist/test/**/*.test.js'])];
const child = spawn('npx', ['--no-install', 'tap', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });

let summary = null;
let buffered = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  buffered += chunk.toString();
  const lines = buffered.split('\n');
  buffered = lines.pop();
  for (const line of lines) {
    const match = /^# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?/.exec(line);
    if (match) summary = { total: Number(match[1]), pass: Number(match[2]), fail: Number(match[3] ?? 0) };
  }
});

child.on('exit', (code) => {
  const passed = summary?.pass ?? 0;
  const failed = summary ? summary.total - summary.pass : 1;
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(code === 0 && summary && passed > 0 && failed === 0 ? 0 : 1);
});
