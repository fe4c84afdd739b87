import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { CLI_ENTRY, REPO_ROOT, freePort } from '../helpers/cli.js';
import { HANG_GUARD_MS } from '../helpers/harness.js';
import { killGroup, spawnOwned } from '../helpers/processes.js';

/**
 * docs/first-five-minutes.md, run as a reader runs it: its `sh` blocks in order with bash, from the
 * checkout, in a temporary HOME, with `svc` on the PATH meaning this checkout's bin/run.js. The `text`
 * block after a command is what the page says the reader sees, and must be seen: each of its lines matches
 * a line of the output, in order, where `…` stands for anything. So the page cannot go stale.
 *
 * The page's convention for commands that keep running: `<!-- first-five-minutes: terminal NAME -->`
 * before a `sh` block runs it in the background, as "a second terminal" (its `text` block is what the
 * reader waits for before going on); before a `text` block, it is what terminal NAME shows by then. Every
 * other block runs in one bash, as the reader's first terminal, so variables carry from block to block;
 * with `set -euo pipefail`, a failing command or a variable the page never set fails the test. The ports
 * the page names (8080, 3000, 5173) become free ones, and every process is owned (processes.ts).
 */
const GUIDE = readFileSync(new URL('../../../docs/first-five-minutes.md', import.meta.url), 'utf8');
const MARKER = /^<!-- first-five-minutes: terminal ([\w-]+) -->$/;

type Step =
  | { kind: 'run'; code: string; expect?: string }
  | { kind: 'terminal'; name: string; code: string; expect?: string }
  | { kind: 'shows'; name: string; expect: string };

/** The page's blocks, in order, with the conventions above. */
function steps(markdown: string): Step[] {
  const found: Step[] = [];
  const lines = markdown.split('\n');
  let terminal: string | null = null;
  let last: Extract<Step, { kind: 'run' | 'terminal' }> | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = MARKER.exec(line);
    if (marker) {
      terminal = marker[1]!;
      continue;
    }
    const fence = /^```(\w*)$/.exec(line);
    if (!fence) {
      // Prose between a command and its output ends the pairing.
      if (line.trim() !== '') last = null;
      continue;
    }
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i]!);
    const text = body.join('\n');
    if (fence[1] === 'sh') {
      last = terminal ? { kind: 'terminal', name: terminal, code: text } : { kind: 'run', code: text };
      found.push(last);
    } else if (fence[1] === 'text') {
      if (terminal && !last) found.push({ kind: 'shows', name: terminal, expect: text });
      else if (last && last.expect === undefined) last.expect = text;
      else throw new Error(`a text block with no command before it: ${text}`);
      last = null;
    } else {
      last = null;
    }
    terminal = null;
  }
  return found;
}

/** Where the expected lines are not all found, in order, in `output`: a description; else null. */
function missing(expected: string, output: string): string | null {
  const outputLines = output.split('\n').map((line) => line.trim());
  let at = 0;
  for (const wanted of expected.split('\n').map((line) => line.trim())) {
    if (wanted === '' || wanted === '…') continue;
    const pattern = new RegExp(
      '^' +
        wanted
          .split('…')
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('.*') +
        '$',
    );
    const found = outputLines.findIndex((line, index) => index >= at && pattern.test(line));
    if (found === -1) return `no line like ${JSON.stringify(wanted)}`;
    at = found + 1;
  }
  return null;
}

interface Shell {
  process: ChildProcess;
  output(): string;
}

function start(t: Test, args: string[], env: NodeJS.ProcessEnv, stdin: 'pipe' | 'ignore'): Shell {
  const child = spawnOwned('bash', args, { cwd: REPO_ROOT, env, stdio: [stdin, 'pipe', 'pipe'] }, t);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { process: child, output: () => output };
}

async function waitUntil(shell: Shell, done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + HANG_GUARD_MS;
  while (!done()) {
    if (shell.process.exitCode !== null || shell.process.signalCode !== null)
      throw new Error(`the shell exited while waiting for ${what}:\n${shell.output().slice(-4000)}`);
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}:\n${shell.output().slice(-4000)}`);
    await sleep(100);
  }
}

