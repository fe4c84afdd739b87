#!/usr/bin/env node
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
  await execute({ dir: import.meta.url });
}
