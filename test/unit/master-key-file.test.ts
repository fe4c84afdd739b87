import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import {
  addActiveKey,
  createMasterKeyFile,
  loadSecretBox,
  readKeyFile,
  removeKeys,
} from '../../src/secrets/master-key-file.js';
import { SecretError } from '../../src/secrets/secret-box.js';

function keyFile(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-mk-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'master.key');
  createMasterKeyFile(path, new Date());
  return path;
}

t.test('a box from the key file picks up a rotation without a restart', async (t) => {
  const path = keyFile(t);
  const running = loadSecretBox({ masterKeyFile: path, masterKey: '' });
  const before = running.activeKeyId;
  const old = running.seal('bank password', 'link_1');

  const added = addActiveKey(path, new Date());
  t.not(added.id, before);
  // What `svc master-key rotate` seals, in another process that loaded the new file.
  const resealed = loadSecretBox({ masterKeyFile: path, masterKey: '' }).seal('bank password', 'link_1');
  t.match(resealed, new RegExp(`^v1\\.${added.id}\\.`));
  t.equal(running.open(resealed, 'link_1'), 'bank password', 'the running box opens a value on the new key');
  t.equal(running.open(old, 'link_1'), 'bank password', 'and still the old one');
  t.match(running.seal('x', 'c'), new RegExp(`^v1\\.${added.id}\\.`), 'and seals with the new key');
  t.equal(running.activeKeyId, added.id);

  removeKeys(path, [before]);
  t.throws(
    () => loadSecretBox({ masterKeyFile: path, masterKey: '' }).open(old, 'link_1'),
    { name: 'SecretError', message: /unknown master key/ },
    'once retired, a key opens nothing in a process that starts',
  );
  running.seal('x', 'c');
  t.throws(() => running.open(old, 'link_1'), SecretError, 'nor, after its next reload, in a running one');
});

t.test(
  'a key file that cannot be read keeps the keys in hand and says why a new one is missing',
  async (t) => {
    const path = keyFile(t);
    const running = loadSecretBox({ masterKeyFile: path, masterKey: '' });
    const original = readFileSync(path, 'utf8');
    const stranger = loadSecretBox({ masterKeyFile: keyFile(t), masterKey: '' }).seal('s', 'c');

    writeFileSync(path, '{"active": "mk_', { mode: 0o600 });
    const sealed = running.seal('still works', 'c');
    t.equal(running.open(sealed, 'c'), 'still works', 'seals and opens with the key it had');
    t.throws(() => running.open(stranger, 'c'), {
      name: 'SecretError',
      message:
        /which this process does not hold, and the key file could not be read again: .* not valid JSON/,
    });

    writeFileSync(path, original, { mode: 0o600 });
    t.throws(() => running.open(stranger, 'c'), { name: 'SecretError', message: /unknown master key/ });
  },
);

t.test('the key file is rewritten whole, private, and keeps the active key', async (t) => {
  const path = keyFile(t);
  const first = readKeyFile(path).active;
  const second = addActiveKey(path, new Date()).id;
  t.equal(statSync(path).mode & 0o777, 0o600, 'mode 0600 after a rewrite');
  t.same(readdirSync(join(path, '..')), ['master.key'], 'no temporary file left behind');
  t.same(
    readKeyFile(path).keys.map((k) => k.id),
    [first, second],
  );
  t.throws(() => removeKeys(path, [second]), /is the active key/);
  removeKeys(path, [first]);
  t.same(
    readKeyFile(path).keys.map((k) => k.id),
    [second],
  );
  t.equal(readKeyFile(path).active, second);

  chmodSync(path, 0o644);
  t.throws(() => readKeyFile(path), /readable by other users/);
  chmodSync(path, 0o600);
  const contents = JSON.parse(readFileSync(path, 'utf8'));
  contents.keys[0].key = randomBytes(16).toString('base64');
  writeFileSync(path, JSON.stringify(contents));
  t.throws(() => readKeyFile(path), /not the base64 encoding of 32 bytes/);
});
