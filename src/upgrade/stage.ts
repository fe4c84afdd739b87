import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/* Building the new sources beside the running build (docs/upgrade.md, step 1), and the swap of step 4. */

/** Where svc upgrade keeps its builds inside the checkout: `next` (staged) and `previous` (kept for rollback). */
export function upgradeDirectory(checkout: string): string {
  return join(checkout, '.svc-upgrade');
}

/** What install.sh's build is made from (its `source_hash`): the same digest, so the two agree on "up to date". */
const SOURCE_PARTS = [
  'bin',
  'commands',
  'migrations',
  'src',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
];

function filesUnder(root: string, part: string): string[] {
  const path = join(root, part);
  if (!existsSync(path)) return [];
  if (!lstatSync(path).isDirectory()) return lstatSync(path).isFile() ? [part] : [];
  return readdirSync(path, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** `find … -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum` of install.sh. */
export function sourceHash(checkout: string): string {
  const files = SOURCE_PARTS.flatMap((part) => filesUnder(checkout, part)).sort((a, b) =>
    Buffer.compare(Buffer.from(a), Buffer.from(b)),
  );
  const listing = files
    .map(
      (file) =>
        `${createHash('sha256')
          .update(readFileSync(join(checkout, file)))
          .digest('hex')}  ${file}\n`,
    )
    .join('');
  return createHash('sha256').update(listing).digest('hex');
}

export interface SourcesInfo {
  version: string;
  engines: string | undefined;
  commit: string | null;
  dirty: boolean;
}

/** The pulled sources: package.json's version and Node requirement, the commit checked out. */
export async function readSources(checkout: string): Promise<SourcesInfo> {
  const pkg = JSON.parse(readFileSync(join(checkout, 'package.json'), 'utf8')) as {
    version: string;
    engines?: { node?: string };
  };
  const git = async (...args: string[]) =>
    run('git', args, { cwd: checkout }).then(
      ({ stdout }) => stdout.trim(),
      () => null,
    );
  const commit = existsSync(join(checkout, '.git')) ? await git('rev-parse', '--short=12', 'HEAD') : null;
  const changes = commit
    ? await git('status', '--porcelain', '--', 'bin', 'commands', 'migrations', 'src', 'package.json')
    : null;
  return { version: pkg.version, engines: pkg.engines?.node, commit, dirty: Boolean(changes) };
}

export interface StagedBuild {
  /** `<checkout>/.svc-upgrade/next`: package.json, dist/, oclif.manifest.json, node_modules. */
  root: string;
  build: { version: string; commit: string | null; dirty: boolean };
  /** Reused from an earlier run of svc upgrade on the same sources. */
  reused: boolean;
  /** The dependencies were installed into the staging directory (package-lock.json changed). */
  stagedDependencies: boolean;
}

/** Whether the checkout's node_modules was installed from this package-lock.json, with the build tools. */
export function dependencyState(checkout: string): {
  lockChanged: boolean;
  buildTools: boolean;
  production: boolean;
} {
  const lockHash = createHash('sha256')
    .update(readFileSync(join(checkout, 'package-lock.json')))
    .digest('hex');
  let recorded: string | null = null;
  try {
    recorded = readFileSync(join(checkout, 'node_modules', '.install-lock-hash'), 'utf8').trim();
  } catch {
    // installed by hand (npm ci): what it was installed from is not recorded
  }
  const buildTools =
    existsSync(join(checkout, 'node_modules', 'typescript')) &&
    existsSync(join(checkout, 'node_modules', 'oclif'));
  return {
    // Unrecorded: npm ci was run by hand in this checkout, from this lockfile as far as anyone knows.
    lockChanged: recorded !== null && recorded.split(' ')[0] !== lockHash,
    buildTools,
    production: recorded?.endsWith(' production') ?? false,
  };
}

/**
 * Builds the sources into `.svc-upgrade/next` without touching the running build's dist/ (or reuses the build
 * there when it was made from the same sources): tsc with that outDir, build-info.json, the oclif manifest.
 * When package-lock.json changed (or the build tools were pruned by `install.sh --production`), the
 * dependencies are installed there first with `npm ci`, so the running server keeps its own.
 */
export async function stageBuild(checkout: string, say: (line: string) => void): Promise<StagedBuild> {
  const root = join(upgradeDirectory(checkout), 'next');
  const hash = sourceHash(checkout);
  const deps = dependencyState(checkout);
  const stageDependencies = deps.lockChanged || !deps.buildTools;
  const readBuild = () =>
    JSON.parse(readFileSync(join(root, 'dist', 'build-info.json'), 'utf8')) as StagedBuild['build'];
  const hashFile = join(root, 'dist', '.install-source-hash');
  if (
    existsSync(hashFile) &&
    readFileSync(hashFile, 'utf8').trim() === hash &&
    existsSync(join(root, 'oclif.manifest.json')) &&
    existsSync(join(root, 'dist', 'build-info.json'))
  ) {
    return {
      root,
      build: readBuild(),
      reused: true,
      stagedDependencies: !isLink(join(root, 'node_modules')),
    };
  }
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true, mode: 0o700 });
  copyFileSync(join(checkout, 'package.json'), join(root, 'package.json'));
  copyFileSync(join(checkout, 'package-lock.json'), join(root, 'package-lock.json'));
  // The compiled code reads its static files (widget, console, specs) from <root>/src.
  symlinkSync(join(checkout, 'src'), join(root, 'src'));
  const env = { ...process.env, OCLIF_SKIP_NEW_VERSION_CHECK: 'true' };
  if (stageDependencies) {
    say(
      deps.lockChanged
        ? 'package-lock.json changed: installing the dependencies into the staging directory (npm ci)'
        : 'the build tools are not installed (install.sh --production): installing the dependencies into the staging directory (npm ci)',
    );
    // The new sources' scripts/npm-ci.sh: it knows how sqlite3 gets built on this machine (install.sh's way).
    const npmCi = join(checkout, 'scripts', 'npm-ci.sh');
    await (existsSync(npmCi)
      ? run('bash', [npmCi], { cwd: root, env: { ...env, SVC_NPM_CI_ROOT: root }, maxBuffer: 64 * 1024 ** 2 })
      : run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: root, env, maxBuffer: 64 * 1024 ** 2 }));
  } else {
    symlinkSync(realpathSync(join(checkout, 'node_modules')), join(root, 'node_modules'));
  }
  const bin = (name: string) => join(root, 'node_modules', '.bin', name);
  await run(bin('tsc'), ['-p', join(checkout, 'tsconfig.json'), '--outDir', join(root, 'dist')], {
    cwd: checkout,
    env,
    maxBuffer: 64 * 1024 ** 2,
  }).catch((error: Error & { stdout?: string }) => {
    const first = (error.stdout ?? '').split('\n').filter(Boolean).slice(0, 5).join('\n');
    throw new Error(`the new sources do not build (tsc):\n${first || error.message}`);
  });
  await run(process.execPath, [join(checkout, 'scripts', 'build-info.js'), join(root, 'dist')], {
    cwd: checkout,
  });
  await run(bin('oclif'), ['manifest', root], { cwd: root, env });
  if (stageDependencies && deps.production) {
    await run('npm', ['prune', '--omit=dev', '--no-audit', '--no-fund'], { cwd: root, env });
  }
  if (stageDependencies) {
    const lockHash = createHash('sha256')
      .update(readFileSync(join(root, 'package-lock.json')))
      .digest('hex');
    writeFileSync(
      join(root, 'node_modules', '.install-lock-hash'),
      `${lockHash} ${deps.production ? 'production' : 'development'}\n`,
    );
  }
  writeFileSync(hashFile, `${hash}\n`);
  return { root, build: readBuild(), reused: false, stagedDependencies: stageDependencies };
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Bytes under a directory (the current dist/, to size the staged one). */
export function directoryBytes(path: string): number {
  if (!existsSync(path)) return 0;
  return readdirSync(path, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .reduce((sum, entry) => sum + lstatSync(join(entry.parentPath, entry.name)).size, 0);
}
