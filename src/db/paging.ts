import type { Knex } from 'knex';

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
 * One page of a filtered query, in `order`, and the number of rows the filter matches: counted, unless
 * `total` says it from a cheaper source (src/db/tallies.ts).
 */
export async function fetchPage<T>(
  filtered: () => Knex.QueryBuilder,
  order: Order,
  offset: number,
  limit: number,
  total: () => Promise<number> = () => countRows(filtered()),
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

/**
 * One page found by id in the index first and joined back to `table` for `columns` (a deferred join): the
 * OFFSET walks index entries instead of whole rows, so a deep page costs about what the first one does
 * (bench/movements.ts: the last page of a 10,000-row account within twice the first). `filtered` must select
 * from `table` and its index must cover the filter and `order`.
 */
export function fetchPageByDeferredJoin<T>(
  db: Knex,
  table: string,
  filtered: () => Knex.QueryBuilder,
  order: Order,
  columns: readonly string[],
  window: PageWindow,
): Promise<T[]> {
  const pageIds = filtered().select('id');
  for (const [column, direction] of order) pageIds.orderBy(column, direction);
  pageIds.limit(window.limit).offset(window.offset);
  const rows = db(`${table} as m`)
    .join(pageIds.as('page'), 'm.id', 'page.id')
    .select(columns.map((column) => `m.${column}`));
  for (const [column, direction] of order) rows.orderBy(`m.${column}`, direction);
  return rows as unknown as Promise<T[]>;
}
