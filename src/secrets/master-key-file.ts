import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { SecretBox, type MasterKey } from './secret-box.js';

interface MasterKeyFileContents {
  active: string;
  keys: { id: string; key: string; created_at: string }[];
}

export function newMasterKey(): MasterKey {
  return { id: `mk_${randomBytes(4).toString('hex')}`, key: randomBytes(32) };
}

/** Writes a new master key file with mode 0600; refuses to replace an existing one. */
export function createMasterKeyFile(path: string, now: Date): MasterKey {
  const key = newMasterKey();
  const contents: MasterKeyFileContents = {
    active: key.id,
    keys: [{ id: key.id, key: key.key.toString('base64'), created_at: now.toISOString() }],
  };
  writeFileSync(path, JSON.stringify(contents, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  return key;
}

/**
 * The secret box from the configured source: `masterKey` (SVC_MASTER_KEY, base64 of 32 bytes) when set,
 * otherwise the key file. A key file readable by others is refused.
 */
export function loadSecretBox(options: { masterKeyFile: string; masterKey: string }): SecretBox {
  if (options.masterKey !== '') {
    const key = Buffer.from(options.masterKey, 'base64');
    if (key.length !== 32) throw new Error('SVC_MASTER_KEY must be the base64 encoding of 32 bytes.');
    return new SecretBox({ id: 'mk_env', key });
  }
  if (!existsSync(options.masterKeyFile)) {
    throw new Error(`No master key at ${options.masterKeyFile}. Run \`svc install\` first.`);
  }
  if ((statSync(options.masterKeyFile).mode & 0o077) !== 0) {
    throw new Error(
      `${options.masterKeyFile} is readable by other users; run \`chmod 600 ${options.masterKeyFile}\`.`,
    );
  }
  const contents = JSON.parse(readFileSync(options.masterKeyFile, 'utf8')) as MasterKeyFileContents;
  const keys = contents.keys.map((k) => ({ id: k.id, key: Buffer.from(k.key, 'base64') }));
  const active = keys.find((k) => k.id === contents.active);
  if (!active)
    throw new Error(`${options.masterKeyFile} names active key ${contents.active}, which it does not hold.`);
  return new SecretBox(
    active,
    keys.filter((k) => k !== active),
  );
}
