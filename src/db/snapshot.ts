import { spawn } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import type { Knex } from 'knex';
import { maskUrl } from '../config/load-config.js';
import { engineOf, openDatabase, sqlitePath, type Database } from './database.js';
import type { Engine } from './dialect.js';
import { migrationStatus } from './migrations.js';

/**
 * A consistent copy of a live database, and putting one back: what `svc backup` and `svc restore` need of
 * each engine. SQLite runs in WAL mode, so copying the file (even with its -wal) while `svc serve` writes
 * can catch a half-checkpointed page; `VACUUM INTO` writes a new file from one read transaction instead,
 * beside the writers (readers never block writers in WAL). On Postgres, `pg_dump` runs inside a snapshot
 * this process exports, so the migration level and row counts read here are those of the dump.
 */

export type DumpFormat = 'sqlite' | 'pg_dump_custom';

export interface DumpProgress {
  phase: string;
  done?: number;
  total?: number;
}

export interface DatabaseDump {
  engine: Engine;
  format: DumpFormat;
  /** The dump, in the directory given. */
  file: string;
  /** Postgres: the schema dumped, which the restore recreates under the same name. */
  schema: string | null;
  migrations: string[];
  /** Rows of every table at the moment of the copy, for the restore to check against. */
  rowCounts: Record<string, number>;
  /** Where it came from, without credentials (`Database.describe()`). */
  location: string;
}

export interface ToolOptions {
  /** The environment the client tools run with (PATH, PG* settings); the password is added to it. */
  env: Record<string, string | undefined>;
  onProgress?: (progress: DumpProgress) => void;
}

export function dumpFormatOf(engine: Engine): DumpFormat {
  return engine === 'sqlite' ? 'sqlite' : 'pg_dump_custom';
}

export async function dumpDatabase(
  url: string,
  directory: string,
  options: ToolOptions,
): Promise<DatabaseDump> {
  return engineOf(url) === 'sqlite'
    ? dumpSqlite(url, directory, options)
    : dumpPostgres(url, directory, options);
}

/** A SQLite URL with its file moved by `move` (a restore into another home); other URLs as they are. */
export function relocatedDatabaseUrl(url: string, move: (path: string) => string): string {
  return engineOf(url) === 'sqlite' ? `sqlite://${move(sqlitePath(url))}` : url;
}

/** Rows per table of the current schema. */
export async function rowCounts(knex: Knex, engine: Engine): Promise<Record<string, number>> {
  const names: string[] =
    engine === 'sqlite'
      ? (
          await knex.raw(
            "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name",
          )
        ).map((row: { name: string }) => row.name)
      : (
          await knex.raw(
            "select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name",
          )
        ).rows.map((row: { name: string }) => row.name);
  const counts: Record<string, number> = {};
  for (const name of names) {
    const [row] = await knex(name).count({ n: '*' });
    counts[name] = Number((row as { n: number | string }).n);
  }
  return counts;
}

async function dumpSqlite(url: string, directory: string, options: ToolOptions): Promise<DatabaseDump> {
  const file = join(directory, 'svc.db');
  const source = openDatabase({ url, readPoolSize: 1 });
  const location = source.describe();
  try {
    const total = await source.sizeBytes();
    const report = () => options.onProgress?.({ phase: 'copying the database', done: sizeOf(file), total });
    const timer = setInterval(report, 1000);
    try {
      // One read transaction: the copy is the database as of its start, whatever the writers do meanwhile.
      await source.reader.raw('VACUUM INTO ?', [file]);
    } finally {
      clearInterval(timer);
    }
    report();
  } finally {
    await source.close();
  }
  const copy = openDatabase({ url: `sqlite://${file}`, readPoolSize: 1 });
  let migrations: string[];
  let counts: Record<string, number>;
  try {
    await checkSqlite(copy, file);
    migrations = (await migrationStatus(copy)).applied;
    counts = await rowCounts(copy.knex, 'sqlite');
  } finally {
    // Closing the last connection checkpoints the copy's WAL and removes it: one file goes in the archive.
    await copy.close();
  }
  if (sizeOf(`${file}-wal`) > 0) throw new Error(`${file}-wal was not checkpointed into the copy`);
  rmSync(`${file}-wal`, { force: true });
  rmSync(`${file}-shm`, { force: true });
  return { engine: 'sqlite', format: 'sqlite', file, schema: null, migrations, rowCounts: counts, location };
}

