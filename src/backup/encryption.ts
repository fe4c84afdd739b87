import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { Transform, type TransformCallback } from 'node:stream';
import { ArchiveError } from '../errors/archive-error.js';

/**
 * An encrypted archive: the gzipped tar of svc backup, sealed with a key derived from a passphrase.
 *
 *     "SVCBAK1\n" | header length (uint32 BE) | header (JSON) | chunk 0 | chunk 1 | … | final chunk
 *
 * The header names the key derivation (scrypt, its salt and cost) and the cipher (AES-256-GCM, a base nonce,
 * the chunk size). Each chunk is at most 64 KiB of the archive encrypted with its own GCM tag: its nonce is
 * the base nonce with the chunk's counter added, and its associated data is the whole header, the counter
 * and a final flag. So a chunk cannot be moved, dropped or replayed, a header cannot be altered, and an
 * archive cut at a chunk boundary fails too (its last chunk was not sealed as the final one): the STREAM
 * construction of Hoang, Reyhanitabar, Rogaway and Vizár. Chunks keep memory flat whatever the archive's
 * size, and let a restore authenticate the whole file, chunk by chunk, before it unpacks a byte.
 *
 * scrypt at N = 2^17, r = 8, p = 1 needs 128 MiB and about 0.3 s on one core of an idle 2-core VM (0.55 s
 * with the other core busy): slow enough to make guessing a passphrase costly, quick enough for a backup.
 * The parameters are in the header, so a later version can raise them and still open older archives. A
 * restore refuses, from the header alone and before any other work, parameters that cost more than
 * SCRYPT_FACTOR times what this build chooses, in memory (128·N·r bytes) or in work (N·r·p): at most
 * 512 MiB and about 2 s. (The ceiling used to be N 2^20, r 16, p 4 each on its own: a crafted header with
 * all three took 2.1 GiB and 21 s before the restore refused it.)
 */

export const ENCRYPTED_MAGIC = Buffer.from('SVCBAK1\n', 'latin1');
const CHUNK = 64 * 1024;
const TAG = 16;
const NONCE = 12;
const MAX_HEADER = 4096;

