import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import t from 'tap';
import {
  DEFAULT_SCRYPT,
  decryptFile,
  encryptingStream,
  isEncrypted,
  scryptRefusal,
} from '../../src/backup/encryption.js';

// A cheap key derivation: the format is under test here, not scrypt's cost.
const CHEAP = { N: 2 ** 10, r: 8, p: 1 };
const SEALED = 64 * 1024 + 16;

async function encrypt(plain: Buffer, passphrase: string): Promise<Buffer> {
  const stream = await encryptingStream(passphrase, CHEAP);
  const out: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => out.push(chunk));
  const input = new PassThrough();
  input.pipe(stream);
  // Odd pieces, so that chunks straddle writes.
  for (let at = 0; at < plain.length; at += 10_007) input.write(plain.subarray(at, at + 10_007));
  input.end();
  await new Promise((resolve) => stream.on('end', resolve));
  return Buffer.concat(out);
}

const dir = mkdtempSync(join(tmpdir(), 'svc-enc-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
async function open(bytes: Buffer, passphrase: string, max = 1 << 30): Promise<Buffer> {
  const source = join(dir, `in-${n}`);
  const out = join(dir, `out-${n++}`);
  writeFileSync(source, bytes);
  await decryptFile(source, out, passphrase, max);
  return readFileSync(out);
}

t.test('round trip, for sizes around the chunk size', async (t) => {
  for (const size of [0, 1, 65535, 65536, 65537, 3 * 65536, 200_001]) {
    const plain = randomBytes(size);
    const sealed = await encrypt(plain, 'a passphrase of some length');
    writeFileSync(join(dir, 'x'), sealed);
    t.ok(isEncrypted(join(dir, 'x')), 'starts with the magic');
    t.same(await open(sealed, 'a passphrase of some length'), plain, `${size} bytes`);
  }
});

t.test('what does not authenticate', async (t) => {
  const plain = randomBytes(3 * 65536 + 5);
  const sealed = await encrypt(plain, 'the right passphrase');
  const headerEnd = 12 + sealed.readUInt32BE(8);
  await t.rejects(open(sealed, 'the wrong passphrase'), /the passphrase does not open this archive/);
  // Cut at a chunk boundary: every chunk left is whole, but the last was not sealed as the final one.
  await t.rejects(
    open(sealed.subarray(0, headerEnd + 2 * SEALED), 'the right passphrase'),
    /does not authenticate/,
  );
  // Two chunks swapped.
  const swapped = Buffer.concat([
    sealed.subarray(0, headerEnd),
    sealed.subarray(headerEnd + SEALED, headerEnd + 2 * SEALED),
    sealed.subarray(headerEnd, headerEnd + SEALED),
    sealed.subarray(headerEnd + 2 * SEALED),
  ]);
  await t.rejects(open(swapped, 'the right passphrase'), /does not open|does not authenticate/);
  // The header altered (a parameter lowered): it is bound to every chunk.
  const header = JSON.parse(sealed.subarray(12, headerEnd).toString());
  const lowered = Buffer.from(
    JSON.stringify({
      ...header,
      chunk: 65536,
      salt: header.salt.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A')),
    }),
  );
  const length = Buffer.alloc(4);
  length.writeUInt32BE(lowered.length);
  await t.rejects(
    open(
      Buffer.concat([sealed.subarray(0, 8), length, lowered, sealed.subarray(headerEnd)]),
      'the right passphrase',
    ),
    /does not open|does not authenticate/,
  );
  // A header asking for a huge key derivation is refused before it runs.
  const greedy = Buffer.from(JSON.stringify({ ...header, N: 2 ** 24 }));
  length.writeUInt32BE(greedy.length);
  await t.rejects(
    open(
      Buffer.concat([sealed.subarray(0, 8), length, greedy, sealed.subarray(headerEnd)]),
      'the right passphrase',
    ),
    /beyond what svc allows/,
  );
  await t.rejects(open(sealed, 'the right passphrase', 1000), /more than 1000 bytes/);
});

t.test("issue 44, item 4: a key derivation costs at most 4 times this build's own", async (t) => {
  t.same(DEFAULT_SCRYPT, { N: 2 ** 17, r: 8, p: 1 });
  for (const params of [
    DEFAULT_SCRYPT,
    { N: 2 ** 10, r: 8, p: 1 },
    { N: 2 ** 19, r: 8, p: 1 },
    { N: 2 ** 17, r: 32, p: 1 },
    { N: 2 ** 17, r: 8, p: 4 },
    { N: 2 ** 18, r: 8, p: 2 },
  ])
    t.equal(scryptRefusal(params), null, `N=${params.N}, r=${params.r}, p=${params.p} is allowed`);
  // The header that cost 2.1 GiB and 21 s, each parameter within the old ceilings.
  t.match(
    scryptRefusal({ N: 2 ** 20, r: 16, p: 4 }),
    /beyond what svc allows \(scrypt N=1048576, r=16, p=4: 2048 MiB of memory and 64 times the work of this svc's own N=131072, r=8, p=1; at most 4 times both, 512 MiB\)/,
  );
  t.match(scryptRefusal({ N: 2 ** 20, r: 8, p: 1 }), /1024 MiB of memory/, 'memory alone');
  t.match(scryptRefusal({ N: 2 ** 17, r: 8, p: 5 }), /5 times the work/, 'work alone (p)');
  t.match(scryptRefusal({ N: 2 ** 16, r: 8, p: 16 }), /8 times the work/, 'p with a smaller N');
  t.ok(scryptRefusal({ N: Number.MAX_SAFE_INTEGER, r: 2 ** 30, p: 2 ** 30 }), 'absurd values');
});

t.test('issue 44, item 4: the refusal comes from the header, before scrypt runs', async (t) => {
  const sealed = await encrypt(randomBytes(1000), 'the right passphrase');
  const headerEnd = 12 + sealed.readUInt32BE(8);
  const header = JSON.parse(sealed.subarray(12, headerEnd).toString());
  const greedy = Buffer.from(JSON.stringify({ ...header, N: 2 ** 20, r: 16, p: 4 }));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(greedy.length);
  const started = process.hrtime.bigint();
  const rss = process.memoryUsage().rss;
  await t.rejects(
    open(Buffer.concat([sealed.subarray(0, 8), length, greedy, sealed.subarray(headerEnd)]), 'x'),
    /scrypt N=1048576, r=16, p=4: 2048 MiB/,
  );
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  t.ok(ms < 1000, `refused in ${ms.toFixed(1)} ms`);
  t.ok(process.memoryUsage().rss - rss < 64 * 2 ** 20, "without allocating scrypt's memory");
  // N must be a power of two above 1 (RFC 7914, section 2).
  for (const N of [1, 3 * 2 ** 10]) {
    const odd = Buffer.from(JSON.stringify({ ...header, N }));
    length.writeUInt32BE(odd.length);
    await t.rejects(
      open(Buffer.concat([sealed.subarray(0, 8), length, odd, sealed.subarray(headerEnd)]), 'x'),
      /names a method this svc does not use/,
      `N=${N}`,
    );
  }
});
