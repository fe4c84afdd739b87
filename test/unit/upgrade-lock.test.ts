import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CliError } from '../../src/errors/cli-error.js';
import { holdUpgradeLock } from '../../src/upgrade/lock.js';

t.test('one svc upgrade at a time per checkout; a dead holder is taken over', async (t) => {
  const checkout = mkdtempSync(join(tmpdir(), 'svc-upgrade-lock-'));
  t.teardown(() => rmSync(checkout, { recursive: true, force: true }));
  const file = join(checkout, '.svc-upgrade', 'lock');

  const release = holdUpgradeLock(checkout);
  t.equal(readFileSync(file, 'utf8'), `${process.pid}\n`, 'the lock names its holder');
  const second = (() => {
    try {
      holdUpgradeLock(checkout, process.pid + 1);
      return null;
    } catch (error) {
      return error;
    }
  })();
  t.ok(second instanceof CliError, 'a second upgrade is refused while the first runs');
  t.match(second, {
    code: 'upgrade_running',
    exit: 75,
    message: `Another svc upgrade (pid ${process.pid}) is running in this checkout (${checkout}).`,
  });
  release();
  t.notOk(existsSync(file), 'released: the file is gone');

  // A holder killed mid-upgrade: its pid no longer runs.
  const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  writeFileSync(file, `${gone.stdout}\n`);
  const taken = holdUpgradeLock(checkout);
  t.equal(readFileSync(file, 'utf8'), `${process.pid}\n`, "a dead holder's lock is taken over");
  taken();
});
