import { spawn } from 'node:child_process';
import { accessSync, constants, rmSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Knex } from 'knex';
import { maskUrl } from './database-url.js';
import { engineOf, openDatabase, sqlitePath, type Database } from './database.js';
import type { Engine } from './dialect.js';
import { migrationStatus } from './migrations.js';

/**
 * A consistent copy of a live database: what `svc backup` needs of each engine (putting one back, treating
 * the archive as untrusted, is restore-data.ts). SQLite runs in WAL mode, so copying the file (even with its
 * -wal) while `svc serve` writes can catch a half-checkpointed page; `VACUUM INTO` writes a new file from one read transaction instead,
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
  /** Postgres: the schema dumped (a restore loads its data into whichever schema its URL selects). */
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
