/*
 * The README's operator figures, measured on the build they describe (issue 32, item 6): `./install.sh` on
 * a fresh clone of this checkout's HEAD (dependencies, build, `svc install`), each step's time as install.sh
 * prints it and the whole; then, with that install serving, `svc upgrade` to the next patch release (the
 * same sources with package.json's version bumped and a CHANGELOG section, committed as a `git pull` would
 * bring them), each step's time as `svc upgrade --json` reports it and the API's downtime. The README's "Figures" section names the version and commit they were taken on,
 * and test/e2e/version.test.ts fails when that is not package.json's version: a release re-measures.
 *
 *   npm run bench:figures                      # prints a markdown table for the README
 *   FIGURES_NPM_CACHE=warm npm run bench:figures   # reuse this user's npm cache (a re-install, not a fresh box)
 *
 * The clone gets its own HOME (npm's cache is then cold, as on a fresh machine, unless FIGURES_NPM_CACHE=warm),
 * its own SVC_HOME and SVC_BIN_DIR, and is removed afterwards. It needs the npm registry.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Step {
  name: string;
  seconds: number;
}

/** The steps install.sh reports (`==> name` followed by `    took N s` or `took M min S s`). */
function installSteps(output: string): Step[] {
  const steps: Step[] = [];
  let name: string | undefined;
  for (const line of output.split('\n')) {
    const heading = /^==> (.+)$/.exec(line);
    if (heading) {
      name = heading[1];
      continue;
    }
    const took = /^ {4}took (?:(\d+) min )?(\d+) s$/.exec(line);
    if (took && name !== undefined)
      steps.push({ name, seconds: Number(took[1] ?? 0) * 60 + Number(took[2]) });
  }
  return steps;
}

function git(...args: string[]): string {
  return gitIn(REPO_ROOT, ...args);
}

function gitIn(dir: string, ...args: string[]): string {
  return spawnSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).stdout.trim();
}

/** What a `git pull` of the next patch release brings: the version bumped and its CHANGELOG section. */
function pullNextPatch(clone: string): string {
  const file = join(clone, 'package.json');
  const pkg = JSON.parse(readFileSync(file, 'utf8')) as { version: string };
  const [major, minor, patch] = pkg.version.split('.').map(Number);
  pkg.version = `${major}.${minor}.${patch! + 1}`;
  writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n');
  const changelog = readFileSync(join(clone, 'CHANGELOG.md'), 'utf8');
  const first = changelog.indexOf('\n## ') + 1;
  const section = `## [${pkg.version}] — ${new Date().toISOString().slice(0, 10)}\n\n### Changed\n\n- Nothing: the figures' upgrade.\n\n### Upgrade notes\n\n- None.\n\n`;
  writeFileSync(join(clone, 'CHANGELOG.md'), changelog.slice(0, first) + section + changelog.slice(first));
  gitIn(
    clone,
    '-c',
    'user.name=figures',
    '-c',
    'user.email=figures@localhost',
    'commit',
    '-qam',
    pkg.version,
  );
  return pkg.version;
}

/** The supervisor pids of `svc serve` under `home`, from the state files it writes in `<home>/run`. */
function servePids(home: string): number[] {
  const dir = join(home, 'run');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => /^serve-\d+\.json$/.test(name))
    .map((name) => Number((JSON.parse(readFileSync(join(dir, name), 'utf8')) as { pid?: number }).pid))
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

