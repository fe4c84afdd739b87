import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import t from 'tap';
import { ArchiveError } from '../../src/errors/archive-error.js';
import { TarWriter, readTar } from '../../src/backup/tar.js';

async function pack(members: { name: string; data: Buffer }[], dir: string, paxAbove?: number) {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (chunk: Buffer) => chunks.push(chunk));
  const tar = new TarWriter(out, 1_700_000_000, paxAbove);
  const digests = [];
  for (const [i, member] of members.entries()) {
    if (i % 2 === 0) digests.push(await tar.addBuffer(member.name, member.data));
    else {
      const path = join(dir, `source-${i}`);
      writeFileSync(path, member.data);
      digests.push(await tar.addFile(member.name, path, member.data.length));
    }
  }
  await tar.finish();
  out.end();
  return { tar: Buffer.concat(chunks), digests };
}

async function unpack(tar: Buffer): Promise<{ name: string; data: Buffer }[]> {
  const found: { name: string; data: Buffer }[] = [];
  async function* source() {
    // Odd chunk sizes, so that headers and bodies straddle chunks.
    for (let at = 0; at < tar.length; at += 777) yield tar.subarray(at, at + 777);
  }
  await readTar(source(), async (entry, body) => {
    const parts: Buffer[] = [];
    for await (const chunk of body) parts.push(chunk);
    found.push({ name: entry.name, data: Buffer.concat(parts) });
  });
  return found;
}

const dir = mkdtempSync(join(tmpdir(), 'svc-tar-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const members = [
  { name: 'config.json', data: Buffer.from('{"brand":"svc"}\n') },
  { name: 'svc.db', data: Buffer.alloc(70_000, 7) },
  { name: 'empty', data: Buffer.alloc(0) },
  { name: 'block.bin', data: Buffer.alloc(1024, 1) },
  { name: 'manifest.json', data: Buffer.from('{}') },
];

for (const paxAbove of [undefined, 0]) {
  t.test(paxAbove === undefined ? 'ustar' : 'with pax size records', async (t) => {
    const { tar, digests } = await pack(members, dir, paxAbove);
    t.equal(tar.length % 512, 0, 'whole blocks');
    t.same(await unpack(tar), members, 'our reader gets every member back');
    t.same(
      digests.map((d) => [d.name, d.size]),
      members.map((m) => [m.name, m.data.length]),
    );
    const file = join(dir, `archive-${paxAbove ?? 'ustar'}.tar.gz`);
    writeFileSync(file, gzipSync(tar));
    const listed = spawnSync('tar', ['-tzvf', file], { encoding: 'utf8' });
    t.equal(listed.status, 0, `tar -tzvf reads it (${listed.stderr})`);
    const rows = listed.stdout.trim().split('\n');
    t.same(
      rows.map((row) => row.split(/\s+/).at(-1)),
      members.map((m) => m.name),
    );
    t.same(
      rows.map((row) => Number(row.split(/\s+/)[2])),
      members.map((m) => m.data.length),
      'with the sizes',
    );
    const out = join(dir, `out-${paxAbove ?? 'ustar'}`);
    mkdirSync(out);
    t.equal(spawnSync('tar', ['-xzf', file, '-C', out]).status, 0, 'tar -xzf unpacks it');
    t.same(readFileSync(join(out, 'svc.db')), members[1]!.data);
  });
}

t.test('refuses what a backup does not hold, and a cut archive', async (t) => {
  const src = join(dir, 'src');
  mkdirSync(join(src, 'sub'), { recursive: true });
  writeFileSync(join(src, 'sub', 'file'), 'x');
  symlinkSync('/etc/passwd', join(src, 'link'));
  for (const [what, pattern] of [
    ['link', /not a regular file/],
    ['sub', /not a regular file/],
    ['sub/file', /not a name svc writes/],
  ] as const) {
    const made = spawnSync('tar', ['-cf', '-', '--no-recursion', '-C', src, what]);
    await t.rejects(unpack(made.stdout), pattern, what);
  }
  const { tar } = await pack(members, dir);
  await t.rejects(unpack(tar.subarray(0, 5000)), ArchiveError, 'a truncated archive');
  const damaged = Buffer.from(tar);
  damaged[10] = 0x41;
  await t.rejects(unpack(damaged), /bad checksum/, 'a damaged header');
  t.ok(gunzipSync(gzipSync(tar)).equals(tar));
  // A pax header that claims megabytes would be held in memory whole: refused from its size.
  const { tar: paxed } = await pack([{ name: 'svc.db', data: Buffer.from('x') }], dir, 0);
  const header = Buffer.from(paxed.subarray(0, 512));
  header.write((1 << 24).toString(8).padStart(11, '0') + '\0', 124, 'latin1');
  header.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'latin1');
  await t.rejects(unpack(Buffer.concat([header, paxed.subarray(512)])), /oversized pax header/);
});
