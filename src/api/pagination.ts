import type { PageWindow } from '../db/paging.js';
import type { JsonSchema } from './route.js';

/** Paging as the wire says it; src/db/paging.ts runs the queries. */
export interface PageQuery {
  page: number;
  per_page: number;
}

/**
 * The deepest page: (page - 1) × 300 stays a safe integer and fits every engine's OFFSET, where 1e20 was a
 * 500 from the database. A billion pages of 300 is more rows than any appliance holds, so nothing that
 * could answer rows is refused.
 */
export const MAX_PAGE = 1_000_000_000;

/** `page` (at least 1, default 1) and `per_page` (1 to 300, default 30), as the spec fixes for every list. */
export const pageQueryProperties = {
  page: {
    type: 'integer',
    minimum: 1,
    maximum: MAX_PAGE,
    default: 1,
    description: `Page number, from 1 to ${MAX_PAGE}`,
  },
  per_page: {
    type: 'integer',
    minimum: 1,
    maximum: 300,
    default: 30,
    description: 'Results per page, 1 to 300',
  },
} as const satisfies Record<string, JsonSchema>;

/** The rows a page asks for. */
export function pageWindow(query: PageQuery): PageWindow {
  return { offset: (query.page - 1) * query.per_page, limit: query.per_page };
}

/**
 * `X-Total-Count` and an RFC 5988 `Link` header with absolute `first`, `prev`, `next` and `last` URLs built
 * from the configured public base URL; every other query parameter is carried over unchanged.
 */
export function paginationHeaders(
  baseUrl: string,
  path: string,
  query: object,
  page: PageQuery,
  total: number,
): Record<string, string> {
  const last = Math.max(1, Math.ceil(total / page.per_page));
  // The other parameters are the same in every link, so they are encoded once; `page` and `per_page` are
  // integers, which encode as themselves, and come last as `params.set` would have put them.
  const others = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (name !== 'page' && name !== 'per_page' && value !== undefined) others.set(name, String(value));
  }
  const prefix = `<${baseUrl}${path}?${others.size > 0 ? `${others.toString()}&` : ''}page=`;
  const link = (rel: string, number: number) => `${prefix}${number}&per_page=${page.per_page}>; rel="${rel}"`;
  const links = [link('first', 1)];
  if (page.page > 1) links.push(link('prev', Math.min(page.page - 1, last)));
  if (page.page < last) links.push(link('next', page.page + 1));
  links.push(link('last', last));
  return { 'X-Total-Count': String(total), Link: links.join(', ') };
}