async function healthy(port: number, seconds: number): Promise<boolean> {
  for (const until = Date.now() + seconds * 1000; Date.now() < until;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return true;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}

/** The longest stretch in which /health did not answer 200, sampled every 100 ms while `work` runs. */
async function downtimeDuring<T>(
  port: number,
  work: Promise<T>,
): Promise<{ result: T; downSeconds: number }> {
  let done = false;
  let longest = 0;
  let downSince: number | undefined;
  const probe = (async () => {
    while (!done) {
      const up = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      const now = performance.now();
      if (up && downSince !== undefined) {
        longest = Math.max(longest, now - downSince);
        downSince = undefined;
      } else if (!up && downSince === undefined) downSince = now;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  const result = await work;
  done = true;
  await probe;
  if (downSince !== undefined) longest = Math.max(longest, performance.now() - downSince);
  return { result, downSeconds: longest / 1000 };
}

async function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
  const started = performance.now();
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    process.stderr.write(chunk);
  });
  child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${code}`);
  return { output, seconds: (performance.now() - started) / 1000 };
}

async function main() {
  const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string })
    .version;
  const commit = git('rev-parse', '--short=12', 'HEAD');
  if (git('status', '--porcelain', '--untracked-files=no') !== '')
    process.stderr.write(
      'Note: the checkout has uncommitted changes; the clone measures HEAD without them.\n',
    );
  const root = mkdtempSync(join(tmpdir(), 'svc-figures-'));
  try {
    const clone = join(root, 'svc');
    spawnSync('git', ['clone', '--quiet', '--no-hardlinks', REPO_ROOT, clone], { stdio: 'inherit' });
    const home = join(root, 'home');
    mkdirSync(home);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: home,
      SVC_HOME: join(home, '.svc'),
      SVC_BIN_DIR: join(root, 'bin'),
      ...(process.env.FIGURES_NPM_CACHE === 'warm' ? { npm_config_cache: join(homedir(), '.npm') } : {}),
    };
    const install = await run(join(clone, 'install.sh'), [], clone, env);
    const steps = installSteps(install.output);

    // The installed clone serves on a port of its own, then takes the next patch release with svc upgrade.
    const port = 18000 + Math.floor(Math.random() * 2000);
    const serveEnv = { ...env, SVC_API_PORT: String(port), SVC_METRICS_PORT: '0' };
    const serve = spawn(join(clone, 'bin', 'run.js'), ['serve'], {
      cwd: clone,
      env: serveEnv,
      stdio: 'ignore',
      detached: true,
    });
    serve.unref();
    if (!(await healthy(port, 120))) throw new Error(`svc serve did not answer on port ${port}`);
    const next = pullNextPatch(clone);
    const upgrading = run(join(clone, 'bin', 'run.js'), ['upgrade', '--json'], clone, serveEnv);
    const { result: upgrade, downSeconds } = await downtimeDuring(port, upgrading);
    const report = JSON.parse(upgrade.output) as {
      outcome: string;
      seconds: number;
      steps: { name: string; seconds: number }[];
    };
    if (report.outcome !== 'upgraded') throw new Error(`svc upgrade: ${report.outcome}`);

    const when = new Date().toISOString().slice(0, 10);
    const cache = process.env.FIGURES_NPM_CACHE === 'warm' ? 'warm npm cache' : 'cold npm cache';
    console.log(`\nsvc ${version} (commit ${commit}), ${when}, ${cache}, load ${loadAverage()}\n`);
    console.log('| install.sh step | time |');
    console.log('| --- | --- |');
    for (const step of steps) console.log(`| ${step.name} | ${step.seconds} s |`);
    console.log(`| whole install.sh | ${Math.round(install.seconds)} s |`);
    console.log(`\n| svc upgrade ${version} → ${next} step | time |`);
    console.log('| --- | --- |');
    for (const step of report.steps) console.log(`| ${step.name} | ${step.seconds.toFixed(1)} s |`);
    console.log(`| whole svc upgrade | ${Math.round(report.seconds)} s |`);
    console.log(`| API down (/health not 200, sampled every 100 ms) | ${downSeconds.toFixed(1)} s |`);
  } finally {
    // Whatever happened, the clone's server (the upgraded one, or the first) stops before its files go.
    for (const pid of servePids(join(root, 'home', '.svc'))) process.kill(pid, 'SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 3000));
    rmSync(root, { recursive: true, force: true });
  }
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

await main();
