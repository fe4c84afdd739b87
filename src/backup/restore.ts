import {
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve, isAbsolute } from 'node:path';
import { createGunzip } from 'node:zlib';
import { CONFIG_FILE, maskUrl } from '../config/load-config.js';
import { engineOf, openDatabase } from '../db/database.js';
import { migrateUp, migrationNames, migrationStatus } from '../db/migrations.js';
import {
  describeTarget,
  relocatedDatabaseUrl,
  restoreDatabase,
  rowCounts,
  type DumpProgress,
} from '../db/snapshot.js';
import { makePrivate } from '../install/install.js';
import { runningSupervisors } from '../processes/status.js';
import { loadSecretBox, readKeyFile } from '../secrets/master-key-file.js';
import { keyUsage } from '../secrets/rotate.js';
import {
  ARCHIVE_FORMAT,
  ARCHIVE_FORMAT_VERSION,
  CONFIG_MEMBER,
  DATABASE_MEMBERS,
  MANIFEST_MEMBER,
  MASTER_KEY_MEMBER,
  type BackupManifest,
} from './backup.js';
import { ArchiveError, readTar, saveMember, type MemberDigest } from './tar.js';

export { ArchiveError } from './tar.js';

export interface RestoreOptions {
  archive: string;
  home: string;
  /** Restore the database here rather than where the archived config points. */
  databaseUrl?: string;
  /** Replace an existing installation or a database that holds data. */
  force: boolean;
  env: Record<string, string | undefined>;
  onProgress?: (progress: DumpProgress) => void;
}

export interface RestoreResult {
  home: string;
  configFile: string;
  masterKeyFile: string | null;
  database: string;
  manifest: BackupManifest;
  migrationsApplied: string[];
  /** Stored secrets the restored key opens, and those it does not; null without a key file. */
  secrets: { readable: number; unreadable: string[] } | null;
}

/** What a home holds once svc has installed into it. */
const INSTALLATION_FILES = [CONFIG_FILE, 'master.key', 'svc.db'];
const KNOWN_MEMBERS = new Set([
  MANIFEST_MEMBER,
  CONFIG_MEMBER,
  MASTER_KEY_MEMBER,
  ...Object.values(DATABASE_MEMBERS),
]);

/**
 * Restores an archive of `svc backup` into a home: every member is unpacked into a private directory and
 * checked against the manifest's SHA-256 before anything of the home or the database is touched. Then the
 * database (checked against the manifest's row counts), the master key and config.json, then the migrations
 * this svc has beyond the archive's.
 */