t.test('docs/first-five-minutes.md runs as written', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'svc-first-five-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const bin = join(home, '.bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'svc'), `#!/bin/sh\nexec "${process.execPath}" "${CLI_ENTRY}" "$@"\n`);
  chmodSync(join(bin, 'svc'), 0o755);

  const ports: Record<string, number> = {
    '8080': await freePort(),
    '3000': await freePort(),
    '5173': await freePort(),
  };
  const localise = (text: string) => text.replace(/\b(8080|3000|5173)\b/g, (port) => String(ports[port]));
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('SVC_')) env[name] = value;
  Object.assign(env, {
    HOME: home,
    PATH: `${bin}:${process.env.PATH}`,
    // Not on the page: the metrics port of a reader's `svc serve`, made free here.
    SVC_METRICS_PORT: String(await freePort()),
  });

  const plan = steps(GUIDE);
  t.ok(plan.filter((step) => step.kind === 'run').length >= 8, 'the page has its commands');
  t.ok(
    plan.some((step) => step.kind === 'terminal'),
    'and commands for a second terminal',
  );

  /** One reader's walk through the page, from its first block to its last. */
  const walk = async (t: Test, round: string) => {
    const first = start(t, ['--noprofile', '--norc'], env, 'pipe');
    first.process.stdin!.write('set -euo pipefail\n');
    const terminals = new Map<string, Shell>();
    for (const [index, step] of plan.entries()) {
      if (step.kind === 'terminal') {
        const shell = start(
          t,
          ['--noprofile', '--norc', '-c', `set -euo pipefail\n${localise(step.code)}`],
          env,
          'ignore',
        );
        terminals.set(step.name, shell);
        if (step.expect !== undefined) {
          const expect = localise(step.expect);
          await waitUntil(
            shell,
            () => missing(expect, shell.output()) === null,
            `terminal ${step.name}: ${expect}`,
          );
          t.pass(`${round}: terminal ${step.name} shows what the page says`);
        }
        continue;
      }
      if (step.kind === 'shows') {
        const shell = terminals.get(step.name);
        if (!shell) throw new Error(`the page shows terminal ${step.name} before starting it`);
        const expect = localise(step.expect);
        await waitUntil(
          shell,
          () => missing(expect, shell.output()) === null,
          `terminal ${step.name}: ${expect}`,
        );
        t.pass(`${round}: terminal ${step.name} then shows what the page says`);
        continue;
      }
      const file = join(home, `.step-${index}.sh`);
      writeFileSync(file, localise(step.code) + '\n');
      const done = `__step_${index}_done__`;
      const before = first.output().length;
      first.process.stdin!.write(`source ${JSON.stringify(file)} < /dev/null\necho ${done}\n`);
      await waitUntil(first, () => first.output().includes(done, before), `step ${index}:\n${step.code}`);
      const output = first.output().slice(before, first.output().indexOf(done, before));
      if (step.expect !== undefined) {
        const problem = missing(localise(step.expect), output);
        t.equal(
          problem,
          null,
          `${round}: step ${index} shows what the page says${problem ? `; it printed:\n${output}` : ''}`,
        );
      }
    }
    return { first, terminals };
  };

  /** The page's "Stopping": Ctrl-C in the other terminals, `kill %1 %2` and the end of the first. */
  const stop = async (shells: Awaited<ReturnType<typeof walk>>) => {
    const exited = (shell: Shell) =>
      shell.process.exitCode !== null || shell.process.signalCode !== null
        ? Promise.resolve()
        : new Promise<void>((resolve) => shell.process.once('exit', () => resolve()));
    for (const shell of shells.terminals.values()) killGroup(shell.process.pid!, 'SIGINT');
    shells.first.process.stdin!.write('kill %1 %2\nwait\nexit\n');
    await Promise.all([shells.first, ...shells.terminals.values()].map(exited));
  };

  const once = await walk(t, 'first run');
  await t.test('the page never prints a key', async (t) => {
    const everything = [once.first, ...once.terminals.values()].map((shell) => shell.output()).join('\n');
    t.notMatch(everything, /svc_[sp]k_test_[A-Za-z0-9]{8}/, 'keys appear cut to their prefix only');
  });

  await t.test('the widget page the page wrote loads embed.js from the appliance', async (t) => {
    const page = await (await fetch(`http://127.0.0.1:${ports['5173']}/`)).text();
    t.match(page, /<meta name="viewport" content="width=device-width, initial-scale=1" \/>/);
    t.match(page, new RegExp(`<script src="http://127\\.0\\.0\\.1:${ports['8080']}/widget/embed\\.js">`));
    const embed = await fetch(`http://127.0.0.1:${ports['8080']}/widget/embed.js`);
    t.equal(embed.status, 200);
    t.match(await embed.text(), /SvcWidget/);
  });
  // A reader who comes back runs the page again on the same data directory: it must work as the first time.
  await stop(once);
  const twice = await walk(t, 'second run');
  t.match(twice.first.output(), /secret key svc_sk_test_…, publishable key svc_pk_test_…/, 'new keys');
  await stop(twice);
});
