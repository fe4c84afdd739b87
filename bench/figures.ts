/*
 * The README's operator figures, measured on the build they describe (issue 32, item 6): `./install.sh` on
 * a fresh clone of this checkout's HEAD (dependencies, build, `svc install`), each step's time as install.sh
 * prints it and the whole. The README's "Figures" section names the version and commit they were taken on,
 * and test/e2e/version.test.ts fails when that is not package.json's version: a release re-measures.
 *
 *   npm run bench:figures                      # prints a markdown table for the README
 *   FIGURES_NPM_CACHE=warm npm run bench:figures   # reuse this user's npm cache (a re-install, not a fresh box)
 *
 * The clone gets its own HOME (npm's cache is then cold, as on a fresh machine, unless FIGURES_NPM_CACHE=warm),
 * its own SVC_HOME and SVC_BIN_DIR, and is removed afterwards. It needs the npm registry.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
  return spawnSync('git', ['-C', REPO_ROOT, ...args], { encoding: 'utf8' }).stdout.trim();
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
    const when = new Date().toISOString().slice(0, 10);
    const cache = process.env.FIGURES_NPM_CACHE === 'warm' ? 'warm npm cache' : 'cold npm cache';
    console.log(`\nsvc ${version} (commit ${commit}), ${when}, ${cache}, load ${loadAverage()}\n`);
    console.log('| install.sh step | time |');
    console.log('| --- | --- |');
    for (const step of steps) console.log(`| ${step.name} | ${step.seconds} s |`);
    console.log(`| whole install.sh | ${Math.round(install.seconds)} s |`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

await main();
