import type { Knex } from 'knex';
import type { Engine } from './dialect.js';

export type ColumnType = 'text' | 'integer' | 'bigint';

export interface BoundRows {
  /** A table expression: `FROM ${rows.sql} AS v`. */
  sql: string;
  bindings: Knex.RawBinding[];
}

/**
 * Rows of values as a table, with a few bound values instead of one per value (a `VALUES` list of 250 rows is
 * 2,250 parameters, whose binding and parsing cost more than the statement; measured twice as slow for a
 * 50-row `UPDATE … FROM` on SQLite). Columns are named and typed in order.
 *
 * - SQLite: one JSON array of arrays, read with `json_each`.
 * - Postgres: one typed array per column, `unnest`ed. Planned with the arrays in hand, Postgres sizes the
 *   `unnest` from them; planned without (a named statement's saved plan), it assumes 10 rows. Either way a
 *   join on a key uses its index once the table is more than a few pages (checked with EXPLAIN, generic plan,
 *   at 20 and 20,000 rows), so such statements may be named. With `json_array_elements` it assumed 100 rows
 *   and scanned the whole table.
 */
export function boundRows(
  engine: Engine,
  columns: readonly (readonly [string, ColumnType])[],
  rows: readonly (readonly Knex.Value[])[],
): BoundRows {
  if (engine === 'postgres') {
    const arrays = columns.map(([, type]) => `CAST(? AS ${type}[])`).join(', ');
    const names = columns.map(([name]) => name).join(', ');
    return {
      sql: `(SELECT * FROM unnest(${arrays}) AS u(${names}))`,
      bindings: columns.map((_, i) => rows.map((row) => row[i] ?? null)) as Knex.RawBinding[],
    };
  }
  // SQLite's ->> already gives JSON numbers as integers and strings as text.
  const list = columns.map(([name], i) => `value ->> ${i} AS ${name}`).join(', ');
  return { sql: `(SELECT ${list} FROM json_each(?))`, bindings: [JSON.stringify(rows)] };
}

/** A list of strings as one bound value, whatever its length: `WHERE x NOT IN ${boundList(…)}`. */
export function boundList(engine: Engine, values: readonly string[]): BoundRows {
  return engine === 'postgres'
    ? { sql: '(SELECT unnest(CAST(? AS text[])))', bindings: [values as string[]] }
    : { sql: '(SELECT value FROM json_each(?))', bindings: [JSON.stringify(values)] };
}

/**
 * Runs a statement under a name: Postgres parses and plans it once per connection instead of every time
 * (planning a claim cost more than running it); SQLite ignores the name. The text of a name must never
 * change, and its plan is made without the bound values. Returns the rows.
 */
export async function runNamed<T>(
  conn: Knex,
  name: string,
  sql: string,
  bindings: readonly Knex.RawBinding[],
): Promise<T[]> {
  const result = await conn.raw(sql, bindings).options({ name });
  return (Array.isArray(result) ? result : result.rows) as T[];
}

/** Runs a statement and returns its rows, whatever shape the engine's driver gives them in. */
export async function runRaw<T>(conn: Knex, sql: string, bindings: readonly Knex.RawBinding[]): Promise<T[]> {
  const result = await conn.raw(sql, bindings);
  return (Array.isArray(result) ? result : result.rows) as T[];
}
