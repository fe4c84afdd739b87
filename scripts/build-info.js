#!/usr/bin/env node
// Writes dist/build-info.json at build time: the package's version and the commit it was built from, so that
// `svc --version`, `svc status` and every `svc serve` can say which build runs. Outside a git checkout (a
// tarball) the commit is null; with uncommitted changes it is marked dirty. An argument names another output
// directory: `svc upgrade` stages the next build in <checkout>/.svc-upgrade/next/dist (src/upgrade/stage.ts).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const root = new URL('..', import.meta.url);
const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
const git = (...args) => {
  try {
    return execFileSync('git', args, {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return null;
  }
};
const commit = git('rev-parse', '--short=12', 'HEAD');
// Only what the build is made of: docs and tests changing after the commit do not make a build dirty.
const changes = commit
  ? git('status', '--porcelain', '--', 'bin', 'commands', 'migrations', 'src', 'package.json')
  : null;
const out = resolve(process.argv[2] ?? fileURLToPath(new URL('dist/', root)));
mkdirSync(out, { recursive: true });
writeFileSync(
  join(out, 'build-info.json'),
  JSON.stringify({ version, commit, dirty: Boolean(changes), builtAt: new Date().toISOString() }, null, 2) +
    '\n',
);
