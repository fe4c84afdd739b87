import type { Knex } from 'knex';
import type { Database } from './database.js';
import { runNamed, runRaw } from './bound-rows.js';

export interface ClaimOptions {
  table: string;
  /** Who holds the lease (process and worker), so a finisher can check the lease is still theirs. */
  owner: string;
  now: number;
  leaseMs: number;
  /** The SQL condition of a row that may be claimed, with `?` bindings; it must cover expired leases. */
  where: string;
  bindings: Knex.RawBinding[];
  orderBy: string;
  /** Extra SET assignments (e.g. `attempts = attempts + 1`). */
  set?: string;
  /** What to return of the claimed row (default all its columns; scalar subqueries on it are allowed). */
  returning?: string;
  /**
   * Claim from the first `window` claimable rows by `orderBy` the one `rank` puts first (an SQL expression
   * over the row as `head`, smaller first; ties by `orderBy`). Bounded: however many rows are due, a claim
   * ranks at most `window`.
   */
  prefer?: { window: number; rank: string };
}

/**
 * `id` among the rows `select` finds, locking them. Postgres skips rows other claimers have locked, and gets
 * the ids as an array: with `id IN (subquery)` it planned a hash join over a sequential scan of the whole
 * table (every delivery ever made, for the dispatcher), where `= ANY(ARRAY(…))` looks each id up by its key.
 */
function claimedIds(db: Database, select: string): string {
  return db.engine === 'postgres' ? `id = ANY(ARRAY(${select} FOR UPDATE SKIP LOCKED))` : `id IN (${select})`;
}

/**
 * Claims one due row with a lease in a single statement. Postgres skips rows other claimers have locked
 * (`FOR UPDATE SKIP LOCKED`), so claimers never wait on each other; SQLite has one writer at a time, so
 * one `UPDATE … RETURNING` is already atomic.
 */
export async function claimOne<T>(db: Database, options: ClaimOptions): Promise<T | null> {
  const lock = db.engine === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '';
  const due = (columns: string) =>
    `SELECT ${columns} FROM ${options.table} WHERE ${options.where} ORDER BY ${options.orderBy}`;
  const pick = options.prefer
    ? `SELECT id FROM (${due('*')} LIMIT ? ${lock}) AS head ORDER BY ${options.prefer.rank}, ${options.orderBy} LIMIT 1`
    : `${due('id')} LIMIT 1 ${lock}`;
  const sql = `UPDATE ${options.table} SET locked_by = ?, locked_until = ?${options.set ? `, ${options.set}` : ''}
    WHERE id = (${pick})
    RETURNING ${options.returning ?? '*'}`;
  const bindings = [
    options.owner,
    options.now + options.leaseMs,
    ...options.bindings,
    ...(options.prefer ? [options.prefer.window] : []),
  ];
  const run = (conn: Knex) => conn.raw(sql, bindings);
  const result = db.engine === 'postgres' ? await run(db.knex) : await db.transaction((trx) => run(trx));
  const rows = (Array.isArray(result) ? result : result.rows) as T[];
  return rows[0] ?? null;
}

/**
 * Claims up to `limit` due rows with one lease in a single statement, for workers that take work in batches
 * (the webhook dispatcher: one write per batch instead of one per row is what keeps SQLite's single writer
 * from being the bottleneck). Same locking as `claimOne`; the rows come back in no particular order.
 * `returning` names what is wanted back (default all columns; scalar subqueries on the claimed row are
 * allowed): turning rows into objects is not free on SQLite. `within` runs the claim in the caller's write
 * transaction (from `db.transaction`), so that other writes can share its commit.
 */
export async function claimBatch<T>(
  db: Database,
  options: ClaimOptions & {
    limit: number;
    within?: Knex.Transaction;
    /** A name for a claim whose text never changes, so Postgres keeps it prepared (see `runNamed`). */
    name?: string;
  },
): Promise<T[]> {
  const sql = `UPDATE ${options.table} SET locked_by = ?, locked_until = ?${options.set ? `, ${options.set}` : ''}
    WHERE ${claimedIds(db, `SELECT id FROM ${options.table} WHERE ${options.where} ORDER BY ${options.orderBy} LIMIT ?`)}
    RETURNING ${options.returning ?? '*'}`;
  const bindings = [options.owner, options.now + options.leaseMs, ...options.bindings, options.limit];
  const run = (conn: Knex) =>
    options.name ? runNamed<T>(conn, options.name, sql, bindings) : runRaw<T>(conn, sql, bindings);
  if (options.within) return run(options.within);
  return db.engine === 'postgres' ? run(db.knex) : db.transaction((trx) => run(trx));
}
