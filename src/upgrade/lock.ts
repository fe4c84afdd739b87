import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../errors/cli-error.js';
import { isAlive } from '../processes/status.js';
import { upgradeDirectory } from './stage.js';

/**
 * One `svc upgrade` at a time per checkout: two at once (two SSH sessions, a retry while the first still
 * builds) would build into the same staging directory and both swap dist/, each keeping the other's build as
 * "previous". The lock is a file naming its holder's pid, made with O_EXCL; one whose holder is gone (killed
 * mid-upgrade) is taken over. Returns the release.
 */
export function holdUpgradeLock(checkout: string, pid = process.pid): () => void {
  const dir = upgradeDirectory(checkout);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, `${pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number.parseInt(readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(holder) && holder > 0 && isAlive(holder))
        throw new CliError(
          'upgrade_running',
          `Another svc upgrade (pid ${holder}) is running in this checkout (${checkout}). Wait for it to end; if no svc upgrade runs, remove ${file}.`,
          75,
        );
      rmSync(file, { force: true });
    }
  }
  throw new CliError('upgrade_running', `Could not take ${file}: another svc upgrade took it first.`, 75);
}
