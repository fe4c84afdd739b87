import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createWriteStream } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { Config } from '../config/defaults.js';
import { hasTestCa, readTestCa, testCaDirectory } from '../consent-bank/test-ca.js';
import { CONFIG_FILE } from '../config/load-config.js';
import { dumpDatabase, type DatabaseDump, type DumpFormat, type DumpProgress } from '../db/snapshot.js';
import type { Engine } from '../db/dialect.js';
import { readKeyFile, type MasterKeyFileContents } from '../secrets/master-key-file.js';
import { encryptingStream, type ScryptParameters } from './encryption.js';
import { TarWriter, type MemberDigest } from './tar.js';

export const ARCHIVE_FORMAT = 'svc-backup';
export const ARCHIVE_FORMAT_VERSION = 1;
export const MANIFEST_MEMBER = 'manifest.json';
export const CONFIG_MEMBER = 'config.json';
export const MASTER_KEY_MEMBER = 'master.key';
/** The simulated consent banks' test CA (`<home>/consent-bank/`), as one JSON object of its PEM files. */
export const TEST_CA_MEMBER = 'consent-bank.json';
export const DATABASE_MEMBERS: Record<DumpFormat, string> = {
  sqlite: 'svc.db',
  pg_dump_custom: 'postgres.dump',
};

/** What an archive holds, written as its last member (`tar -xzOf FILE manifest.json` prints it alone). */
export interface BackupManifest {
  format: typeof ARCHIVE_FORMAT;
  format_version: typeof ARCHIVE_FORMAT_VERSION;
  svc_version: string;
  created_at: string;
  engine: Engine;
  /** Where the backup was taken: the data directory, and the database without credentials. */
  source: { home: string; database: string };
  database: {
    member: string;
    format: DumpFormat;
    /** Postgres: the schema dumped. */
    schema: string | null;
    /** The last migration applied, and all of them, at the moment of the copy. */
    schema_version: string | null;
    migrations: string[];
    /** Rows per table at the moment of the copy; a restore checks the copy it makes against them. */
    row_counts: Record<string, number>;
  };
  /** `environment`: the key came from SVC_MASTER_KEY and is not in the archive. */
  master_key: {
    member: string | null;
    source: 'file' | 'environment';
    active: string | null;
    key_ids: string[];
  };
  config: { member: string | null };
  /**
   * Test mode's CA and keys (`<home>/consent-bank/`): the appliance's client certificate registered with the
   * simulated banks, and the secret their grants and tokens are sealed with in the database. Absent from
   * archives made before svc carried it (a restore then makes a new CA and says what that costs).
   */
  test_ca?: { member: string | null };
  /** Every other member, with its size and SHA-256. */
  members: MemberDigest[];
}

export type BackupProgress = DumpProgress;

export interface BackupOptions {
  config: Readonly<Config>;
  /** The archive to write; it must not exist yet. */
  out: string;
  /** Encrypt the archive with a key derived from this passphrase (encryption.ts); null: a plain .tar.gz. */
  passphrase: string | null;
  /** The key derivation's cost (tests lower it); the default otherwise. */
  scrypt?: ScryptParameters;
  svcVersion: string;
  env: Record<string, string | undefined>;
  now: () => Date;
  onProgress?: (progress: BackupProgress) => void;
  /** Told the private working directory (the database copy, the archive being written), to remove it if interrupted. */
  onStaging?: (directory: string) => void;
}

export interface BackupResult {
  file: string;
  bytes: number;
  encrypted: boolean;
  manifest: BackupManifest;
}

export function defaultArchiveName(now: Date, encrypted: boolean): string {
  return `svc-backup-${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}.tar.gz${encrypted ? '.enc' : ''}`;
}

/**
 * Where an archive goes without --out: `<home>/backups`, private to its owner (0700, tightened if it was
 * looser), never the current directory, which may be a git checkout whose `git add -A` would commit the key.
 */
export function defaultBackupDirectory(home: string): string {
  const directory = join(home, 'backups');
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  chmodSync(directory, 0o700);
  return directory;
}

/**
 * Writes one gzipped tar holding a consistent copy of the live database, config.json and the master key file,
 * then the manifest. The archive is written beside its final name and renamed into place once complete and
 * synced, so a file with the final name is always whole; it is private to its owner (0600) from creation.
 */
