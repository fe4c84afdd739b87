import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import knexFactory from 'knex';
import t from 'tap';
import type { Test } from 'tap';
import type { BackupManifest, BackupResult } from '../../src/backup/backup.js';
import type { RestoreResult } from '../../src/backup/restore.js';
import { TarWriter, readTar } from '../../src/backup/tar.js';
import { REPO_ROOT, installedHome, runCli, runCliJson, withDatabase } from '../helpers/cli.js';
import {
  emptyPostgresDatabase,
  engines,
  forEachEngine,
  setTimeLimit,
  type EngineName,
} from '../helpers/harness.js';

/*
 * An archive is untrusted input to `svc restore` (issue 28, items 7 and 8): crafted archives that pick a
 * path, carry code for the database to run, lie about their sizes or are not what they claim, each over a
 * real CLI run on both engines; and backups that are encrypted and private by default.
 */

// About 25 s per engine idle (a dozen backups and restores, each a scrypt of ~0.4 s); room for a loaded box.
setTimeLimit(t, engines().length * 150_000);

const PASSPHRASE = 'correct horse battery staple';
const WITH_PASSPHRASE = { SVC_BACKUP_PASSPHRASE: PASSPHRASE };

type Members = Map<string, Buffer>;

async function membersOf(archive: string): Promise<Members> {
  const members: Members = new Map();
  async function* source() {
    yield gunzipSync(readFileSync(archive));
  }
  await readTar(source(), async (entry, body) => {
    const parts: Buffer[] = [];
    for await (const chunk of body) parts.push(chunk);
    members.set(entry.name, Buffer.concat(parts));
  });
  return members;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/**
 * Packs `members` as svc backup would, with a manifest whose sizes and SHA-256 match them (unless `declare`
 * says otherwise for a member), after `edit` changed the manifest.
 */
async function craft(
  path: string,
  members: Members,
  edit: (manifest: BackupManifest) => void = () => undefined,
  declare: Record<string, Buffer> = {},
): Promise<string> {
  const manifest = JSON.parse(members.get('manifest.json')!.toString()) as BackupManifest;
  manifest.members = [...members.keys()]
    .filter((name) => name !== 'manifest.json')
    .map((name) => {
      const declared = declare[name] ?? members.get(name)!;
      return { name, size: declared.length, sha256: sha256(declared) };
    });
  edit(manifest);
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (chunk: Buffer) => chunks.push(chunk));
  const tar = new TarWriter(out);
  for (const [name, data] of members) if (name !== 'manifest.json') await tar.addBuffer(name, data);
  await tar.addBuffer('manifest.json', Buffer.from(JSON.stringify(manifest)));
  await tar.finish();
  out.end();
  writeFileSync(path, gzipSync(Buffer.concat(chunks)), { mode: 0o600 });
  return path;
}

function withMember(members: Members, name: string, data: Buffer): Members {
  return new Map([...members].map(([key, value]) => [key, key === name ? data : value]));
}

/** A fresh directory for a test's files, and the path of a home inside it that does not exist yet. */
function scratch(t: Test): { dir: string; home: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-untrusted-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, home: join(dir, 'home') };
}

const admin = () =>
  knexFactory({ client: 'pg', connection: process.env.SVC_TEST_DATABASE_URL!, pool: { min: 0, max: 1 } });

/**
 * Where a restore puts the database: SQLite, the home's file (no flag); PostgreSQL, a new database on the
 * test server with the source's schema name, as a new VM's would be.
 */
async function target(
  t: Test,
  engine: EngineName,
  schema: string | null,
): Promise<{ args: string[]; url: string }> {
  if (engine === 'sqlite') return { args: [], url: '' };
  const url = await emptyPostgresDatabase(t, 'svc_untrusted', schema);
  return { args: ['--database-url', url], url };
}

