import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { ArchiveError } from '../errors/archive-error.js';

/**
 * A POSIX tar (ustar, with a pax size record for members over 8 GiB), enough for a backup archive:
 * regular files only, written and read as streams, each member hashed on the way. `tar -tzf` lists the
 * archive and `tar -xzf` unpacks it. Written here rather than taken from npm (`tar`, `tar-stream`): the
 * format needs 512-byte headers and padding, about a hundred lines, and the reader can then refuse
 * anything a backup does not hold (links, directories, paths, devices) instead of extracting it.
 */

const BLOCK = 512;
/** The largest size the ustar header's 11 octal digits hold (8 GiB - 1); larger goes in a pax record. */
const USTAR_MAX_SIZE = 0o77777777777;

export interface MemberDigest {
  name: string;
  size: number;
  sha256: string;
}

function writeString(header: Buffer, offset: number, length: number, value: string): void {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > length) throw new Error(`tar: "${value}" does not fit a ${length}-byte field`);
  bytes.copy(header, offset);
}

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  writeString(header, offset, length, value.toString(8).padStart(length - 1, '0') + '\0');
}

function headerBlock(name: string, size: number, mode: number, mtime: number, type: '0' | 'x'): Buffer {
  const header = Buffer.alloc(BLOCK);
  writeString(header, 0, 100, name);
  writeOctal(header, 100, 8, mode);
  writeOctal(header, 108, 8, 0);
  writeOctal(header, 116, 8, 0);
  writeOctal(header, 124, 12, Math.min(size, USTAR_MAX_SIZE));
  writeOctal(header, 136, 12, mtime);
  header.fill(' ', 148, 156);
  writeString(header, 156, 1, type);
  writeString(header, 257, 6, 'ustar\0');
  writeString(header, 263, 2, '00');
  let sum = 0;
  for (const byte of header) sum += byte;
  writeString(header, 148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  return header;
}

/** A pax record `"<len> key=value\n"`, where len counts the whole record, itself included. */
function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let length = body.length + 1;
  while (String(length).length + body.length !== length) length = String(length).length + body.length;
  return Buffer.from(`${length}${body}`, 'utf8');
}

function padding(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

async function write(out: Writable, chunk: Buffer): Promise<void> {
  if (!out.write(chunk)) await once(out, 'drain');
}

export class TarWriter {
  /** `paxAbove`: sizes above it get a pax record (tests lower it to exercise that path). */
  constructor(
    private readonly out: Writable,
    private readonly mtime = Math.floor(Date.now() / 1000),
    private readonly paxAbove = USTAR_MAX_SIZE,
  ) {}

  private async header(name: string, size: number): Promise<void> {
    if (size > this.paxAbove) {
      const pax = paxRecord('size', String(size));
      await write(this.out, headerBlock(`PaxHeaders/${name}`, pax.length, 0o600, this.mtime, 'x'));
      await write(this.out, Buffer.concat([pax, padding(pax.length)]));
    }
    await write(this.out, headerBlock(name, size, 0o600, this.mtime, '0'));
  }

  async addBuffer(name: string, data: Buffer): Promise<MemberDigest> {
    await this.header(name, data.length);
    await write(this.out, Buffer.concat([data, padding(data.length)]));
    return { name, size: data.length, sha256: createHash('sha256').update(data).digest('hex') };
  }

  /** Streams a file in; `size` is the one measured beforehand, and the file must not change meanwhile. */
  async addFile(
    name: string,
    path: string,
    size: number,
    onProgress?: (done: number) => void,
  ): Promise<MemberDigest> {
    await this.header(name, size);
    const hash = createHash('sha256');
    let done = 0;
    for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
      done += chunk.length;
      if (done > size) throw new Error(`${path} grew while it was archived`);
      hash.update(chunk);
      await write(this.out, chunk);
      onProgress?.(done);
    }
    if (done !== size) throw new Error(`${path} shrank while it was archived`);
    await write(this.out, padding(size));
    return { name, size, sha256: hash.digest('hex') };
  }

  /** Two zero blocks end an archive. */
  async finish(): Promise<void> {
    await write(this.out, Buffer.alloc(BLOCK * 2));
  }
}

