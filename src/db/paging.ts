import type { Knex } from 'knex';
import { runNamed } from './bound-rows.js';

/**
 * The paging queries every list runs, on either engine. What a page is on the wire (`page`, `per_page`, the
 * `Link` and `X-Total-Count` headers) is the HTTP frame's business (src/api/pagination.ts); here a page is
 * rows `offset` to `offset + limit` of a filtered query in an order, and the number of rows the filter
 * matches.
 */
export interface PageWindow {
  offset: number;
  limit: number;
}

export interface Page<T> {
  rows: T[];
  total: number;
}

export type Order = [column: string, direction: 'asc' | 'desc'][];
export const NEWEST_FIRST: Order = [
  ['created_at', 'desc'],
  ['id', 'desc'],
];

/**
 * One page of a filtered query, in `order`, and the number of rows the filter matches: counted (whatever
 * columns the query selects for the page), unless `total` says it from a cheaper source (src/db/tallies.ts).
 */
export async function fetchPage<T>(
  filtered: () => Knex.QueryBuilder,
  order: Order,
  offset: number,
  limit: number,
  total: () => Promise<number> = () => countRows(filtered().clearSelect()),
): Promise<Page<T>> {
  const page = filtered();
  for (const [column, direction] of order) page.orderBy(column, direction);
  const [rows, count] = await Promise.all([page.offset(offset).limit(limit), total()]);
  return { rows: rows as T[], total: count };
}

/** The number of rows a query matches (`count(*)`; Postgres answers it as a string, SQLite as a number). */
export async function countRows(query: Knex.QueryBuilder): Promise<number> {
  const [row] = await query.count({ n: '*' });
  return Number((row as { n: number | string }).n);
}

/** A filter written as SQL: `sql` with a `?` for each of `bindings`, e.g. `account_id = ? AND status = ?`. */
export interface SqlFilter {
  sql: string;
  bindings: Knex.RawBinding[];
}

/** Statement texts built so far and their names: a name stands for one text, and each shape is built once. */
const named = new Map<string, string>();

function nameFor(sql: string): string {
  let name = named.get(sql);
  if (!name) {
    name = `svc_page_${named.size + 1}`;
    named.set(sql, name);
  }
  return name;
}

/**
 * One page found by id in the index first and joined back to `table` for `columns` (a deferred join): the
 * OFFSET walks index entries instead of whole rows, so a deep page costs about what the first one does
 * (bench/movements.ts: the last page of a 10,000-row account within twice the first). The index of `table`
 * must cover `filter` and `order`.
 *
 * The text depends on the filter's shape only (its values are bound, LIMIT and OFFSET too), so it is built
 * once per shape and run as a named statement (`runNamed`): building it with knex's query builder on every
 * request cost about 35 µs of the movement list's CPU, more than the rest of the stack's own work.
 */
export function fetchPageByDeferredJoin<T>(
  db: Knex,
  table: string,
  filter: SqlFilter,
  order: Order,
  columns: readonly string[],
  window: PageWindow,
): Promise<T[]> {
  const key = `${table} ${filter.sql} ${order.flat().join(' ')} ${columns.join(',')}`;
  let sql = pageTexts.get(key);
  if (!sql) {
    const by = (prefix: string) => order.map(([column, direction]) => `${prefix}${column} ${direction}`);
    sql =
      `SELECT ${columns.map((column) => `m.${column}`).join(', ')} FROM ${table} AS m ` +
      `INNER JOIN (SELECT id FROM ${table} WHERE ${filter.sql} ORDER BY ${by('').join(', ')} ` +
      `LIMIT ? OFFSET ?) AS page ON m.id = page.id ORDER BY ${by('m.').join(', ')}`;
    pageTexts.set(key, sql);
  }
  return runNamed<T>(db, nameFor(sql), sql, [...filter.bindings, window.limit, window.offset]);
}

const pageTexts = new Map<string, string>();

/** The number of rows of `table` that `filter` matches, as a named statement like the page's. */
export async function countWhere(db: Knex, table: string, filter: SqlFilter): Promise<number> {
  const sql = `SELECT count(*) AS n FROM ${table} WHERE ${filter.sql}`;
  const [row] = await runNamed<{ n: number | string }>(db, nameFor(sql), sql, filter.bindings);
  return Number(row!.n);
}
