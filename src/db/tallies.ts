import type { Knex } from 'knex';
import { runRaw } from './bound-rows.js';

/*
 * Tallies: how many rows of a large table each key has, kept beside the table so that a list's
 * `X-Total-Count` is a sum over a few rows rather than a `count(*)` over millions. Measured before them
 * (bench/growth.ts, 500,000 events on PostgreSQL): the event and delivery lists' p50 grew 30-fold with the
 * table, because every page counted every row its filter matched.
 *
 * A writer inserts the change it makes (+1, -3) in the same transaction as the rows it counts, so a tally is
 * exact whenever the rows are; the count of a key is the sum of its rows. Changes are only ever inserted,
 * never updated: an updated count row would stay locked on Postgres until its transaction commits, so every
 * sync of an organisation (adding to the same key) and every dispatcher would take turns on it, and
 * transactions that add to two keys in different orders could deadlock. Housekeeping folds each key's
 * rows into one every minute (`compactTallies`), so a sum reads about a minute of changes. The `id` column
 * (an auto-increment) lets it fold the oldest rows in batches.
 */

export interface TallyChange {
  /** The key's columns and their values, the same columns for every change of one call. */
  key: Record<string, string>;
  n: number;
}

/** Records each key's change in `table` (columns: the key's and `n`), one row per key, in one statement. */
export async function addToTallies(trx: Knex, table: string, changes: readonly TallyChange[]): Promise<void> {
  const rows = sumByKey(changes).filter((change) => change.n !== 0);
  if (rows.length === 0) return;
  await trx(table).insert(rows.map((change) => ({ ...change.key, n: change.n })));
}

/** The sum of a filtered query over a tally table (`sum(n)`: Postgres answers a string, SQLite a number). */
export async function sumOfTallies(query: Knex.QueryBuilder): Promise<number> {
  const [row] = await query.sum({ total: 'n' });
  return Number((row as { total: number | string | null } | undefined)?.total ?? 0);
}

/**
 * Folds the oldest `limit` rows of `table` into one per key (none for a key whose sum is 0). The delete
 * removes the rows its snapshot sees and says what they held; a change another transaction commits
 * meanwhile is not among them and stays beside the folded row, so no change is lost or counted twice.
 * Returns how many rows it removed: `limit` means there may be more.
 */
export async function compactTallies(
  trx: Knex,
  table: string,
  keyColumns: readonly string[],
  limit: number,
): Promise<number> {
  const oldest = trx(table).select('id').orderBy('id').limit(limit);
  const removed = await deleteReturning<Record<string, string | number>>(
    trx,
    trx(table).whereIn('id', oldest),
    [...keyColumns, 'n'],
  );
  const folded = sumByKey(
    removed.map((row) => ({
      key: Object.fromEntries(keyColumns.map((column) => [column, String(row[column])])),
      n: Number(row.n),
    })),
  ).filter((change) => change.n !== 0);
  for (let i = 0; i < folded.length; i += 500) {
    await trx(table).insert(folded.slice(i, i + 500).map((change) => ({ ...change.key, n: change.n })));
  }
  return removed.length;
}

/**
 * Runs in `trx` a DELETE that knex built, with `RETURNING columns`, on either engine: knex's SQLite client
 * answers a delete with its count only, and a tally needs to know which keys the removed rows had.
 */
export async function deleteReturning<T>(
  trx: Knex,
  query: Knex.QueryBuilder,
  columns: readonly string[],
): Promise<T[]> {
  const { sql, bindings } = query.delete().toSQL();
  return runRaw<T>(trx, `${sql} RETURNING ${columns.map(() => '??').join(', ')}`, [...bindings, ...columns]);
}

/** The changes added up per key, keys in a fixed order. */
function sumByKey(changes: readonly TallyChange[]): TallyChange[] {
  const byKey = new Map<string, TallyChange>();
  for (const change of changes) {
    // One call's changes have the same columns, made in the same order: their values name the key. (As
    // JSON of the entries, the key cost the dispatcher about 2 µs a delivery.)
    const id = Object.values(change.key).join('\u0000');
    const sum = byKey.get(id);
    if (sum) sum.n += change.n;
    else byKey.set(id, { key: change.key, n: change.n });
  }
  return [...byKey.keys()].sort().map((id) => byKey.get(id)!);
}