/** Exact reads over a stream of chunks (the gunzipped archive). */
class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private ended = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  private async fill(wanted: number): Promise<void> {
    while (this.length < wanted && !this.ended) {
      const next = await this.source.next();
      if (next.done) this.ended = true;
      else {
        this.buffered.push(next.value);
        this.length += next.value.length;
      }
    }
  }

  /** Up to `max` bytes (at least one unless the stream has ended). */
  async some(max: number): Promise<Buffer> {
    await this.fill(1);
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    const taken = all.subarray(0, Math.min(max, all.length));
    const rest = all.subarray(taken.length);
    this.buffered = rest.length ? [rest] : [];
    this.length = rest.length;
    return taken;
  }

  async exactly(count: number): Promise<Buffer> {
    await this.fill(count);
    if (this.length < count) throw new ArchiveError('the archive ends in the middle of a member (truncated)');
    return this.some(count);
  }
}

function readString(header: Buffer, offset: number, length: number): string {
  const field = header.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
}

function readOctal(header: Buffer, offset: number, length: number): number {
  const text = readString(header, offset, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new ArchiveError('a member header is damaged (not an octal number)');
  return text ? parseInt(text, 8) : 0;
}

function checksumMatches(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
  return readOctal(header, 148, 8) === sum;
}

export interface TarEntry {
  name: string;
  size: number;
}

/**
 * Calls `onMember` for each regular file of the archive in order, with a stream of its bytes that the
 * callback must consume; anything other than a regular file with a plain name is refused.
 */
export async function readTar(
  source: AsyncIterable<Buffer>,
  onMember: (entry: TarEntry, body: AsyncIterable<Buffer>) => Promise<void>,
): Promise<void> {
  const reader = new ByteReader(source[Symbol.asyncIterator]());
  let paxSize: number | null = null;
  for (;;) {
    const header = await reader.exactly(BLOCK);
    if (header.every((byte) => byte === 0)) return;
    if (!checksumMatches(header)) throw new ArchiveError('a member header is damaged (bad checksum)');
    const name = readString(header, 0, 100);
    const type = readString(header, 156, 1) || '0';
    let size = readOctal(header, 124, 12);
    if (type === 'x') {
      // A size record is a few dozen bytes; a larger one would be held in memory whole.
      if (size > 64 * 1024) throw new ArchiveError('the archive holds an oversized pax header');
      const records = (await reader.exactly(size)).toString('utf8');
      await reader.exactly((BLOCK - (size % BLOCK)) % BLOCK);
      const match = /(?:^|\n)\d+ size=(\d+)\n/.exec(records);
      paxSize = match ? Number(match[1]) : null;
      continue;
    }
    if (paxSize !== null) size = paxSize;
    paxSize = null;
    if (type !== '0') throw new ArchiveError(`the archive holds "${name}", which is not a regular file`);
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name))
      throw new ArchiveError(`the archive holds "${name}", which is not a name svc writes`);
    let remaining = size;
    async function* body(): AsyncIterable<Buffer> {
      while (remaining > 0) {
        const chunk = await reader.some(Math.min(remaining, 1 << 20));
        if (chunk.length === 0)
          throw new ArchiveError(`the archive ends in the middle of ${name} (truncated)`);
        remaining -= chunk.length;
        yield chunk;
      }
    }
    await onMember({ name, size }, body());
    if (remaining > 0) for await (const _ of body()) void _;
    await reader.exactly((BLOCK - (size % BLOCK)) % BLOCK);
  }
}

/** Writes a member's bytes to a new private file, returning what it wrote. */
export async function saveMember(
  name: string,
  body: AsyncIterable<Buffer>,
  path: string,
  onProgress?: (done: number) => void,
): Promise<MemberDigest> {
  const out = createWriteStream(path, { mode: 0o600, flags: 'wx' });
  const hash = createHash('sha256');
  let size = 0;
  try {
    for await (const chunk of body) {
      hash.update(chunk);
      size += chunk.length;
      await write(out, chunk);
      onProgress?.(size);
    }
  } finally {
    out.end();
    await finished(out).catch(() => undefined);
  }
  return { name, size, sha256: hash.digest('hex') };
}