export interface ScryptParameters {
  N: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT: ScryptParameters = { N: 2 ** 17, r: 8, p: 1 };
/** How far an archive's key derivation may cost more than this build's own, in memory and in work. */
export const SCRYPT_FACTOR = 4;

/** scrypt's memory, in bytes (RFC 7914, section 6: V is N blocks of 128·r bytes). */
export const scryptMemory = ({ N, r }: ScryptParameters) => 128 * N * r;
/** scrypt's work, in BlockMix rounds of one block: N·r for each of p lanes, twice. */
const scryptWork = ({ N, r, p }: ScryptParameters) => N * r * p;

/**
 * Why these parameters cost too much for a restore to run them, or null. Checked before any work: the
 * header of a crafted archive decides what scrypt would allocate, and for how long.
 */
export function scryptRefusal(params: ScryptParameters): string | null {
  const memory = scryptMemory(params);
  const work = scryptWork(params);
  const maxMemory = SCRYPT_FACTOR * scryptMemory(DEFAULT_SCRYPT);
  const maxWork = SCRYPT_FACTOR * scryptWork(DEFAULT_SCRYPT);
  if (memory <= maxMemory && work <= maxWork) return null;
  const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MiB`;
  const own = DEFAULT_SCRYPT;
  return (
    `its encryption header asks for a key derivation beyond what svc allows (scrypt N=${params.N}, ` +
    `r=${params.r}, p=${params.p}: ${mib(memory)} of memory and ${Math.round(work / scryptWork(own))} times ` +
    `the work of this svc's own N=${own.N}, r=${own.r}, p=${own.p}; at most ${SCRYPT_FACTOR} times both, ` +
    `${mib(maxMemory)})`
  );
}

interface Header {
  kdf: 'scrypt';
  N: number;
  r: number;
  p: number;
  salt: string;
  cipher: 'aes-256-gcm';
  nonce: string;
  chunk: number;
}

/** Why an encrypted archive did not open: a wrong passphrase, or bytes altered or cut after it was written. */
export class PassphraseError extends ArchiveError {
  override name = 'PassphraseError';
}

async function deriveKey(passphrase: string, salt: Buffer, params: ScryptParameters): Promise<Buffer> {
  // scrypt needs 128 * N * r bytes; Node refuses more than maxmem (32 MiB by default).
  const maxmem = 128 * params.N * params.r + (1 << 20);
  return new Promise((resolve, reject) =>
    scrypt(passphrase.normalize('NFC'), salt, 32, { ...params, maxmem }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

function nonceFor(base: Buffer, counter: number): Buffer {
  const nonce = Buffer.from(base);
  // The counter is added to the last 8 bytes (big-endian), which never wrap for an archive under 2^64 chunks.
  const tail = nonce.readBigUInt64BE(4);
  nonce.writeBigUInt64BE((tail + BigInt(counter)) & 0xffffffffffffffffn, 4);
  return nonce;
}

function associatedData(header: Buffer, counter: number, final: boolean): Buffer {
  const suffix = Buffer.alloc(9);
  suffix.writeBigUInt64BE(BigInt(counter), 0);
  suffix[8] = final ? 1 : 0;
  return Buffer.concat([header, suffix]);
}

/** Whether a file starts as an encrypted archive does. */
export function isEncrypted(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const start = Buffer.alloc(ENCRYPTED_MAGIC.length);
    const read = readSync(fd, start, 0, start.length, 0);
    return read === start.length && start.equals(ENCRYPTED_MAGIC);
  } finally {
    closeSync(fd);
  }
}

/**
 * A transform that encrypts what goes through it: the magic and header first, then one sealed chunk per
 * 64 KiB, and the final chunk (possibly empty) at the end.
 */
export async function encryptingStream(
  passphrase: string,
  params: ScryptParameters = DEFAULT_SCRYPT,
): Promise<Transform> {
  const salt = randomBytes(16);
  const baseNonce = randomBytes(NONCE);
  const key = await deriveKey(passphrase, salt, params);
  const header: Header = {
    kdf: 'scrypt',
    ...params,
    salt: salt.toString('base64'),
    cipher: 'aes-256-gcm',
    nonce: baseNonce.toString('base64'),
    chunk: CHUNK,
  };
  const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(headerBytes.length);
  let counter = 0;
  let pending: Buffer[] = [];
  let pendingLength = 0;
  const seal = (plain: Buffer, final: boolean): Buffer => {
    const cipher = createCipheriv('aes-256-gcm', key, nonceFor(baseNonce, counter));
    cipher.setAAD(associatedData(headerBytes, counter, final));
    counter++;
    return Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  };
  let started = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (!started) {
        this.push(Buffer.concat([ENCRYPTED_MAGIC, length, headerBytes]));
        started = true;
      }
      pending.push(chunk);
      pendingLength += chunk.length;
      // Keep at least one byte back: the last chunk must be sealed as final, and only the end says which it is.
      while (pendingLength > CHUNK) {
        const all = Buffer.concat(pending);
        this.push(seal(all.subarray(0, CHUNK), false));
        pending = [all.subarray(CHUNK)];
        pendingLength = all.length - CHUNK;
      }
      callback();
    },
    flush(callback: TransformCallback) {
      if (!started) this.push(Buffer.concat([ENCRYPTED_MAGIC, length, headerBytes]));
      this.push(seal(Buffer.concat(pending), true));
      callback();
    },
  });
}

function parseHeader(bytes: Buffer): Header {
  let header: Header;
  try {
    header = JSON.parse(bytes.toString('utf8')) as Header;
  } catch {
    throw new ArchiveError('its encryption header is damaged');
  }
  const integer = (value: unknown) => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
  if (
    header?.kdf !== 'scrypt' ||
    header.cipher !== 'aes-256-gcm' ||
    header.chunk !== CHUNK ||
    !integer(header.N) ||
    !integer(header.r) ||
    !integer(header.p) ||
    typeof header.salt !== 'string' ||
    typeof header.nonce !== 'string' ||
    Buffer.from(header.nonce, 'base64').length !== NONCE
  )
    throw new ArchiveError('its encryption header names a method this svc does not use');
  // scrypt's N is a power of two above 1 (RFC 7914, section 2); the product is a float, exact below 2^53.
  const refusal = scryptRefusal(header);
  if (refusal) throw new ArchiveError(refusal);
  if (header.N < 2 || (header.N & (header.N - 1)) !== 0)
    throw new ArchiveError('its encryption header names a method this svc does not use');
  return header;
}

