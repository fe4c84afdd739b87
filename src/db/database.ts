import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { ImmediateSqliteClient } from './sqlite-client.js';
import { runNamed } from './bound-rows.js';
import { isBusyError } from './errors.js';
import type { Engine } from './dialect.js';

// int8 (bigint) arrives as a string by default; our bigints are epoch milliseconds and minor units,
// which fit in a double.
pg.types.setTypeParser(20, (value: string) => Number.parseInt(value, 10));

export type { Engine } from './dialect.js';

export interface Database {
  readonly engine: Engine;
  /** The writer: on SQLite the single writer connection of this process, on Postgres the pool. */
  readonly knex: Knex;
  /** Reads: on SQLite a pool of read connections (WAL lets them run beside the writer). */
  readonly reader: Knex;
  /**
   * Single-statement writes that a crash may lose without harm (rate-limit buckets refill within a minute
   * anyway): on Postgres a small pool whose commits do not wait for the WAL flush, which would otherwise
   * cost a disk sync per statement; on SQLite the writer.
   */
  readonly volatileWriter: Knex;
  /** A write transaction: `BEGIN IMMEDIATE` on SQLite, retried while another process holds the lock. */
  transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T>;
  /** Answers when the database does; throws otherwise. */
  ping(timeoutMs?: number): Promise<void>;
  sizeBytes(): Promise<number>;
  describe(): string;
  close(): Promise<void>;
}

export interface OpenOptions {
  url: string;
  /** Read connections on SQLite (measured +36% on list endpoints with more than one). */
  readPoolSize?: number;
  /** Postgres pool size. */
  poolSize?: number;
  busyTimeoutMs?: number;
  /**
   * Keep knex's own warnings ("Acquire connection error" with a stack) off the terminal: a CLI command
   * reports a connection failure itself, in one line (cli/base-command.ts).
   */
  quiet?: boolean;
}

const SILENT_LOG = { warn() {}, error() {}, debug() {}, deprecate() {} };

export function engineOf(url: string): Engine {
  if (url.startsWith('sqlite:')) return 'sqlite';
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return 'postgres';
  throw new Error(`Unsupported database URL scheme in ${url.split(':')[0]}:; use sqlite:// or postgres://`);
}

/** `sqlite:///abs/path.db`, `sqlite://relative.db` or `sqlite:/abs/path.db`. */
export function sqlitePath(url: string): string {
  return url.replace(/^sqlite:(\/\/)?/, '');
}

export function openDatabase(options: OpenOptions): Database {
  return engineOf(options.url) === 'sqlite' ? openSqlite(options) : openPostgres(options);
}

function openSqlite(options: OpenOptions): Database {
  const file = sqlitePath(options.url);
  mkdirSync(dirname(file), { recursive: true });
  const busyTimeout = options.busyTimeoutMs ?? 5000;
  const pragmas = async (conn: SqliteConnection) => {
    await run(conn, `PRAGMA busy_timeout = ${busyTimeout}`);
    await run(conn, 'PRAGMA journal_mode = WAL');
    await run(conn, 'PRAGMA synchronous = NORMAL');
    await run(conn, 'PRAGMA foreign_keys = ON');
  };
  const make = (max: number) =>
    knexFactory({
      client: ImmediateSqliteClient as unknown as typeof Knex.Client,
      connection: { filename: file },
      useNullAsDefault: true,
      ...(options.quiet ? { log: SILENT_LOG } : {}),
      pool: {
        min: 1,
        max,
        afterCreate: (conn: SqliteConnection, done: (err: Error | null, conn: unknown) => void) => {
          pragmas(conn).then(
            () => done(null, conn),
            (err: Error) => done(err, conn),
          );
        },
      },
    });
  const writer = make(1);
  const reader = make(options.readPoolSize ?? 4);
  return {
    engine: 'sqlite',
    knex: writer,
    reader,
    volatileWriter: writer,
    transaction: (work) => retryBusy(() => writer.transaction(work)),
    ping: (timeoutMs = 2000) =>
      withTimeout(runNamed(reader, 'ping', 'select 1', []), timeoutMs).then(() => undefined),
    async sizeBytes() {
      let total = 0;
      for (const suffix of ['', '-wal', '-shm']) {
        try {
          total += statSync(file + suffix).size;
        } catch {
          // the WAL and shared-memory files exist only while a connection is open
        }
      }
      return total;
    },
    describe: () => `sqlite ${file}`,
    async close() {
      await Promise.all([writer.destroy(), reader.destroy()]);
    },
  };
}

function openPostgres(options: OpenOptions): Database {
  const url = new URL(options.url);
  const schema = url.searchParams.get('schema');
  url.searchParams.delete('schema');
  const make = (
    max: number,
    afterCreate?: (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) => void,
  ) =>
    knexFactory({
      client: 'pg',
      connection: { connectionString: url.toString(), connectionTimeoutMillis: 5000 },
      searchPath: schema ? [schema] : undefined,
      ...(options.quiet ? { log: SILENT_LOG } : {}),
      pool: { min: 0, max, acquireTimeoutMillis: 10_000, ...(afterCreate ? { afterCreate } : {}) },
      acquireConnectionTimeout: 10_000,
    });
  const knex = make(options.poolSize ?? 10);
  const volatileWriter = make(2, (conn, done) => {
    conn.query('SET synchronous_commit = off').then(
      () => done(null, conn),
      (error: Error) => done(error, conn),
    );
  });
  return {
    engine: 'postgres',
    knex,
    reader: knex,
    volatileWriter,
    transaction: (work) => knex.transaction(work),
    ping: (timeoutMs = 2000) =>
      withTimeout(runNamed(knex, 'ping', 'select 1', []), timeoutMs).then(() => undefined),
    async sizeBytes() {
      const result = await knex.raw('select pg_database_size(current_database()) as size');
      return Number(result.rows[0].size);
    },
    describe: () => `postgres ${url.host}${url.pathname}${schema ? ` (schema ${schema})` : ''}`,
    close: async () => {
      await Promise.all([knex.destroy(), volatileWriter.destroy()]);
    },
  };
}

/**
 * Connects once to a Postgres URL as `openDatabase` would (its `schema` parameter becomes the search
 * path) and returns the schema that tables would go to, or null when that schema does not exist. Throws
 * the driver's error when the server cannot be reached or refuses the login. One plain client rather than
 * a knex pool: the pool logs every failed attempt with its stack, which `svc install` reports in a line.
 */
export async function probePostgres(url: string, timeoutMs = 10_000): Promise<string | null> {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema');
  parsed.searchParams.delete('schema');
  const client = new pg.Client({
    connectionString: parsed.toString(),
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  // An error after connecting (the server going away) must not be an uncaught 'error' event.
  client.on('error', () => undefined);
  try {
    await client.connect();
    if (schema) await client.query(`set search_path to ${client.escapeIdentifier(schema)}`);
    const result = await client.query<{ schema: string | null }>('select current_schema() as schema');
    return result.rows[0]?.schema ?? null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

interface SqliteConnection {
  run(sql: string, callback: (err: Error | null) => void): void;
}

function run(conn: SqliteConnection, sql: string): Promise<void> {
  return new Promise((resolve, reject) => conn.run(sql, (err) => (err ? reject(err) : resolve())));
}

/** The lock wait itself is `busy_timeout`; this covers the rare BUSY that SQLite returns without waiting. */
async function retryBusy<T>(attempt: () => Promise<T>, tries = 8): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      if (!isBusyError(error) || i >= tries) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 * 2 ** i + Math.random() * 20));
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
