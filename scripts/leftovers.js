#!/usr/bin/env node
// The last step of .ci/run: names every process still alive that was started from this checkout (its
// working directory or its command line lies inside it), kills it, and exits 1 if there was any. The test
// runner already checks the processes it marked; this also catches what the install, build or lint steps,
// or a test that cleared its environment, left behind. This process and its ancestors (the CI shell) are
// not counted, nor anything that started before `--since-pid PID` (a developer's shell or editor in the
// checkout).
import { URL, fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandLine, pids, procStat, workingDirectory } from './proc.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
/** Give processes that are exiting at this moment (a drained child, a reaped worker) a few seconds. */
const GRACE_MS = 10_000;
// Required: without it, a developer's shells and editors in the checkout would be named and killed.
const sinceIndex = process.argv.indexOf('--since-pid');
if (sinceIndex < 0 || !/^\d+$/.test(process.argv[sinceIndex + 1] ?? '')) {
  console.error('usage: node scripts/leftovers.js --since-pid PID (count only processes started after PID)');
  process.exit(2);
}
const since = procStat(Number(process.argv[sinceIndex + 1])).startTicks;

function ancestors() {
  const chain = new Set();
  for (let pid = process.pid; pid > 1;) {
    chain.add(pid);
    try {
      pid = procStat(pid).ppid;
    } catch {
      break;
    }
  }
  return chain;
}

function insideCheckout(path) {
  return path === ROOT || path.startsWith(`${ROOT}/`);
}

function leftovers() {
  const excluded = ancestors();
  const found = [];
  for (const pid of pids()) {
    if (excluded.has(pid)) continue;
    try {
      const { state, startTicks } = procStat(pid);
      if (state === 'Z' || startTicks < since) continue; // a zombie holds nothing
      const cwd = workingDirectory(pid);
      const command = commandLine(pid);
      if (insideCheckout(cwd) || command.split(' ').some(insideCheckout)) found.push({ pid, cwd, command });
    } catch {
      // gone while we looked, or a kernel thread
    }
  }
  return found;
}

let found = leftovers();
for (const deadline = Date.now() + GRACE_MS; found.length > 0 && Date.now() < deadline; found = leftovers())
  await sleep(250);
for (const process_ of found) {
  console.log(`left running from ${ROOT}: pid ${process_.pid} (cwd ${process_.cwd}): ${process_.command}`);
  try {
    process.kill(process_.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
if (found.length > 0) process.exit(1);
console.log(`no process started from ${ROOT} is left running`);