export async function checkSqlite(db: Database, file: string): Promise<void> {
  const rows: Record<string, string>[] = await db.knex.raw('PRAGMA quick_check');
  const problems = rows.map((row) => Object.values(row)[0]).filter((value) => value !== 'ok');
  if (problems.length > 0)
    throw new Error(`${file} fails SQLite's integrity check: ${problems.slice(0, 3).join('; ')}`);
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** What libpq needs, apart: a URL without the password (it may be shown) and the password (it may not). */
export function libpqConnection(url: string): {
  url: string;
  password: string | null;
  schema: string | null;
} {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema');
  parsed.searchParams.delete('schema');
  let password: string | null = parsed.password ? decodeURIComponent(parsed.password) : null;
  parsed.password = '';
  for (const name of [...parsed.searchParams.keys()]) {
    if (name.toLowerCase() === 'password') {
      password = parsed.searchParams.get(name);
      parsed.searchParams.delete(name);
    }
  }
  return { url: parsed.toString(), password, schema };
}

/** The path of a client tool, or a message saying what to install. */
export function findTool(name: 'pg_dump' | 'pg_restore', env: Record<string, string | undefined>): string {
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new Error(
    `${name} is not installed, and svc needs it to ${name === 'pg_dump' ? 'back up' : 'restore'} a PostgreSQL database. Install the client tools (Debian, Ubuntu: sudo apt-get install postgresql-client; their major version must be at least the server's) and run this again.`,
  );
}

/** Runs a client tool with the password in PGPASSWORD (never on its command line), reporting its progress. */
export async function runTool(
  name: 'pg_dump' | 'pg_restore',
  args: string[],
  connection: ReturnType<typeof libpqConnection>,
  options: ToolOptions,
  capture = false,
): Promise<string> {
  const tool = findTool(name, options.env);
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(options.env)) if (value !== undefined) env[key] = value;
  if (connection.password !== null) env.PGPASSWORD = connection.password;
  const child = spawn(tool, args, { env, stdio: ['ignore', capture ? 'pipe' : 'ignore', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stderr = (stderr + text).slice(-16_000);
    for (const line of text.split('\n')) {
      const table = /(?:dumping contents of|processing data for) table "([^"]+)"/.exec(line);
      if (table) options.onProgress?.({ phase: `${name}: table ${table[1]}` });
    }
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  if (code !== 0) {
    const errors = stderr
      .split('\n')
      .filter((line) => /error|fatal|could not|failed|mismatch|aborting/i.test(line))
      .slice(-5)
      .join('\n');
    const shown = maskUrl(errors || stderr.trim().split('\n').slice(-5).join('\n'));
    const withoutPassword = connection.password ? shown.split(connection.password).join('****') : shown;
    throw new Error(`${name} failed (${code ?? signal}):\n${withoutPassword}`);
  }
  return stdout;
}

/** A `-n` pattern that matches this schema name exactly. */
function schemaPattern(schema: string): string {
  return `"${schema.replace(/"/g, '""')}"`;
}

async function dumpPostgres(url: string, directory: string, options: ToolOptions): Promise<DatabaseDump> {
  const connection = libpqConnection(url);
  findTool('pg_dump', options.env);
  const file = join(directory, 'postgres.dump');
  const db = openDatabase({ url, poolSize: 1 });
  try {
    return await db.knex.transaction(async (trx) => {
      await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const snapshot: string = (await trx.raw('select pg_export_snapshot() as id')).rows[0].id;
      const schema: string = connection.schema ?? (await trx.raw('select current_schema() as s')).rows[0].s;
      const migrations = (await trx.schema.hasTable('knex_migrations'))
        ? (await trx('knex_migrations').select('name').orderBy('id')).map((row: { name: string }) => row.name)
        : [];
      const counts = await rowCounts(trx, 'postgres');
      options.onProgress?.({ phase: 'pg_dump: starting' });
      // The exported snapshot lives as long as this transaction: pg_dump sees exactly what was counted above.
      await runTool(
        'pg_dump',
        [
          '--format=custom',
          '--verbose',
          `--schema=${schemaPattern(schema)}`,
          `--snapshot=${snapshot}`,
          `--file=${file}`,
          `--dbname=${connection.url}`,
        ],
        connection,
        options,
      );
      return {
        engine: 'postgres' as const,
        format: 'pg_dump_custom' as const,
        file,
        schema,
        migrations,
        rowCounts: counts,
        location: db.describe(),
      };
    });
  } finally {
    await db.close();
  }
}

export interface RestoreTarget {
  engine: Engine;
  location: string;
  /** Whether the target already holds tables (SQLite: the file exists and is not empty). */
  holdsData: boolean;
  /** Postgres: the schema the URL selects (`public` without `?schema=`). */
  schema: string | null;
}

export async function describeTarget(url: string): Promise<RestoreTarget> {
  if (engineOf(url) === 'sqlite') {
    const file = sqlitePath(url);
    return { engine: 'sqlite', location: `sqlite ${file}`, holdsData: sizeOf(file) > 0, schema: null };
  }
  const schema = libpqConnection(url).schema ?? 'public';
  const db = openDatabase({ url, poolSize: 1 });
  try {
    const result = await db.knex.raw(
      "select count(*) as n from information_schema.tables where table_schema = ? and table_type = 'BASE TABLE'",
      [schema],
    );
    return { engine: 'postgres', location: db.describe(), holdsData: Number(result.rows[0].n) > 0, schema };
  } finally {
    await db.close();
  }
}

export interface RestoreOptions extends ToolOptions {
  format: DumpFormat;
  /** Postgres: the schema the dump holds. */
  schema: string | null;
  /** Replace what the target holds. */
  force: boolean;
}

/**
 * Puts a dump back at `url`. SQLite: the file takes the database's place (its old WAL and shared-memory
 * files removed first: a stale WAL replayed over another file corrupts it). Postgres: `pg_restore` in one
 * transaction, so a failure leaves the target as it was; owners and grants are left to the target's user.
 */
export async function restoreDatabase(url: string, file: string, options: RestoreOptions): Promise<void> {
  const engine = engineOf(url);
  if (dumpFormatOf(engine) !== options.format)
    throw new Error(
      `The archive holds a ${options.format === 'sqlite' ? 'SQLite' : 'PostgreSQL'} database; it cannot be restored into ${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'} (${maskUrl(url)}).`,
    );
  const target = await describeTarget(url);
  if (target.holdsData && !options.force)
    throw new Error(
      `${target.location} already holds data; restore into an empty database, or pass --force to replace it.`,
    );
  if (engine === 'sqlite') {
    const path = sqlitePath(url);
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    for (const suffix of ['-wal', '-shm', '']) rmSync(path + suffix, { force: true });
    try {
      renameSync(file, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
      copyFileSync(file, `${path}.restoring`);
      renameSync(`${path}.restoring`, path);
    }
    chmodSync(path, 0o600);
    const db = openDatabase({ url, readPoolSize: 1 });
    try {
      await checkSqlite(db, path);
    } finally {
      await db.close();
    }
    return;
  }
  if (target.schema !== options.schema)
    throw new Error(
      `The archive holds PostgreSQL schema "${options.schema}", and pg_restore cannot rename a schema: restore into a URL that selects it (${options.schema === 'public' ? 'no ?schema= parameter' : `?schema=${options.schema}`}), in an empty database.`,
    );
  const connection = libpqConnection(url);
  const db = openDatabase({ url, poolSize: 1 });
  let schemaExists: boolean;
  try {
    const result = await db.knex.raw('select count(*) as n from pg_namespace where nspname = ?', [
      options.schema,
    ]);
    schemaExists = Number(result.rows[0].n) > 0;
  } finally {
    await db.close();
  }
  // An existing schema (an operator's, or `public`) is kept: its creation and comment are left out.
  const list = await runTool('pg_restore', ['--list', file], connection, options, true);
  const escaped = options.schema!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const ownEntries = new RegExp(`^\\d+; \\d+ \\d+ (?:SCHEMA - ${escaped}|COMMENT - SCHEMA ${escaped}) `);
  const kept = list
    .split('\n')
    .map((line) => (schemaExists && ownEntries.test(line) ? `;${line}` : line))
    .join('\n');
  const listFile = `${file}.list`;
  await writeFile(listFile, kept, { mode: 0o600 });
  await runTool(
    'pg_restore',
    [
      '--no-owner',
      '--no-privileges',
      '--exit-on-error',
      '--single-transaction',
      '--verbose',
      ...(options.force ? ['--clean', '--if-exists'] : []),
      `--use-list=${listFile}`,
      `--dbname=${connection.url}`,
      file,
    ],
    connection,
    options,
  );
  if (existsSync(listFile)) rmSync(listFile);
}