/** Reads and checks the header of an encrypted archive: the bytes it was sealed with, and what they say. */
function readHeader(fd: number, size: number): { header: Header; bytes: Buffer; start: number } {
  const prefix = Buffer.alloc(ENCRYPTED_MAGIC.length + 4);
  if (
    readSync(fd, prefix, 0, prefix.length, 0) !== prefix.length ||
    !prefix.subarray(0, 8).equals(ENCRYPTED_MAGIC)
  )
    throw new ArchiveError('it is not an encrypted svc backup');
  const headerLength = prefix.readUInt32BE(ENCRYPTED_MAGIC.length);
  if (headerLength > MAX_HEADER || prefix.length + headerLength > size)
    throw new ArchiveError('its encryption header is damaged');
  const bytes = Buffer.alloc(headerLength);
  if (readSync(fd, bytes, 0, headerLength, prefix.length) !== headerLength)
    throw new ArchiveError('its encryption header is damaged');
  return { header: parseHeader(bytes), bytes, start: prefix.length + headerLength };
}

/**
 * Checks an encrypted archive's header, the key derivation's cost above all, without deriving anything:
 * a restore calls it before it asks for the passphrase or writes a byte.
 */
export function checkEncryptionHeader(path: string): void {
  const fd = openSync(path, 'r');
  try {
    readHeader(fd, fstatSync(fd).size);
  } finally {
    closeSync(fd);
  }
}

/**
 * Authenticates and decrypts an encrypted archive into `out` (a new private file), chunk by chunk: the
 * first chunk that does not authenticate stops it. `maxBytes` bounds what it writes. The caller removes
 * `out` on failure (it lies in the restore's staging directory).
 */
export async function decryptFile(
  path: string,
  out: string,
  passphrase: string,
  maxBytes: number,
  onProgress?: (done: number, total: number) => void,
): Promise<number> {
  const fd = openSync(path, 'r');
  let outFd: number | null = null;
  try {
    const size = fstatSync(fd).size;
    const { header, bytes: headerBytes, start } = readHeader(fd, size);
    const sink = openSync(out, 'wx', 0o600);
    outFd = sink;
    const key = await deriveKey(passphrase, Buffer.from(header.salt, 'base64'), header);
    const baseNonce = Buffer.from(header.nonce, 'base64');
    const body = size - start;
    const sealed = CHUNK + TAG;
    const chunks = Math.max(1, Math.ceil(body / sealed));
    if (body < TAG || body - (chunks - 1) * sealed < TAG)
      throw new PassphraseError('the archive is cut short or altered: it does not authenticate');
    const buffer = Buffer.alloc(sealed);
    let written = 0;
    for (let counter = 0; counter < chunks; counter++) {
      const final = counter === chunks - 1;
      const length = final ? body - counter * sealed : sealed;
      if (readSync(fd, buffer, 0, length, start + counter * sealed) !== length)
        throw new ArchiveError('the archive changed while it was read');
      const decipher = createDecipheriv('aes-256-gcm', key, nonceFor(baseNonce, counter));
      decipher.setAAD(associatedData(headerBytes, counter, final));
      decipher.setAuthTag(buffer.subarray(length - TAG, length));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(buffer.subarray(0, length - TAG)), decipher.final()]);
      } catch {
        throw new PassphraseError(
          counter === 0
            ? 'the passphrase does not open this archive (or the archive was altered)'
            : `the archive was altered or cut short after ${counter * CHUNK} bytes: it does not authenticate`,
        );
      }
      written += plain.length;
      if (written > maxBytes)
        throw new ArchiveError(`it decrypts to more than ${maxBytes} bytes, the limit (--max-size)`);
      writeSync(sink, plain);
      if (counter % 256 === 0) onProgress?.(counter * sealed, body);
    }
    return written;
  } finally {
    if (outFd !== null) closeSync(outFd);
    closeSync(fd);
  }
}
