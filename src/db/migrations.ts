import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import type { Database } from './database.js';

/** Compiled migrations sit in dist/migrations, two levels above this file (dist/src/db). */
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));
const TABLE = 'knex_migrations';

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  /** Applied in the database but unknown to this code: the schema is newer than the code. */
  unknown: string[];
  version: string | null;
}

export function migrationNames(): string[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((file) => file.endsWith('.js'))
    .map((file) => file.slice(0, -'.js'.length))
    .sort();
}

const source: Knex.MigrationSource<string> = {
  getMigrations: async () => migrationNames(),
  getMigrationName: (name) => name,
  getMigration: async (name) => import(pathToFileURL(`${MIGRATIONS_DIR}${name}.js`).href),
};

const config: Knex.MigratorConfig = { migrationSource: source, tableName: TABLE };

/**
 * The database's migrations against `known`, by default those of the code on disk. A running `svc serve`
 * passes the list it read when it started: a build installed under it replaces dist/ and so the list on disk.
 */
export async function migrationStatus(
  db: Database,
  known: readonly string[] = migrationNames(),
): Promise<MigrationStatus> {
  const applied = (await db.knex.schema.hasTable(TABLE))
    ? (await db.knex(TABLE).select('name').orderBy('id')).map((row: { name: string }) => row.name)
    : [];
  const appliedSet = new Set(applied);
  const knownSet = new Set(known);
  return {
    applied,
    pending: known.filter((name) => !appliedSet.has(name)),
    unknown: applied.filter((name) => !knownSet.has(name)),
    version: applied.at(-1) ?? null,
  };
}

/** What a migration run is about to change, for a guard to refuse. */
export type SchemaChange = { kind: 'migrate'; pending: string[] } | { kind: 'rollback' };

export interface MigrateOptions {
  /**
   * Runs under the migration lock before anything changes, when something will; throws to refuse. `svc
   * migrate` and `svc install` refuse under a running server of another build (src/processes/presence.ts).
   */
  guard?: (change: SchemaChange) => Promise<void>;
}

/** Applies every pending migration. On Postgres, concurrent callers wait on an advisory lock. */
export async function migrateUp(db: Database, options: MigrateOptions = {}): Promise<string[]> {
  return withMigrationLock(db, async () => {
    if (options.guard) {
      const { pending } = await migrationStatus(db);
      if (pending.length > 0) await options.guard({ kind: 'migrate', pending });
    }
    const [, applied] = (await db.knex.migrate.latest(config)) as [number, string[]];
    return applied;
  });
}

/**
 * Applies exactly `names`, which must be the first migrations of this code in order, to an empty database:
 * the schema an archive of that level was taken from (svc restore rebuilds it before it loads the data).
 */
export async function migrateTo(db: Database, names: string[]): Promise<void> {
  const known = migrationNames();
  const misplaced = names.find((name, i) => known[i] !== name);
  if (misplaced !== undefined)
    throw new Error(`${misplaced} is not the next migration of this svc; it cannot rebuild that schema.`);
  const limited: Knex.MigratorConfig = {
    ...config,
    migrationSource: { ...source, getMigrations: async () => [...names] },
  };
  await withMigrationLock(db, async () => {
    await db.knex.migrate.latest(limited);
  });
}

/** Reverts the last batch of migrations. */
export async function migrateRollback(db: Database, options: MigrateOptions = {}): Promise<string[]> {
  return withMigrationLock(db, async () => {
    if (options.guard && (await migrationStatus(db)).applied.length > 0)
      await options.guard({ kind: 'rollback' });
    const [, reverted] = (await db.knex.migrate.rollback(config)) as [number, string[]];
    return reverted;
  });
}

/**
 * knex's own lock row survives a `kill -9` of the migrating process and then blocks every later run, so on
 * Postgres we hold a session advisory lock on a dedicated connection instead (released by the server when
 * the connection dies) and clear knex's row under it. SQLite needs neither: DDL runs under `BEGIN IMMEDIATE`.
 */
async function withMigrationLock<T>(db: Database, work: () => Promise<T>): Promise<T> {
  if (db.engine !== 'postgres') {
    if (await db.knex.schema.hasTable(`${TABLE}_lock`)) await db.knex.migrate.forceFreeMigrationsLock(config);
    return work();
  }
  const client = (await db.knex.client.acquireConnection()) as { query(sql: string): Promise<unknown> };
  try {
    await client.query("select pg_advisory_lock(hashtext(current_schema() || '.svc_migrate'))");
    try {
      if (await db.knex.schema.hasTable(`${TABLE}_lock`))
        await db.knex.migrate.forceFreeMigrationsLock(config);
      return await work();
    } finally {
      await client.query("select pg_advisory_unlock(hashtext(current_schema() || '.svc_migrate'))");
    }
  } finally {
    await db.knex.client.releaseConnection(client);
  }
}

/** The message `svc serve` and its children stop with when the schema does not match the code. */
export function schemaMismatch(status: MigrationStatus): string | null {
  if (status.unknown.length > 0) {
    return `The database schema is newer than this version of svc (it has ${status.unknown.join(', ')}). Upgrade svc, or run \`svc migrate --rollback\` with the newer version.`;
  }
  if (status.pending.length > 0) {
    const count = status.pending.length;
    return `The database has ${count} pending migration${count === 1 ? '' : 's'} (${status.pending.join(', ')}). Run \`svc migrate\` first.`;
  }
  return null;
}
