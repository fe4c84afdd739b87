import {
  chmodSync,
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { createGunzip } from 'node:zlib';
import { CONFIG_FILE } from '../config/load-config.js';
import { maskUrl } from '../db/database-url.js';
import { engineOf, openDatabase, sqlitePath } from '../db/database.js';
import { migrateUp, migrationNames, migrationStatus } from '../db/migrations.js';
import { loadPostgres, rebuildSqlite } from '../db/restore-data.js';
import { describeTarget, type DumpProgress } from '../db/snapshot.js';
import {
  ensureTestCa,
  hasTestCa,
  testCaDirectory,
  writeTestCa,
  type TestCaMaterial,
} from '../consent-bank/test-ca.js';
import { makePrivate } from '../install/install.js';
import { runningSupervisors } from '../processes/status.js';
import { loadSecretBox, readKeyFile } from '../secrets/master-key-file.js';
import { keyUsage } from '../secrets/rotate.js';
import { operatorSettings } from '../config/restore-policy.js';
import { sanitiseConfig, type DroppedSetting, type KeptSetting } from './archived-config.js';
import {
  ARCHIVE_FORMAT,
  ARCHIVE_FORMAT_VERSION,
  CONFIG_MEMBER,
  DATABASE_MEMBERS,
  MANIFEST_MEMBER,
  MASTER_KEY_MEMBER,
  TEST_CA_MEMBER,
  type BackupManifest,
} from './backup.js';
import { checkEncryptionHeader, decryptFile, isEncrypted } from './encryption.js';
import { ArchiveError } from '../errors/archive-error.js';
import { readTar, saveMember, type MemberDigest } from './tar.js';

/** What a restore unpacks at most unless told otherwise (--max-size): far above any appliance's database. */
export const DEFAULT_MAX_UNPACKED_BYTES = 64 * 1024 ** 3;
/** manifest.json, config.json and master.key are a few kilobytes; more is not an archive of svc backup. */
const SMALL_MEMBER_MAX = 1024 * 1024;

export interface RestoreOptions {
  archive: string;
  home: string;
  /** Restore the database here rather than into `<home>/svc.db` (or the target home's configured URL). */
  databaseUrl?: string;
  /** Replace an existing installation or a database that holds data. */
  force: boolean;
  env: Record<string, string | undefined>;
  /** Asked only for an encrypted archive. */
  passphrase: () => Promise<string>;
  /** What the archive may unpack to, in all (decrypted, then unzipped): a bound on a crafted archive. */
  maxBytes?: number;
  /**
   * Settings of the archived config.json that decide where secrets, bank logins or traffic go, or which key
   * opens them (config/restore-policy.ts), which the operator takes by name (`--keep-config`).
   */
  keepConfig?: readonly string[];
  onProgress?: (progress: DumpProgress) => void;
}

export interface RestoreResult {
  home: string;
  configFile: string;
  masterKeyFile: string | null;
  database: string;
  encrypted: boolean;
  manifest: BackupManifest;
  migrationsApplied: string[];
  /** Settings of the archived config.json that were not restored, and why. */
  droppedSettings: DroppedSetting[];
  /** Set-aside settings taken from the archive all the same, because `--keep-config` named them. */
  keptSettings: KeptSetting[];
  /** Stored secrets the restored key opens, and those it does not; null without a key file. */
  secrets: { readable: number; unreadable: string[] } | null;
  /**
   * Test mode's CA (`<home>/consent-bank/`): `archive` restored from it; `kept`, the home's own (the archive
   * has none); `new`, made here because neither had one: the simulated banks no longer know the appliance's
   * client nor open the grants sealed with the old CA's secret, so each test-mode consent link named in
   * `relink` must be connected again.
   */
  testCa: { directory: string; source: 'archive' | 'kept' | 'new'; relink: string[] };
}

/** What a home holds once svc has installed into it. */
const INSTALLATION_FILES = [CONFIG_FILE, 'master.key', 'svc.db'];
const KNOWN_MEMBERS = new Set([
  MANIFEST_MEMBER,
  CONFIG_MEMBER,
  MASTER_KEY_MEMBER,
  TEST_CA_MEMBER,
  ...Object.values(DATABASE_MEMBERS),
]);

/**
 * Restores an archive of `svc backup` into a home, treating the archive as untrusted input
 * (docs/security.md, "Backups and restore"):
 *
 * 1. Every path comes from the target home and the flags: the database is `--database-url`, else the target
 *    home's own configured URL, else `<home>/svc.db`; the key goes to `<home>/master.key`. The archived
 *    config.json is sanitised (archived-config.ts) and what was dropped is reported.
 * 2. Everything happens in a staging directory inside the home (0700), removed whatever happens. An encrypted
 *    archive is authenticated in full, chunk by chunk, into it before anything is unpacked. Unpacking is
 *    bounded: the whole by `maxBytes` as it streams, each member by the size the manifest declares.
 * 3. The database is rebuilt by our own migrations and only the archive's rows are loaded into it
 *    (restore-data.ts), then checked against the manifest's row counts. Then the key and config.json, then
 *    the migrations this svc has beyond the archive's.
 *
 * A refusal leaves nothing behind: the staging directory, a home it created, and on PostgreSQL the tables
 * it created are removed.
 */
export async function restoreBackup(options: RestoreOptions): Promise<RestoreResult> {
  const home = resolve(options.home);
  const archive = resolve(options.archive);
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_UNPACKED_BYTES;
  if (!existsSync(archive)) throw new Error(`${archive} does not exist.`);
  const keepConfig = [...new Set(options.keepConfig ?? [])];
  const keepable = operatorSettings().sort();
  const unknownKeep = keepConfig.filter((name) => !keepable.includes(name));
  if (unknownKeep.length > 0)
    throw new Error(
      `--keep-config ${unknownKeep.join(', ')}: not a setting a restore sets aside; it sets aside ${keepable.join(', ')} (every other valid setting is restored, and paths never are).`,
    );
  const running = existsSync(home) ? runningSupervisors(home) : [];
  if (running.length > 0)
    throw new Error(
      `svc serve is running on ${home} (pid ${running.map((state) => state.pid).join(', ')}); stop it before restoring.`,
    );
  const installed = INSTALLATION_FILES.filter((name) => existsSync(join(home, name)));
  if (installed.length > 0 && !options.force)
    throw new Error(
      `${home} already holds an installation (${installed.join(', ')}); restore into a new directory with --home, or pass --force to replace it.`,
    );
  // The target's own settings, read before anything else is: only its database URL is used.
  const databaseUrl = options.databaseUrl ?? targetDatabaseUrl(home);
  const masterKeyFile = join(home, 'master.key');
  const encrypted = isEncrypted(archive);
  // A crafted key derivation is refused from the header alone, before the passphrase, the home or scrypt.
  if (encrypted) {
    try {
      checkEncryptionHeader(archive);
    } catch (error) {
      throw refused(archive, error);
    }
  }
  // Asked before anything is written: a refusal here leaves the disk as it was.
  const passphrase = encrypted ? await options.passphrase() : null;

  const createdHome = !existsSync(home);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const staging = mkdtempSync(join(home, '.restore-staging-'));
  chmodSync(staging, 0o700);
  let touched = false;
  try {
    let packed = archive;
    if (passphrase !== null) {
      packed = join(staging, 'archive.tar.gz');
      options.onProgress?.({ phase: 'authenticating the archive' });
      try {
        await decryptFile(archive, packed, passphrase, maxBytes, (done, total) =>
          options.onProgress?.({ phase: 'authenticating the archive', done, total }),
        );
      } catch (error) {
        throw refused(archive, error);
      }
    }
    const manifest = await unpack(packed, staging, maxBytes, options.onProgress);
    if (packed !== archive) rmSync(packed);
    const known = migrationNames();
    const unknown = manifest.database.migrations.filter((name) => !known.includes(name));
    if (unknown.length > 0)
      throw new Error(
        `The archive comes from a newer svc (${manifest.svc_version}; its schema has ${unknown.join(', ')}). Install that version or later, then restore.`,
      );
    if (manifest.database.migrations.some((name, i) => known[i] !== name))
      throw refused(
        archive,
        new ArchiveError("its manifest's migrations are not the first migrations of this svc, in order"),
      );
    if (engineOf(databaseUrl) !== manifest.engine)
      throw new Error(
        manifest.engine === 'postgres'
          ? 'The archive holds a PostgreSQL database: pass --database-url postgres://… to restore into (svc never takes the database from the archive).'
          : `The archive holds a SQLite database; ${maskUrl(databaseUrl)} is not one. Pass --database-url sqlite://PATH, or leave it out to use ${home}/svc.db.`,
      );

    const archivedConfig: Record<string, unknown> = manifest.config.member
      ? parseJson(readFileSync(join(staging, CONFIG_MEMBER), 'utf8'), CONFIG_MEMBER)
      : {};
    const { config, dropped, kept } = sanitiseConfig(
      archivedConfig,
      typeof manifest.source?.home === 'string' ? manifest.source.home : '',
      home,
      { keep: keepConfig, current: targetConfig(home) },
    );
    if (options.databaseUrl || databaseUrl !== `sqlite://${home}/svc.db`) config.databaseUrl = databaseUrl;
    let keyBytes: Buffer | null = null;
    if (manifest.master_key.member !== null) {
      // Checked in the staging directory (a file private to us) before it goes anywhere.
      const staged = join(staging, MASTER_KEY_MEMBER);
      chmodSync(staged, 0o600);
      try {
        readKeyFile(staged);
      } catch (error) {
        throw refused(
          archive,
          new ArchiveError(`master.key is not a key file (${(error as Error).message})`),
        );
      }
      keyBytes = readFileSync(staged);
    }

    const testCa = manifest.test_ca?.member
      ? parseTestCa(readFileSync(join(staging, TEST_CA_MEMBER), 'utf8'))
      : null;

    const target = await describeTarget(databaseUrl);
    if (target.holdsData && !options.force)
      throw new Error(
        `${target.location} already holds data; restore into an empty database, or pass --force to replace it.`,
      );

    options.onProgress?.({ phase: 'restoring the database' });
    const dumped = join(staging, manifest.database.member);
    try {
      if (manifest.engine === 'sqlite') {
        const rebuilt = join(staging, 'rebuilt.db');
        await rebuildSqlite(dumped, rebuilt, manifest.database.migrations, manifest.database.row_counts);
        rmSync(dumped);
        const path = sqlitePath(databaseUrl);
        mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
        for (const suffix of ['-wal', '-shm']) rmSync(`${rebuilt}${suffix}`, { force: true });
        for (const suffix of ['-wal', '-shm', '']) rmSync(path + suffix, { force: true });
        moveFile(rebuilt, path);
        chmodSync(path, 0o600);
      } else {
        await loadPostgres(databaseUrl, {
          dump: dumped,
          text: join(staging, 'data.sql'),
          migrations: manifest.database.migrations,
          expectedCounts: manifest.database.row_counts,
          force: options.force,
          env: options.env,
          onProgress: options.onProgress,
        });
      }
    } catch (error) {
      throw refused(archive, error);
    }
    touched = true;
    const db = openDatabase({ url: databaseUrl, quiet: true });
    let migrationsApplied: string[] = [];
    try {
      if (keyBytes) replaceFile(masterKeyFile, keyBytes);
      const configFile = join(home, CONFIG_FILE);
      replaceFile(configFile, Buffer.from(JSON.stringify(config, null, 2) + '\n'));

      if ((await migrationStatus(db)).pending.length > 0) {
        options.onProgress?.({ phase: 'applying migrations' });
        migrationsApplied = await migrateUp(db);
      }
      const restoredCa = await restoreTestCa(home, testCa, db);
      // The archived key must open what the archived database sealed (a backup taken across a key rotation
      // keeps every key it may need; this says so if one is missing all the same).
      let secrets: RestoreResult['secrets'] = null;
      if (keyBytes) {
        const usage = await keyUsage(db, loadSecretBox({ masterKeyFile, masterKey: '' }));
        secrets = {
          readable: Object.values(usage.byKey).reduce((sum, n) => sum + n, 0),
          unreadable: usage.unreadable.map((value) => `${value.table}.${value.column} of ${value.id}`),
        };
      }
      rmSync(staging, { recursive: true, force: true });
      makePrivate(home);
      return {
        home,
        configFile,
        masterKeyFile: keyBytes ? masterKeyFile : null,
        database: db.describe(),
        encrypted,
        manifest,
        migrationsApplied,
        droppedSettings: dropped,
        keptSettings: kept,
        secrets,
        testCa: restoredCa,
      };
    } finally {
      await db.close();
    }
  } catch (error) {
    if (!touched && createdHome) rmSync(home, { recursive: true, force: true });
    if (touched && error instanceof Error)
      error.message += ` The restore stopped part way: restore again with --force once the cause is fixed.`;
    throw error;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** The archived test CA: every part a PEM (or the hex secret) string, or the archive is refused. */
function parseTestCa(text: string): TestCaMaterial {
  const value = parseJson(text, TEST_CA_MEMBER) as unknown as TestCaMaterial;
  const pem = (part: unknown) => typeof part === 'string' && part.startsWith('-----BEGIN ');
  if (
    !pem(value.caCert) ||
    !pem(value.caKey) ||
    !pem(value.server?.cert) ||
    !pem(value.server?.key) ||
    !pem(value.client?.cert) ||
    !pem(value.client?.key) ||
    !pem(value.directoryKey) ||
    !pem(value.bankSigningKey) ||
    typeof value.stateSecret !== 'string' ||
    !/^[0-9a-f]{64}$/.test(value.stateSecret)
  )
    throw new ArchiveError(`${TEST_CA_MEMBER} is not the test CA svc backup writes`);
  return value;
}

/**
 * Test mode's CA into the home: the archive's, which the restored database's consent-bank state and client
 * registrations need; else the home's own; else a new one (an archive of an svc that did not carry it), in
 * which case every test-mode consent link is named: the simulated banks can no longer open their grants.
 */
async function restoreTestCa(
  home: string,
  archived: TestCaMaterial | null,
  db: ReturnType<typeof openDatabase>,
): Promise<RestoreResult['testCa']> {
  const directory = testCaDirectory(home);
  if (archived) {
    writeTestCa(directory, archived);
    return { directory, source: 'archive', relink: [] };
  }
  if (hasTestCa(directory)) return { directory, source: 'kept', relink: [] };
  await ensureTestCa(directory, Date.now());
  const relink = (await db
    .knex('link_grants')
    .join('links', 'links.id', 'link_grants.link_id')
    .where('links.mode', 'test')
    .orderBy('links.id')
    .pluck('links.id')) as string[];
  return { directory, source: 'new', relink };
}

/** The target home's own database URL, if it has a config.json that names one; else its SQLite file. */
function targetDatabaseUrl(home: string): string {
  const fallback = `sqlite://${home}/svc.db`;
  const file = join(home, CONFIG_FILE);
  if (!existsSync(file)) return fallback;
  try {
    const config = JSON.parse(readFileSync(file, 'utf8')) as { databaseUrl?: unknown };
    return typeof config.databaseUrl === 'string' ? config.databaseUrl : fallback;
  } catch {
    return fallback;
  }
}

/** The target installation's own config.json (a restore with --force over one), if it is a JSON object. */
function targetConfig(home: string): Record<string, unknown> | null {
  const file = join(home, CONFIG_FILE);
  if (!existsSync(file)) return null;
  try {
    const config = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    return config && typeof config === 'object' && !Array.isArray(config)
      ? (config as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** The gunzipped archive as a stream, refused once it has given more than `maxBytes`. */
async function* bounded(archive: string, maxBytes: number): AsyncIterable<Buffer> {
  let total = 0;
  for await (const chunk of createReadStream(archive).pipe(createGunzip()) as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes)
      throw new ArchiveError(`it unpacks to more than ${maxBytes} bytes, the limit (--max-size)`);
    yield chunk;
  }
}

/**
 * Two passes over the archive. The first reads only the manifest (it is the last member) and checks that
 * every member is one svc backup writes; the second writes each member into `staging`, refusing one whose
 * size is not the size the manifest declares before a byte of it is written, and checks its SHA-256.
 */
async function unpack(
  archive: string,
  staging: string,
  maxBytes: number,
  onProgress?: (progress: DumpProgress) => void,
): Promise<BackupManifest> {
  let manifest: BackupManifest;
  try {
    let manifestText: string | null = null;
    const seen = new Set<string>();
    await readTar(bounded(archive, maxBytes), async (entry, body) => {
      if (!KNOWN_MEMBERS.has(entry.name))
        throw new ArchiveError(`it holds "${entry.name}", which svc backup does not write`);
      if (seen.has(entry.name)) throw new ArchiveError(`it holds ${entry.name} twice`);
      seen.add(entry.name);
      if (entry.name !== MANIFEST_MEMBER) return;
      if (entry.size > SMALL_MEMBER_MAX) throw new ArchiveError('its manifest.json is too large');
      const parts: Buffer[] = [];
      for await (const chunk of body) parts.push(chunk);
      manifestText = Buffer.concat(parts).toString('utf8');
    });
    if (manifestText === null)
      throw new ArchiveError('it has no manifest.json (not a svc backup, or cut short)');
    manifest = checkManifest(parseJson(manifestText, MANIFEST_MEMBER), maxBytes, staging);

    const unpacked = new Map<string, MemberDigest>();
    await readTar(bounded(archive, maxBytes), async (entry, body) => {
      if (entry.name === MANIFEST_MEMBER) return;
      const expected = manifest.members.find((member) => member.name === entry.name);
      if (!expected) throw new ArchiveError(`${entry.name} is not in the manifest`);
      if (entry.size !== expected.size)
        throw new ArchiveError(
          `${entry.name} is ${entry.size} bytes where the manifest declares ${expected.size}`,
        );
      const digest = await saveMember(entry.name, body, join(staging, entry.name), (done) =>
        entry.size > 64 << 20
          ? onProgress?.({ phase: `unpacking ${entry.name}`, done, total: entry.size })
          : undefined,
      );
      if (digest.size !== expected.size || digest.sha256 !== expected.sha256)
        throw new ArchiveError(`${entry.name} does not match its SHA-256 in the manifest`);
      unpacked.set(entry.name, digest);
    });
    for (const expected of manifest.members)
      if (!unpacked.has(expected.name)) throw new ArchiveError(`${expected.name} is missing`);
  } catch (error) {
    throw refused(archive, error);
  }
  return manifest;
}

/** The manifest's shape, every field a restore reads, checked before it is trusted with anything. */
function checkManifest(value: Record<string, unknown>, maxBytes: number, staging: string): BackupManifest {
  const manifest = value as unknown as BackupManifest;
  if (manifest.format !== ARCHIVE_FORMAT || !Array.isArray(manifest.members))
    throw new ArchiveError('its manifest.json is not that of a svc backup');
  if (manifest.format_version !== ARCHIVE_FORMAT_VERSION)
    throw new ArchiveError(
      `its format version is ${manifest.format_version}; this svc reads version ${ARCHIVE_FORMAT_VERSION}`,
    );
  const names = new Set<string>();
  let total = 0;
  for (const member of manifest.members) {
    if (
      !member ||
      typeof member.name !== 'string' ||
      !KNOWN_MEMBERS.has(member.name) ||
      member.name === MANIFEST_MEMBER ||
      names.has(member.name) ||
      !Number.isSafeInteger(member.size) ||
      member.size < 0 ||
      typeof member.sha256 !== 'string'
    )
      throw new ArchiveError('its manifest.json lists a member svc backup does not write');
    if (member.name !== DATABASE_MEMBERS.sqlite && member.name !== DATABASE_MEMBERS.pg_dump_custom)
      if (member.size > SMALL_MEMBER_MAX) throw new ArchiveError(`its ${member.name} is too large`);
    names.add(member.name);
    total += member.size;
  }
  if (total > maxBytes)
    throw new ArchiveError(`its members add up to ${total} bytes, more than the limit (--max-size)`);
  const free = freeBytes(staging);
  if (free !== null && total > free)
    throw new ArchiveError(`its members add up to ${total} bytes and the data directory has ${free} free`);
  const database = manifest.database;
  const key = manifest.master_key;
  const config = manifest.config;
  if (
    !database ||
    !key ||
    !config ||
    !Array.isArray(database.migrations) ||
    !database.migrations.every((name) => typeof name === 'string') ||
    !database.row_counts ||
    typeof database.row_counts !== 'object' ||
    (manifest.engine !== 'sqlite' && manifest.engine !== 'postgres') ||
    DATABASE_MEMBERS[database.format] !== database.member ||
    (manifest.engine === 'sqlite') !== (database.format === 'sqlite') ||
    (key.member !== null && key.member !== MASTER_KEY_MEMBER) ||
    (config.member !== null && config.member !== CONFIG_MEMBER) ||
    (manifest.test_ca !== undefined &&
      (!manifest.test_ca || (manifest.test_ca.member !== null && manifest.test_ca.member !== TEST_CA_MEMBER)))
  )
    throw new ArchiveError('its manifest.json is not that of a svc backup');
  for (const name of [database.member, key.member, config.member, manifest.test_ca?.member ?? null])
    if (name !== null && !names.has(name))
      throw new ArchiveError(`the manifest names ${name} but lists no checksum for it`);
  return manifest;
}

function freeBytes(directory: string): number | null {
  try {
    const stats = statfsSync(directory);
    return stats.bavail * stats.bsize;
  } catch {
    return null;
  }
}

function refused(archive: string, error: unknown): Error {
  const reason =
    error instanceof ArchiveError
      ? error.message
      : (error as NodeJS.ErrnoException).code?.startsWith('Z_')
        ? `it is not a gzip file, or it is damaged or cut short (${(error as Error).message})`
        : null;
  if (reason === null || /is not a usable svc backup/.test(reason)) return error as Error;
  return new ArchiveError(`${archive} is not a usable svc backup: ${reason}. Nothing was restored.`);
}

function parseJson(text: string, name: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // refused below
  }
  throw new ArchiveError(`${name} in the archive is not a JSON object`);
}

function moveFile(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    writeFileSync(`${to}.restoring`, readFileSync(from), { mode: 0o600 });
    renameSync(`${to}.restoring`, to);
  }
}

/** Writes a private file in one step: a temporary file renamed over the old one. */
function replaceFile(path: string, contents: Buffer): void {
  const temporary = `${path}.${process.pid}.restoring`;
  writeFileSync(temporary, contents, { mode: 0o600, flag: 'w' });
  renameSync(temporary, path);
}