export async function restoreBackup(options: RestoreOptions): Promise<RestoreResult> {
  const home = resolve(options.home);
  const archive = resolve(options.archive);
  if (!existsSync(archive)) throw new Error(`${archive} does not exist.`);
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

  const createdHome = !existsSync(home);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const staging = mkdtempSync(join(home, '.restore-'));
  let touched = false;
  try {
    const manifest = await unpack(archive, staging, options.onProgress);
    const unknown = manifest.database.migrations.filter((name) => !migrationNames().includes(name));
    if (unknown.length > 0)
      throw new Error(
        `The archive comes from a newer svc (${manifest.svc_version}; its schema has ${unknown.join(', ')}). Install that version or later, then restore.`,
      );

    const archivedConfig: Record<string, unknown> = manifest.config.member
      ? parseJson(readFileSync(join(staging, CONFIG_MEMBER), 'utf8'), CONFIG_MEMBER)
      : {};
    const config = movedConfig(archivedConfig, manifest.source.home, home);
    if (options.databaseUrl) config.databaseUrl = options.databaseUrl;
    const databaseUrl =
      typeof config.databaseUrl === 'string' ? config.databaseUrl : `sqlite://${home}/svc.db`;
    if (engineOf(databaseUrl) !== manifest.engine)
      throw new Error(
        manifest.engine === 'postgres'
          ? 'The archive holds a PostgreSQL database and its config.json names none (the URL came from the environment): pass --database-url postgres://… to restore into.'
          : `The archive holds a SQLite database; ${maskUrl(databaseUrl)} is not one. Pass --database-url sqlite://PATH, or leave it out to use ${home}/svc.db.`,
      );
    const masterKeyFile =
      manifest.master_key.member === null
        ? null
        : typeof config.masterKeyFile === 'string'
          ? config.masterKeyFile
          : join(home, 'master.key');
    if (masterKeyFile && existsSync(masterKeyFile) && !options.force)
      throw new Error(`${masterKeyFile} already exists; pass --force to replace it with the archived key.`);
    const target = await describeTarget(databaseUrl);
    if (target.holdsData && !options.force)
      throw new Error(
        `${target.location} already holds data; restore into an empty database, or pass --force to replace it.`,
      );

    options.onProgress?.({ phase: 'restoring the database' });
    // On failure this leaves the target as it was (pg_restore runs in one transaction; the SQLite file is
    // renamed into place whole).
    await restoreDatabase(databaseUrl, join(staging, manifest.database.member), {
      format: manifest.database.format,
      schema: manifest.database.schema,
      force: options.force,
      env: options.env,
      onProgress: options.onProgress,
    });
    touched = true;
    const db = openDatabase({ url: databaseUrl });
    let migrationsApplied: string[] = [];
    try {
      const counts = await rowCounts(db.knex, db.engine);
      const differing = Object.entries(manifest.database.row_counts).filter(
        ([table, n]) => counts[table] !== n,
      );
      if (differing.length > 0)
        throw new Error(
          `The restored database does not hold what the archive recorded (${differing
            .slice(0, 5)
            .map(([table, n]) => `${table}: ${counts[table] ?? 'missing'} rows, expected ${n}`)
            .join('; ')}).`,
        );

      if (masterKeyFile) {
        mkdirSync(dirname(masterKeyFile), { recursive: true, mode: 0o700 });
        replaceFile(masterKeyFile, readFileSync(join(staging, MASTER_KEY_MEMBER)));
        readKeyFile(masterKeyFile);
      }
      const configFile = join(home, CONFIG_FILE);
      replaceFile(configFile, Buffer.from(JSON.stringify(config, null, 2) + '\n'));

      if ((await migrationStatus(db)).pending.length > 0) {
        options.onProgress?.({ phase: 'applying migrations' });
        migrationsApplied = await migrateUp(db);
      }
      // The archived key must open what the archived database sealed (a backup taken across a key rotation
      // keeps every key it may need; this says so if one is missing all the same).
      let secrets: RestoreResult['secrets'] = null;
      if (masterKeyFile) {
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
        masterKeyFile,
        database: db.describe(),
        manifest,
        migrationsApplied,
        secrets,
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

/** Unpacks every member into `staging` and checks it against the manifest. */
async function unpack(
  archive: string,
  staging: string,
  onProgress?: (progress: DumpProgress) => void,
): Promise<BackupManifest> {
  const unpacked = new Map<string, MemberDigest>();
  const gunzip = createGunzip();
  const source = createReadStream(archive).pipe(gunzip);
  try {
    await readTar(source as AsyncIterable<Buffer>, async (entry, body) => {
      if (!KNOWN_MEMBERS.has(entry.name))
        throw new ArchiveError(`it holds "${entry.name}", which svc backup does not write`);
      if (unpacked.has(entry.name)) throw new ArchiveError(`it holds ${entry.name} twice`);
      const digest = await saveMember(entry.name, body, join(staging, entry.name), (done) =>
        entry.size > 64 << 20
          ? onProgress?.({ phase: `unpacking ${entry.name}`, done, total: entry.size })
          : undefined,
      );
      unpacked.set(entry.name, digest);
    });
  } catch (error) {
    throw refused(archive, error);
  }
  if (!unpacked.has(MANIFEST_MEMBER))
    throw refused(archive, new ArchiveError('it has no manifest.json (not a svc backup, or cut short)'));
  const manifest = parseJson(
    readFileSync(join(staging, MANIFEST_MEMBER), 'utf8'),
    MANIFEST_MEMBER,
  ) as unknown as BackupManifest;
  if (manifest.format !== ARCHIVE_FORMAT || !Array.isArray(manifest.members))
    throw refused(archive, new ArchiveError('its manifest.json is not that of a svc backup'));
  if (manifest.format_version !== ARCHIVE_FORMAT_VERSION)
    throw refused(
      archive,
      new ArchiveError(
        `its format version is ${manifest.format_version}; this svc reads version ${ARCHIVE_FORMAT_VERSION}`,
      ),
    );
  for (const expected of manifest.members) {
    const found = unpacked.get(expected.name);
    if (!found) throw refused(archive, new ArchiveError(`${expected.name} is missing`));
    if (found.size !== expected.size || found.sha256 !== expected.sha256)
      throw refused(archive, new ArchiveError(`${expected.name} does not match its SHA-256 in the manifest`));
  }
  for (const name of unpacked.keys()) {
    if (name !== MANIFEST_MEMBER && !manifest.members.some((member) => member.name === name))
      throw refused(archive, new ArchiveError(`${name} is not in the manifest`));
  }
  const named = [manifest.database.member, manifest.master_key.member, manifest.config.member].filter(
    (name): name is string => name !== null,
  );
  for (const name of named)
    if (!manifest.members.some((member) => member.name === name))
      throw refused(archive, new ArchiveError(`the manifest names ${name} but lists no checksum for it`));
  if (DATABASE_MEMBERS[manifest.database.format] !== manifest.database.member)
    throw refused(archive, new ArchiveError('its manifest names an unknown database format'));
  return manifest;
}

function refused(archive: string, error: unknown): Error {
  const reason =
    error instanceof ArchiveError
      ? error.message
      : (error as NodeJS.ErrnoException).code?.startsWith('Z_')
        ? `it is not a gzip file, or it is damaged or cut short (${(error as Error).message})`
        : null;
  if (reason === null) return error as Error;
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

/**
 * The archived config with the paths that lay in the old home moved to the new one (a SQLite database, the
 * key file, a log file); paths elsewhere are kept as they are.
 */
function movedConfig(
  config: Record<string, unknown>,
  oldHome: string,
  newHome: string,
): Record<string, unknown> {
  const moved = structuredClone(config);
  const move = (path: string): string => {
    const inside = relative(oldHome, path);
    return inside && !inside.startsWith('..') && !isAbsolute(inside) ? join(newHome, inside) : path;
  };
  if (typeof moved.databaseUrl === 'string')
    moved.databaseUrl = relocatedDatabaseUrl(moved.databaseUrl, move);
  if (typeof moved.masterKeyFile === 'string') moved.masterKeyFile = move(moved.masterKeyFile);
  const log = moved.log as Record<string, unknown> | undefined;
  if (log && typeof log.file === 'string' && log.file !== '') log.file = move(log.file);
  return moved;
}

/** Writes a private file in one step: a temporary file renamed over the old one. */
function replaceFile(path: string, contents: Buffer): void {
  const temporary = `${path}.${process.pid}.restoring`;
  writeFileSync(temporary, contents, { mode: 0o600, flag: 'w' });
  renameSync(temporary, path);
}