/** What a PostgreSQL database holds in a schema: tables, functions, constraints of svc's tables. */
async function postgresObjects(url: string, schema: string) {
  const base = new URL(url);
  base.searchParams.delete('schema');
  const db = knexFactory({ client: 'pg', connection: base.toString(), pool: { min: 0, max: 1 } });
  try {
    const tables = await db.raw('select tablename from pg_tables where schemaname = ? order by 1', [schema]);
    const functions = await db.raw(
      'select proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = ?',
      [schema],
    );
    const checks = await db.raw(
      "select conname from pg_constraint c join pg_namespace n on n.oid = c.connamespace where n.nspname = ? and c.contype = 'c'",
      [schema],
    );
    return {
      tables: tables.rows.map((r: { tablename: string }) => r.tablename) as string[],
      functions: functions.rows.map((r: { proname: string }) => r.proname) as string[],
      checks: checks.rows.map((r: { conname: string }) => r.conname) as string[],
    };
  } finally {
    await db.destroy();
  }
}

forEachEngine(t, async (t, engine) => {
  const { home, database } = await installedHome(t, engine);
  const schema = engine === 'postgres' ? new URL(database.url).searchParams.get('schema') : null;
  const files = scratch(t);
  const plain = join(files.dir, 'plain.tar.gz');
  const backup = await runCliJson<BackupResult>(t, ['backup', '--no-encrypt', '--out', plain], { home });
  t.equal(backup.encrypted, false);
  const members = await membersOf(plain);
  const keyFile = readFileSync(join(home, 'master.key'));
  const keys = (JSON.parse(keyFile.toString()) as { keys: { key: string }[] }).keys.map((k) => k.key);
  const dbMember = engine === 'sqlite' ? 'svc.db' : 'postgres.dump';

  /** The one target database every refusal below must leave as it found it (empty). */
  const refusalTarget = await target(t, engine, schema);
  const nothingLeft = async (t: Test, restoredHome: string) => {
    t.notOk(existsSync(restoredHome), 'the new home was not left behind');
    if (engine === 'postgres') {
      const objects = await postgresObjects(refusalTarget.url, schema!);
      t.same(objects.tables, [], 'the target database holds no table');
    }
  };
  const refuse = async (t: Test, archive: string, pattern: RegExp, extra: string[] = [], env = {}) => {
    const { dir, home: restoredHome } = scratch(t);
    const result = await runCli(['restore', archive, ...refusalTarget.args, ...extra], {
      home: restoredHome,
      env,
    });
    t.not(result.code, 0, 'the restore is refused');
    t.match(result.stderr, pattern, 'saying why');
    t.equal(
      result.stderr
        .trim()
        .split('\n')
        .filter((line) => line.startsWith('Error')).length,
      1,
    );
    t.match(result.stderr, /^Error: [^\n]+\n$/m, 'in one line');
    await nothingLeft(t, restoredHome);
    t.same(readdirSync(dir), [], 'and nothing else beside it');
    return result;
  };

  await t.test('item 8: a backup is encrypted and private by default', async (t) => {
    const before = new Set(readdirSync(REPO_ROOT));
    t.teardown(() => {
      // The code before this change wrote into the current directory (the checkout): never leave it there.
      for (const name of readdirSync(REPO_ROOT))
        if (!before.has(name) && name.startsWith('svc-backup-'))
          rmSync(join(REPO_ROOT, name), { force: true });
    });
    const result = await runCliJson<BackupResult>(t, ['backup'], { home, env: WITH_PASSPHRASE });
    t.equal(dirname(result.file), join(home, 'backups'), 'it goes to <home>/backups');
    t.same(
      readdirSync(REPO_ROOT).filter((name) => !before.has(name)),
      [],
      'nothing is written in the current directory',
    );
    t.equal(statSync(join(home, 'backups')).mode & 0o777, 0o700, 'the folder is 0700');
    t.equal(statSync(result.file).mode & 0o777, 0o600, 'the archive is 0600');
    t.equal(result.encrypted, true);
    const bytes = readFileSync(result.file);
    t.equal(bytes.subarray(0, 8).toString('latin1'), 'SVCBAK1\n', 'it starts with the magic');
    t.not(spawnSync('tar', ['-tzf', result.file]).status, 0, 'tar cannot read it');
    for (const key of keys) t.notOk(bytes.includes(Buffer.from(key)), 'the master key is not in clear');

    const refused = await runCli(['backup', '--out', join(files.dir, 'none.tar.gz.enc')], { home });
    t.not(refused.code, 0, 'with no passphrase and no terminal, svc backup refuses');
    t.match(refused.message, /--passphrase-file.*SVC_BACKUP_PASSPHRASE.*--no-encrypt/);
    t.notOk(existsSync(join(files.dir, 'none.tar.gz.enc')), 'and writes nothing');

    const short = await runCli(['backup', '--out', join(files.dir, 'short.enc')], {
      home,
      env: { SVC_BACKUP_PASSPHRASE: 'hunter2' },
    });
    t.not(short.code, 0, 'a short passphrase is refused');
    t.notMatch(short.stdout + short.stderr, /hunter2/, 'and never printed');

    // The restore authenticates the whole archive before it unpacks anything.
    await refuse(t, result.file, /This archive is encrypted: pass --passphrase-file/);
    const wrong = join(files.dir, 'wrong.pass');
    writeFileSync(wrong, 'not the passphrase at all\n', { mode: 0o600 });
    await refuse(t, result.file, /the passphrase does not open this archive/, ['--passphrase-file', wrong]);
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(bytes.length / 2)]! ^= 0x01;
    const altered = join(files.dir, 'altered.enc');
    writeFileSync(altered, flipped);
    await refuse(t, altered, /does not authenticate|passphrase does not open/, [], WITH_PASSPHRASE);
    // Cut short (chunk boundaries, swaps and headers: test/unit/backup-encryption.test.ts).
    const cut = join(files.dir, 'cut.enc');
    writeFileSync(cut, bytes.subarray(0, bytes.length - 100));
    await refuse(t, cut, /does not authenticate|passphrase does not open|cut short/, [], WITH_PASSPHRASE);

    const passFile = join(files.dir, 'right.pass');
    writeFileSync(passFile, `${PASSPHRASE}\n`, { mode: 0o600 });
    const { home: restoredHome } = scratch(t);
    const into = await target(t, engine, schema);
    const restored = await runCli(
      ['restore', result.file, ...into.args, '--passphrase-file', passFile, '--json'],
      { home: restoredHome },
    );
    t.equal(restored.code, 0, `the right passphrase restores it (${restored.message.slice(0, 300)})`);
    t.same(readFileSync(join(restoredHome, 'master.key')), keyFile, 'with the same master key');
    t.notMatch(restored.stdout + restored.stderr, PASSPHRASE, 'the passphrase is never printed');
  });

  await t.test('item 7: every path comes from the target home and the flags', async (t) => {
    const outside = mkdtempSync(join(tmpdir(), 'svc-victim-'));
    t.teardown(() => rmSync(outside, { recursive: true, force: true }));
    const victim = join(outside, 'authorized_keys');
    writeFileSync(victim, 'ssh-ed25519 AAAA the operator\n');
    const config = JSON.parse(members.get('config.json')!.toString()) as Record<string, unknown>;
    const hostile = {
      ...config,
      masterKeyFile: victim,
      log: { file: join(outside, 'bashrc') },
      ...(engine === 'sqlite' ? { databaseUrl: `sqlite://${join(outside, 'evil.db')}` } : {}),
      smuggled: { anything: true },
    };
    const archive = await craft(
      join(files.dir, 'paths.tar.gz'),
      withMember(members, 'config.json', Buffer.from(JSON.stringify(hostile))),
    );
    const { home: restoredHome } = scratch(t);
    const into = await target(t, engine, schema);
    const restored = await runCliJson<RestoreResult>(t, ['restore', archive, ...into.args, '--force'], {
      home: restoredHome,
    });
    t.equal(readFileSync(victim, 'utf8'), 'ssh-ed25519 AAAA the operator\n', 'the file outside is untouched');
    t.same(readdirSync(outside), ['authorized_keys'], 'nothing is written outside the home');
    t.equal(restored.masterKeyFile, join(restoredHome, 'master.key'), 'the key is in the home');
    t.same(readFileSync(join(restoredHome, 'master.key')), keyFile);
    t.same(
      restored.droppedSettings.map((setting) => setting.key).sort(),
      ['databaseUrl', 'log.file', 'masterKeyFile', 'smuggled'],
      'the output lists what was dropped',
    );
    const written = JSON.parse(readFileSync(join(restoredHome, 'config.json'), 'utf8'));
    t.notOk(JSON.stringify(written).includes(outside), 'the written config.json names no path outside');
    const text = await runCli(['restore', archive, ...into.args, '--force'], { home: restoredHome });
    t.match(text.stdout, /not restored\s+\S+ from the archived config\.json/, 'and says so in text');
    t.match(text.stdout, /masterKeyFile from the archived config\.json: the key goes to <home>\/master\.key/);

    // The database named by an archive is never used: without a flag, the home decides.
    const pointed =
      engine === 'sqlite'
        ? `sqlite://${join(outside, 'evil.db')}`
        : (() => {
            const url = new URL(process.env.SVC_TEST_DATABASE_URL!);
            url.searchParams.set('schema', `${schema}_victim`);
            return url.toString();
          })();
    const refusedArchive = await craft(
      join(files.dir, 'refused.tar.gz'),
      withMember(members, 'config.json', Buffer.from(JSON.stringify({ ...hostile, databaseUrl: pointed }))),
      (manifest) => (manifest.database.row_counts.organisations = 999),
    );
    if (engine === 'postgres') {
      // The archived URL is refused outright; a row count that lies is refused before anything is written.
      const { home: other } = scratch(t);
      const noFlag = await runCli(['restore', refusedArchive], { home: other });
      t.not(noFlag.code, 0);
      t.match(noFlag.message, /pass --database-url/);
      t.notOk(existsSync(other));
      t.same(
        (await postgresObjects(pointed, `${schema}_victim`)).tables,
        [],
        'the archived URL is never used',
      );
    }
    await refuse(t, refusedArchive, /does not hold what its manifest recorded/);
    t.same(readdirSync(outside), ['authorized_keys'], 'a refused restore leaves nothing outside either');
  });

  await t.test('item 7: unpacking is bounded and staged inside the home', async (t) => {
    // A member larger than the manifest declares: refused from its header, before a byte of it is written.
    const big = Buffer.alloc(4 << 20, 0x20);
    const lying = await craft(
      join(files.dir, 'lying.tar.gz'),
      withMember(members, 'config.json', big),
      () => undefined,
      {
        'config.json': members.get('config.json')!,
      },
    );
    await refuse(t, lying, /config\.json is 4194304 bytes where the manifest declares/);
    // A small archive that unpacks to far more than allowed (a gzip bomb): stopped as it streams.
    const bomb = await craft(
      join(files.dir, 'bomb.tar.gz'),
      withMember(members, dbMember, Buffer.alloc(32 << 20)),
    );
    t.ok(statSync(bomb).size < 1 << 20, 'the bomb is small');
    await refuse(t, bomb, /more than 8388608 bytes, the limit \(--max-size\)/, ['--max-size', '8M']);
    // The home the restore runs in keeps no staging directory after a refusal.
    const existing = scratch(t);
    const kept = await runCli(['restore', bomb, ...refusalTarget.args, '--max-size', '8M'], {
      home: existing.dir,
    });
    t.not(kept.code, 0);
    t.same(readdirSync(existing.dir), [], 'no staging directory is left in the home');
  });

  await t.test('item 7: a database member that is not a database is refused', async (t) => {
    const garbage = await craft(
      join(files.dir, 'garbage.tar.gz'),
      withMember(members, dbMember, randomBytes(8192)),
    );
    await refuse(
      t,
      garbage,
      engine === 'sqlite'
        ? /svc\.db in the archive is not a SQLite database/
        : /postgres\.dump in the archive is not a dump/,
    );
  });

  if (engine === 'sqlite') {
    await t.test('item 7: a SQLite archive with a trigger or a view of its own is refused', async (t) => {
      const { dir } = scratch(t);
      const evilHome = join(dir, 'evil');
      await runCliJson(t, ['install'], { home: evilHome });
      await withDatabase(`sqlite://${join(evilHome, 'svc.db')}`, async (db) => {
        await db.knex.raw(
          'CREATE TRIGGER keys_gone AFTER INSERT ON audit_log BEGIN DELETE FROM api_keys; END',
        );
        await db.knex.raw('CREATE VIEW everything AS SELECT * FROM api_keys');
      });
      const archive = join(dir, 'trigger.tar.gz');
      await runCliJson(t, ['backup', '--no-encrypt', '--out', archive], { home: evilHome });
      await refuse(
        t,
        archive,
        /holds trigger keys_gone, view everything, which svc's migrations do not create/,
      );
      // An extra table, or a column of svc's made a generated one, likewise.
      await withDatabase(`sqlite://${join(evilHome, 'svc.db')}`, async (db) => {
        await db.knex.raw('DROP TRIGGER keys_gone');
        await db.knex.raw('DROP VIEW everything');
        await db.knex.raw('CREATE TABLE stowaway (x)');
      });
      const table = join(dir, 'table.tar.gz');
      await runCliJson(t, ['backup', '--no-encrypt', '--out', table], { home: evilHome });
      await refuse(t, table, /holds table stowaway/);
      // One of svc's indexes redefined with an expression of the archive's.
      const redefined = await withDatabase(`sqlite://${join(evilHome, 'svc.db')}`, async (db) => {
        await db.knex.raw('DROP TABLE stowaway');
        const [index] = (await db.knex.raw(
          "select name, tbl_name from sqlite_master where type = 'index' and tbl_name = 'api_keys' and sql is not null limit 1",
        )) as { name: string; tbl_name: string }[];
        await db.knex.raw(`DROP INDEX "${index!.name}"`);
        await db.knex.raw(`CREATE INDEX "${index!.name}" ON "${index!.tbl_name}" (abs(length(token_hash)))`);
        return index!.name;
      });
      const indexed = join(dir, 'index.tar.gz');
      await runCliJson(t, ['backup', '--no-encrypt', '--out', indexed], { home: evilHome });
      await refuse(t, indexed, new RegExp(`index ${redefined} defined otherwise than svc's`));
    });
  }

  await t.test(
    'issue 44, item 3: no setting that sends secrets, bank logins or traffic elsewhere is taken unasked',
    async (t) => {
      const config = JSON.parse(members.get('config.json')!.toString()) as Record<string, unknown>;
      const connectorSecret = 'the-archive-gateway-secret-0123456789';
      const archiveKey = randomBytes(32).toString('base64');
      // Loopback, port 9 (discard): svc doctor probes a configured gateway, and a test reaches no network.
      const gateway = 'http://127.0.0.1:9/archive-gateway';
      const hostile = {
        ...config,
        masterKey: archiveKey,
        api: { host: '0.0.0.0', bodyLimitBytes: 2048 },
        webhooks: { allowPrivateAddresses: true, secretRollGraceSeconds: 120 },
        widget: { allowedRedirectUris: ['https://evil.example/callback'], name: 'Archived Widget' },
        banks: { connectors: { bancochile: { url: gateway, secret: connectorSecret } } },
      };
      const archive = await craft(
        join(files.dir, 'settings.tar.gz'),
        withMember(members, 'config.json', Buffer.from(JSON.stringify(hostile))),
      );
      const { home: restoredHome } = scratch(t);
      const into = await target(t, engine, schema);
      const restored = await runCliJson<RestoreResult>(t, ['restore', archive, ...into.args], {
        home: restoredHome,
      });
      const setAside = [
        'api.host',
        'banks.connectors',
        'masterKey',
        'webhooks.allowPrivateAddresses',
        'widget.allowedRedirectUris',
      ];
      t.same(
        restored.droppedSettings
          .map((setting) => setting.key)
          .filter((key) => setAside.includes(key))
          .sort(),
        setAside,
        '--json lists each setting set aside',
      );
      t.match(
        restored.droppedSettings.find((setting) => setting.key === 'banks.connectors'),
        {
          archived: { bancochile: { url: gateway, secret: '(not shown)' } },
          restored: {},
          keep: '--keep-config banks.connectors',
        },
        'with the archived value beside the restored one',
      );
      t.same(restored.keptSettings, []);
      const written = JSON.parse(readFileSync(join(restoredHome, 'config.json'), 'utf8'));
      t.notOk('masterKey' in written, 'the archived key does not replace the restored key file');
      t.same(written.banks ?? {}, {}, 'no connector of the archive');
      t.same(written.api, { bodyLimitBytes: 2048 }, 'api.host set aside, the rest of api kept');
      t.same(written.webhooks, { secretRollGraceSeconds: 120 });
      t.same(written.widget, { name: 'Archived Widget' });

      // What the operator sees: the restored home uses its own key file and sends bank logins nowhere.
      const doctor = await runCli(['doctor', '--json'], { home: restoredHome, env: { SVC_MASTER_KEY: '' } });
      t.notMatch(doctor.stdout, /archive-gateway/, 'svc doctor knows no archived gateway');
      t.match(doctor.stdout, /none configured: live mode has no bank/);
      t.match(doctor.stdout, new RegExp(`${join(restoredHome, 'master.key')}: present`), 'and the key file');

      // The text output shows the difference, secrets hidden, and how to take a setting.
      const text = await runCli(['restore', archive, ...into.args, '--force'], { home: restoredHome });
      t.equal(text.code, 0, text.message);
      t.match(text.stdout, /banks\.connectors from the archived config\.json: live bank logins are sent/);
      t.match(
        text.stdout,
        /archive\s+\{"bancochile":\{"url":"http:\/\/127\.0\.0\.1:9\/archive-gateway","secret":"\(not shown\)"\}\}/,
      );
      t.match(
        text.stdout,
        /restored\s+\{\} \(to take the archive's: restore again with --force --keep-config banks\.connectors\)/,
      );
      t.match(text.stdout, /masterKey from the archived config\.json: .*\n\s+archive\s+"\(set, not shown\)"/);
      for (const secret of [connectorSecret, archiveKey])
        t.notOk((text.stdout + text.stderr + JSON.stringify(restored)).includes(secret), 'no secret printed');

      // Taken by name, once seen: that setting and no other.
      const kept = await runCliJson<RestoreResult>(
        t,
        ['restore', archive, ...into.args, '--force', '--keep-config', 'banks.connectors'],
        { home: restoredHome },
      );
      t.same(
        kept.keptSettings.map((setting) => setting.key),
        ['banks.connectors'],
      );
      const keptConfig = JSON.parse(readFileSync(join(restoredHome, 'config.json'), 'utf8'));
      t.same(keptConfig.banks.connectors, hostile.banks.connectors, 'the connector is taken');
      t.notOk('masterKey' in keptConfig, 'the key still is not');
      t.notOk(keptConfig.api.host, 'nor the listen address');

      // A name that is not a set-aside setting is refused before anything is read or written.
      const { home: other } = scratch(t);
      const unknown = await runCli(['restore', archive, ...into.args, '--keep-config', 'databaseUrl'], {
        home: other,
      });
      t.not(unknown.code, 0);
      t.match(
        unknown.message,
        /--keep-config databaseUrl: not a setting a restore sets aside; it sets aside api\.baseUrl, /,
      );
      t.notOk(existsSync(other), 'nothing written');
    },
  );

  await t.test('issue 44, item 4: a crafted key derivation is refused before any work', async (t) => {
    const passFile = join(files.dir, 'kdf.pass');
    writeFileSync(passFile, `${PASSPHRASE}\n`, { mode: 0o600 });
    const sealed = await runCliJson<BackupResult>(
      t,
      ['backup', '--out', join(files.dir, 'kdf-source.enc'), '--passphrase-file', passFile],
      { home },
    );
    const bytes = readFileSync(sealed.file);
    const headerEnd = 12 + bytes.readUInt32BE(8);
    const header = JSON.parse(bytes.subarray(12, headerEnd).toString());
    const greedy = Buffer.from(JSON.stringify({ ...header, N: 2 ** 20, r: 16, p: 4 }));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(greedy.length);
    const crafted = join(files.dir, 'kdf.enc');
    writeFileSync(crafted, Buffer.concat([bytes.subarray(0, 8), length, greedy, bytes.subarray(headerEnd)]));
    const started = Date.now();
    // No passphrase given, no terminal: the header is refused before one would be asked for.
    await refuse(
      t,
      crafted,
      /^Error: \S+kdf\.enc is not a usable svc backup: its encryption header asks for a key derivation beyond what svc allows \(scrypt N=1048576, r=16, p=4: 2048 MiB of memory and 64 times the work of this svc's own N=131072, r=8, p=1; at most 4 times both, 512 MiB\)\. Nothing was restored\.$/m,
    );
    t.ok(Date.now() - started < 10_000, `refused in ${Date.now() - started} ms (scrypt would take ~21 s)`);
  });

  if (engine === 'postgres') {
    await t.test(
      'item 7: no function, trigger or constraint of a PostgreSQL archive ever runs',
      async (t) => {
        const { dir } = scratch(t);
        // The source schema gets a function that writes when it runs, called from a CHECK on a table with rows.
        const source = admin();
        try {
          await source.raw(`create function ${schema}.looks_fine(text) returns boolean language plpgsql as $$
          begin create table if not exists ${schema}.pwned (at timestamptz); return true; end $$`);
          await source.raw(
            `alter table ${schema}.organisations add constraint org_ok check (${schema}.looks_fine(id))`,
          );
          await source.raw(`create function ${schema}.on_key() returns trigger language plpgsql as $$
          begin delete from ${schema}.api_keys; return new; end $$`);
          await source.raw(
            `create trigger keys_gone after insert on ${schema}.organisations for each row execute function ${schema}.on_key()`,
          );
          await source.raw(`drop table ${schema}.pwned`);
        } finally {
          await source.destroy();
        }
        const archive = join(dir, 'function.tar.gz');
        await runCliJson(t, ['backup', '--no-encrypt', '--out', archive], { home });
        const { home: restoredHome } = scratch(t);
        const into = await target(t, engine, schema);
        const result = await runCli(['restore', archive, ...into.args], { home: restoredHome });
        const objects = await postgresObjects(into.url, schema!);
        t.same(objects.functions, [], 'no function of the archive exists in the target');
        t.notOk(objects.tables.includes('pwned'), 'the function never ran');
        t.notOk(objects.checks.includes('org_ok'), 'the constraint was not created');
        if (result.code === 0) {
          const keysRestored = await withDatabase(into.url, (db) => db.knex('api_keys').count({ n: '*' }));
          t.ok(Number(keysRestored[0]!.n) > 0, 'the data is there, untouched by the trigger');
        } else t.match(result.stderr, /^Error: [^\n]+$/m, 'or it was refused in one line');
      },
    );
  }
});
