import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import type { Database } from './database.js';

/** Compiled migrations sit in dist/migrations, two levels above this file (dist/src/db). */
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));
const TABLE = 'knex_migrations';
/**
 * Each applied migration's kind, written by the migrator itself (like knex's own tables, before any migration
 * runs), so that a build that does not know a migration can still read whether it runs on its schema.
 */
const KINDS_TABLE = 'migration_kinds';

/**
 * `expand`: the previous release runs unchanged on the schema the migration makes (new tables, nullable or
 * defaulted columns, indexes, back-fills it ignores), so it may apply while that release serves. `contract`:
 * the previous release breaks on it (drops, renames, NOT NULL it does not write, changed meanings), so it
 * waits until no node of that release is left. Each file in migrations/ exports its `kind`.
 */
export type MigrationKind = 'expand' | 'contract';

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  /** Applied in the database but unknown to this code: the schema is newer than the code. */
  unknown: string[];
  version: string | null;
  /**
   * The kind of each pending migration (as this build declares it) and of each unknown one (as the build
   * that applied it recorded it; no record counts as contract).
   */
  kinds: Record<string, MigrationKind>;
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

/** A migration module's declared kind; none, or anything else, is contract: the safe default. */
export function kindOf(module: { kind?: unknown }): MigrationKind {
  return module.kind === 'expand' ? 'expand' : 'contract';
}

/** The kinds the migration files of this build declare. */
export async function migrationKinds(
  names: readonly string[] = migrationNames(),
): Promise<Record<string, MigrationKind>> {
  const kinds: Record<string, MigrationKind> = {};
  for (const name of names) kinds[name] = kindOf((await source.getMigration(name)) as { kind?: unknown });
  return kinds;
}

/**
 * The database's migrations against `known`, by default those of the code on disk. A running `svc serve`
 * passes the list it read when it started: a build installed under it replaces dist/ and so the list on disk.
 */
export async function migrationStatus(
  db: Database,
  known: readonly string[] = migrationNames(),
  knownKinds?: Readonly<Record<string, MigrationKind>>,
): Promise<MigrationStatus> {
  const applied = (await db.knex.schema.hasTable(TABLE))
    ? (await db.knex(TABLE).select('name').orderBy('id')).map((row: { name: string }) => row.name)
    : [];
  const appliedSet = new Set(applied);
  const knownSet = new Set(known);
  const pending = known.filter((name) => !appliedSet.has(name));
  const unknown = applied.filter((name) => !knownSet.has(name));
  const ours = knownKinds ?? (await migrationKinds(pending));
  const kinds: Record<string, MigrationKind> = {};
  for (const name of pending) kinds[name] = ours[name] ?? 'contract';
  const recorded = await recordedKinds(db, unknown);
  for (const name of unknown) kinds[name] = recorded.get(name) ?? 'contract';
  return { applied, pending, unknown, version: applied.at(-1) ?? null, kinds };
}

/** The kinds the database records for `names`; a name without a record is left out. */
async function recordedKinds(db: Database, names: string[]): Promise<Map<string, MigrationKind>> {
  if (names.length === 0 || !(await db.knex.schema.hasTable(KINDS_TABLE))) return new Map();
  const rows: { name: string; kind: string }[] = await db.knex(KINDS_TABLE).whereIn('name', names);
  return new Map(rows.map((row) => [row.name, kindOf(row)]));
}

/**
 * Creates the kinds table when absent and records the kinds of `names` (the migrations this build has
 * applied or is about to apply): written before the migrations run, so that a server of an older build
 * that sees one applied finds its kind at the same heartbeat.
 */
async function recordKinds(db: Database, kinds: Readonly<Record<string, MigrationKind>>): Promise<void> {
  if (!(await db.knex.schema.hasTable(KINDS_TABLE))) {
    await db.knex.schema.createTable(KINDS_TABLE, (t) => {
      t.string('name', 255).primary();
      t.string('kind', 16).notNullable();
    });
  }
  const rows = Object.entries(kinds).map(([name, kind]) => ({ name, kind }));
  if (rows.length > 0) await db.knex(KINDS_TABLE).insert(rows).onConflict('name').merge();
}

