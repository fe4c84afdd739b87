import type { Context } from 'koa';
import { html, type HtmlValue } from '../html/html.js';
import type { ConsoleKit } from './kit.js';
import { layout } from './layout.js';
import { pager, pagerWords, table } from './views.js';

/*
 * The page most sections are: what filters or leads the list (`above`), a table of one page of rows with its
 * caption and headers, the pager that keeps the filters, and what follows it (`below`: a form).
 */

export interface ListPage {
  /** The section's path in the scope (`/links`), for the navigation and the mode switch. */
  section: string;
  title: string;
  above?: HtmlValue;
  caption: string;
  headers: string[];
  rows: HtmlValue[][];
  empty: string;
  /** The list's own address, which the pager's links keep the query of. */
  base: string;
  page: number;
  total: number;
  below?: HtmlValue;
  status?: number;
}

export function sendListPage(ctx: Context, kit: ConsoleKit, list: ListPage): void {
  const words = pagerWords(kit.state(ctx).locale);
  kit.send(
    ctx,
    list.status ?? 200,
    layout(
      kit.pageContext(ctx, list.section),
      list.title,
      html`${list.above}${table(list.caption, list.headers, list.rows, list.empty)}${pager(
        list.base,
        ctx.query,
        list.page,
        list.total,
        words,
      )}${list.below}`,
    ),
  );
}
