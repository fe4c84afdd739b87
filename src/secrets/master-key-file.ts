import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { SecretBox, type KeyRing, type KeySource, type MasterKey } from './secret-box.js';

export interface MasterKeyFileContents {
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

/** The key file's contents, after the checks every reader makes: present, private, well formed. */
export function readKeyFile(path: string): MasterKeyFileContents {
  if (!existsSync(path)) throw new Error(`No master key at ${path}. Run \`svc install\` first.`);
  if ((statSync(path).mode & 0o077) !== 0) {
    throw new Error(`${path} is readable by other users; run \`chmod 600 ${path}\`.`);
  }
  let contents: MasterKeyFileContents;
  try {
    contents = JSON.parse(readFileSync(path, 'utf8')) as MasterKeyFileContents;
  } catch {
    throw new Error(`${path} is not valid JSON; restore it from your backup.`);
  }
  if (!Array.isArray(contents?.keys) || typeof contents.active !== 'string')
    throw new Error(`${path} does not hold an "active" key id and a "keys" list.`);
  for (const entry of contents.keys) {
    if (typeof entry?.id !== 'string' || Buffer.from(String(entry.key), 'base64').length !== 32)
      throw new Error(`${path} holds a key that is not the base64 encoding of 32 bytes.`);
  }
  if (!contents.keys.some((entry) => entry.id === contents.active))
    throw new Error(`${path} names active key ${contents.active}, which it does not hold.`);
  return contents;
}

export function keyRingOf(contents: MasterKeyFileContents): KeyRing {
  const keys = contents.keys.map((k) => ({ id: k.id, key: Buffer.from(k.key, 'base64') }));
  return {
    active: keys.find((k) => k.id === contents.active)!,
    older: keys.filter((k) => k.id !== contents.active),
  };
}

/**
 * Replaces the key file in one step (a temporary file renamed over it), so that a process reading it, or a
 * crash while writing it, never meets half a file.
 */
export function writeKeyFile(path: string, contents: MasterKeyFileContents): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, JSON.stringify(contents, null, 2) + '\n', { mode: 0o600, flag: 'w' });
    renameSync(temporary, path);
  } catch (error) {
    if (existsSync(temporary)) unlinkSync(temporary);
    throw error;
  }
}

/** Adds a new key to the file as the active one; the older keys stay, so what they sealed still opens. */
export function addActiveKey(path: string, now: Date): MasterKey {
  const contents = readKeyFile(path);
  const key = newMasterKey();
  writeKeyFile(path, {
    active: key.id,
    keys: [...contents.keys, { id: key.id, key: key.key.toString('base64'), created_at: now.toISOString() }],
  });
  return key;
}

/** Removes keys from the file; the active key is never one of them. */
export function removeKeys(path: string, ids: string[]): void {
  const contents = readKeyFile(path);
  if (ids.includes(contents.active)) throw new Error(`${contents.active} is the active key; it stays.`);
  writeKeyFile(path, { ...contents, keys: contents.keys.filter((k) => !ids.includes(k.id)) });
}

/**
 * The key file as a source that notices a rewrite (a rename gives a new inode; an edit, a new size or
 * modification time). A stat costs microseconds, and seals are rare (a link, an endpoint, an MFA step).
 */
export function keyFileSource(path: string): KeySource {
  const identity = () => {
    const stat = statSync(path);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  };
  let seen = identity();
  return {
    changed() {
      const now = identity();
      if (now === seen) return null;
      const ring = keyRingOf(readKeyFile(path));
      seen = now;
      return ring;
    },
  };
}

/**
 * The secret box from the configured source: `masterKey` (SVC_MASTER_KEY, base64 of 32 bytes) when set,
 * otherwise the key file, which the box reads again when it changes. A key file readable by others is
 * refused.
 */
export function loadSecretBox(options: { masterKeyFile: string; masterKey: string }): SecretBox {
  if (options.masterKey !== '') {
    const key = Buffer.from(options.masterKey, 'base64');
    if (key.length !== 32) throw new Error('SVC_MASTER_KEY must be the base64 encoding of 32 bytes.');
    return new SecretBox({ id: ENV_KEY_ID, key });
  }
  const source = keyFileSource(options.masterKeyFile);
  const ring = keyRingOf(readKeyFile(options.masterKeyFile));
  return new SecretBox(ring.active, ring.older, source);
}

/** The id of the key SVC_MASTER_KEY supplies; a key file that takes it over must keep this id. */
export const ENV_KEY_ID = 'mk_env';