/**
 * Which pending migrations (in order) may apply now. With no server of another build alive, all of them.
 * Otherwise the expand ones before the first contract one: that build runs on the schema they make, and a
 * later expand one may build on the contract one before it. The rest are deferred.
 */
export function applicableNow(
  pending: readonly string[],
  kinds: Readonly<Record<string, MigrationKind>>,
  otherBuildAlive: boolean,
): { apply: string[]; deferred: string[] } {
  if (!otherBuildAlive) return { apply: [...pending], deferred: [] };
  const firstContract = pending.findIndex((name) => kinds[name] !== 'expand');
  const cut = firstContract < 0 ? pending.length : firstContract;
  return { apply: pending.slice(0, cut), deferred: pending.slice(cut) };
}

/** What a migration run is about to change, for a guard to refuse. */
export type SchemaChange =
  | { kind: 'migrate'; pending: string[]; kinds: Readonly<Record<string, MigrationKind>> }
  | { kind: 'rollback' };

/** Pending migrations a guard holds back: the last ones, in order; `error` is thrown once the rest applied. */
export interface Deferral {
  deferred: string[];
  error(applied: string[]): Error;
}

export interface MigrateOptions {
  /**
   * Runs under the migration lock before anything changes, when something will; throws to refuse, or
   * defers the last pending migrations. `svc migrate` and `svc install` apply only expand migrations under a
   * running server of another build (src/processes/presence.ts).
   */
  guard?: (change: SchemaChange) => Promise<Deferral | null | void>;
}

/**
 * Applies every pending migration, or those before a guard's deferral and then throws its error (nothing
 * applied when it defers them all). Records the kinds of this build's migrations first. On Postgres,
 * concurrent callers wait on an advisory lock.
 */
export async function migrateUp(db: Database, options: MigrateOptions = {}): Promise<string[]> {
  return withMigrationLock(db, async () => {
    const known = migrationNames();
    const kinds = await migrationKinds(known);
    let deferral: Deferral | null = null;
    if (options.guard) {
      const { pending } = await migrationStatus(db, known, kinds);
      if (pending.length > 0) deferral = (await options.guard({ kind: 'migrate', pending, kinds })) ?? null;
      if (deferral && deferral.deferred.length >= pending.length) throw deferral.error([]);
    }
    const held = new Set(deferral?.deferred ?? []);
    const names = known.filter((name) => !held.has(name));
    await recordKinds(db, Object.fromEntries(names.map((name) => [name, kinds[name]!])));
    const limited: Knex.MigratorConfig = {
      ...config,
      migrationSource: { ...source, getMigrations: async () => names },
    };
    const [, applied] = (await db.knex.migrate.latest(limited)) as [number, string[]];
    if (deferral && held.size > 0) throw deferral.error(applied);
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
    await recordKinds(db, await migrationKinds(names));
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

/**
 * The message `svc serve` and its children stop with when the schema does not fit the code, or null when
 * it does: every unknown migration (a newer build's) is expand, so this build runs on its schema, and every
 * pending one is contract, so this build runs before it (its contract step waits for the older nodes to go).
 */
export function schemaMismatch(status: MigrationStatus): string | null {
  const newer = status.unknown.filter((name) => status.kinds[name] !== 'expand');
  if (newer.length > 0) {
    return `The database schema is newer than this version of svc (it has ${newer.join(', ')}). Upgrade svc, or run \`svc migrate --rollback\` with the newer version.`;
  }
  const needed = status.pending.filter((name) => status.kinds[name] === 'expand');
  if (needed.length > 0) {
    const count = needed.length;
    return `The database has ${count} pending migration${count === 1 ? '' : 's'} (${needed.join(', ')}). Run \`svc migrate\` first.`;
  }
  return null;
}