export async function createBackup(options: BackupOptions): Promise<BackupResult> {
  const { config } = options;
  const out = resolve(options.out);
  if (existsSync(out)) throw new Error(`${out} already exists; choose another --out.`);
  if (!existsSync(dirname(out))) throw new Error(`${dirname(out)} does not exist.`);
  const keyBefore = config.masterKey === '' ? readKeyFile(config.masterKeyFile) : null;
  const configFile = join(config.home, CONFIG_FILE);
  const configBytes = existsSync(configFile) ? readFileSync(configFile) : null;
  // Without it a restored consent link of test mode is `active` and cannot sync: its grant at the simulated
  // bank is sealed with this CA's state secret, and the bank knows the appliance by this client certificate.
  const caDirectory = testCaDirectory(config.home);
  const testCa = hasTestCa(caDirectory)
    ? Buffer.from(JSON.stringify(readTestCa(caDirectory), null, 2) + '\n')
    : null;

  // Beside the archive, not in /tmp: the copy is as large as the database, and /tmp is often a small tmpfs.
  const staging = mkdtempSync(join(dirname(out), `.${basename(out)}.`));
  options.onStaging?.(staging);
  const partial = join(staging, 'archive.tar.gz');
  try {
    const dump = await dumpDatabase(config.databaseUrl, staging, {
      env: options.env,
      onProgress: options.onProgress,
    });
    // Read again after the copy, and kept together with the first read: a rotation during the copy added a
    // key the copy may use, and a retirement may have removed one it still needs.
    const masterKey = keyBefore ? mergeKeyFiles(keyBefore, readKeyFile(config.masterKeyFile)) : null;
    const manifest = await writeArchive(partial, dump, configBytes, masterKey, testCa, options);
    renameSync(partial, out);
    return { file: out, bytes: statSync(out).size, encrypted: options.passphrase !== null, manifest };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function mergeKeyFiles(before: MasterKeyFileContents, after: MasterKeyFileContents): MasterKeyFileContents {
  const ids = new Set(after.keys.map((key) => key.id));
  return { active: after.active, keys: [...before.keys.filter((key) => !ids.has(key.id)), ...after.keys] };
}

async function writeArchive(
  path: string,
  dump: DatabaseDump,
  configBytes: Buffer | null,
  masterKey: MasterKeyFileContents | null,
  testCa: Buffer | null,
  options: BackupOptions,
): Promise<BackupManifest> {
  const fd = openSync(path, 'wx', 0o600);
  try {
    const file = createWriteStream('', { fd, autoClose: false });
    const gzip = createGzip({ level: 6 });
    if (options.passphrase !== null) {
      const encrypt = await encryptingStream(options.passphrase, options.scrypt);
      gzip.pipe(encrypt).pipe(file);
    } else gzip.pipe(file);
    const tar = new TarWriter(gzip, Math.floor(options.now().getTime() / 1000));
    const members: MemberDigest[] = [];
    if (configBytes) members.push(await tar.addBuffer(CONFIG_MEMBER, configBytes));
    if (masterKey)
      members.push(
        await tar.addBuffer(MASTER_KEY_MEMBER, Buffer.from(JSON.stringify(masterKey, null, 2) + '\n')),
      );
    if (testCa) members.push(await tar.addBuffer(TEST_CA_MEMBER, testCa));
    const member = DATABASE_MEMBERS[dump.format];
    const size = statSync(dump.file).size;
    members.push(
      await tar.addFile(member, dump.file, size, (done) =>
        options.onProgress?.({ phase: 'writing the archive', done, total: size }),
      ),
    );
    const manifest: BackupManifest = {
      format: ARCHIVE_FORMAT,
      format_version: ARCHIVE_FORMAT_VERSION,
      svc_version: options.svcVersion,
      created_at: options.now().toISOString(),
      engine: dump.engine,
      source: { home: options.config.home, database: dump.location },
      database: {
        member,
        format: dump.format,
        schema: dump.schema,
        schema_version: dump.migrations.at(-1) ?? null,
        migrations: dump.migrations,
        row_counts: dump.rowCounts,
      },
      master_key: masterKey
        ? {
            member: MASTER_KEY_MEMBER,
            source: 'file',
            active: masterKey.active,
            key_ids: masterKey.keys.map((key) => key.id),
          }
        : { member: null, source: 'environment', active: null, key_ids: [] },
      config: { member: configBytes ? CONFIG_MEMBER : null },
      test_ca: { member: testCa ? TEST_CA_MEMBER : null },
      members,
    };
    await tar.addBuffer(MANIFEST_MEMBER, Buffer.from(JSON.stringify(manifest, null, 2) + '\n'));
    await tar.finish();
    gzip.end();
    await finished(file);
    fsyncSync(fd);
    return manifest;
  } finally {
    closeSync(fd);
  }
}
