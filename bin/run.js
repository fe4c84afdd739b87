#!/usr/bin/env node
import { URL, fileURLToPath } from 'node:url';
import { execute } from '@oclif/core';

// Everything svc creates (the database and its WAL and SHM files, logs, run files, exports) is for the
// service's user alone, whatever umask the shell or unit gave: 0600 files, 0700 directories. The processes
// `svc serve` starts inherit it.
process.umask(0o077);

// `svc --version` names the build (version and commit), which oclif's own line (the package's name and
// version) cannot tell apart; `--json` gives the same as an object.
const args = process.argv.slice(2);
if (
  ['--version', '-v', 'version'].includes(args[0] ?? '') &&
  args.slice(1).every((arg) => arg === '--json')
) {
  const { thisBuild, describeBuild } = await import('../dist/src/processes/build-info.js');
  const build = thisBuild();
  const platform = `node ${process.version}, ${process.platform}-${process.arch}`;
  if (args.includes('--json')) console.log(JSON.stringify({ ...build, node: process.version }, null, 2));
  else console.log(`${describeBuild(build)}; ${platform}`);
} else {
  await execute({ loadOptions: await loadOptions() });
}

/**
 * oclif reads package.json for the CLI's version and compares it with oclif.manifest.json's, warning
 * "Mismatched version … should be deleted" when they differ. After `git pull` of a new release and before
 * `svc upgrade` swaps the build, package.json is the new sources' while dist/ and its manifest are still the
 * installed build's, and every command printed that warning, which reads like an instruction. The version
 * that runs is the build's (dist/build-info.json), so oclif is given that one: the manifest agrees with it.
 */
async function loadOptions() {
  const { readFile } = await import('node:fs/promises');
  const root = new URL('..', import.meta.url);
  const pjson = JSON.parse(await readFile(new URL('package.json', root), 'utf8'));
  try {
    const build = JSON.parse(await readFile(new URL('dist/build-info.json', root), 'utf8'));
    if (typeof build.version === 'string') pjson.version = build.version;
  } catch {
    // Not built yet: oclif says what is missing.
  }
  return { root: fileURLToPath(root), pjson };
}
