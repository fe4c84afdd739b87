import { AsyncLocalStorage } from 'node:async_hooks';
import type { Locale } from '../html/locale.js';
import { html, join, type Html, type HtmlValue } from '../html/html.js';
import { consoleMessage } from './messages.js';
import { MAX_PAGE, pageQueryProperties, pageWindow as rowsOfPage } from '../api/pagination.js';

/*
 * Pieces every console page is made of: tables with a caption and column headers, a pager like the API's
 * (`page`, 30 rows, never an unbounded list), and small forms that POST with the session's CSRF token.
 */

/** The API's default page size: a console page shows as many rows as a list call answers. */
export const PER_PAGE = pageQueryProperties.per_page.default;

/**
 * `?page=` as the API's window of PER_PAGE rows (api/pagination.ts), within the API's bounds; a bad or
 * absurd page is the first rather than an error, as a person typed or kept it.
 */
export function pageWindow(query: Record<string, unknown>): { page: number; offset: number; limit: number } {
  // Decimal digits only: `Number()` alone would also read `0x10`, `1e2` and ` 1`.
  const raw = typeof query.page === 'string' && /^[0-9]{1,10}$/.test(query.page) ? Number(query.page) : 1;
  const page = raw >= 1 && raw <= MAX_PAGE ? raw : 1;
  return { page, ...rowsOfPage({ page, per_page: PER_PAGE }) };
}

/**
 * A table; cells are text or markup (`html`). Each cell carries its column's header as `data-label`: on a
 * phone the stylesheet stacks a row into label/value lines, as the header row no longer fits beside it
 * (console.css).
 */
export function table(caption: string, headers: string[], rows: HtmlValue[][], empty: string): Html {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="${caption}">
<table>
<caption>${caption}</caption>
<thead><tr>${headers.map((header) => html`<th scope="col">${header}</th>`)}</tr></thead>
<tbody>
${join(
  rows.map(
    (cells) =>
      html`<tr>${cells.map((cell, column) => html`<td data-label="${headers[column] ?? ''}">${cell}</td>`)}</tr>`,
  ),
  '\n',
)}
</tbody>
</table>
</div>`;
}

/** Previous and next links, keeping the other query parameters, and where this page stands. */
export function pager(
  path: string,
  query: Record<string, unknown>,
  page: number,
  total: number,
  words: { previous: string; next: string; of: (from: number, to: number, total: number) => string },
): Html | null {
  if (total === 0) return null;
  const last = Math.max(1, Math.ceil(total / PER_PAGE));
  const link = (target: number, label: string, rel: string) => {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query))
      if (typeof value === 'string' && key !== 'page') params.set(key, value);
    params.set('page', String(target));
    return html`<a href="${`${path}?${params.toString()}`}" rel="${rel}">${label}</a>`;
  };
  const from = (page - 1) * PER_PAGE + 1;
  const to = Math.min(total, page * PER_PAGE);
  return html`<nav class="pager" aria-label="${words.of(from, to, total)}">
${page > 1 && link(page - 1, words.previous, 'prev')}
<span>${words.of(Math.min(from, total), to, total)}</span>
${page < last && link(page + 1, words.next, 'next')}
</nav>`;
}

/** The session's CSRF token, which every form that POSTs carries. */
export function csrfField(csrf: string): Html {
  return html`<input type="hidden" name="_csrf" value="${csrf}">`;
}

/** A secret shown once, with a copy button (console.js; without JavaScript, select and copy it by hand). */
export function secretOnce(label: string, secret: string, warning: string, copy: string): Html {
  return html`<div class="secret-once" role="status">
<p><strong>${label}</strong></p>
<p class="secret-row"><code id="secret-value">${secret}</code> <button type="button" class="copy" data-copy="secret-value" hidden>${copy}</button></p>
<p>${warning}</p>
</div>`;
}

/** The pager's words in a language. */
export function pagerWords(locale: Locale) {
  return {
    previous: consoleMessage(locale, 'pager.previous'),
    next: consoleMessage(locale, 'pager.next'),
    of: (from: number, to: number, total: number) =>
      consoleMessage(locale, 'pager.of', { from: String(from), to: String(to), total: String(total) }),
  };
}

/** Who reads a page: its language and the operator's time zone (`console.timeZone`). */
export interface Reader {
  locale: Locale;
  zone: string;
}

const DEFAULT_READER: Reader = { locale: 'es', zone: 'America/Santiago' };

/*
 * The reader of the page being rendered. Times are formatted in some fifty places across the console's
 * pages, each deep in a page's table or sentence; the request's reader travels with the request
 * (AsyncLocalStorage, set once by the console's router for each request) rather than through every page
 * function's arguments.
 */
const currentReader = new AsyncLocalStorage<Reader>();

/** Runs `render` (a request's handling) with `reader` as the reader of every time it formats. */
export function readingAs<T>(reader: Reader, render: () => T): T {
  return currentReader.run(reader, render);
}

const timeFormats = new Map<string, Intl.DateTimeFormat>();

/**
 * An instant as a person reads it in `reader`'s zone and language: `29-11-2026 07:00` in Chilean Spanish
 * (day first, dashes, 24 hours, as Chilean banks print a movement), `Nov 29, 2026, 7:00 AM` in American
 * English; with seconds when `seconds`. '' for none or an unreadable time.
 */
export function timeText(iso: string | null | undefined, reader: Reader, seconds = false): string {
  if (!iso) return '';
  const instant = Date.parse(iso);
  if (Number.isNaN(instant)) return '';
  const key = `${reader.locale}:${reader.zone}:${seconds}`;
  let format = timeFormats.get(key);
  if (!format) {
    format = new Intl.DateTimeFormat(reader.locale === 'es' ? 'es-CL' : 'en-US', {
      year: 'numeric',
      month: reader.locale === 'es' ? '2-digit' : 'short',
      day: reader.locale === 'es' ? '2-digit' : 'numeric',
      hour: reader.locale === 'es' ? '2-digit' : 'numeric',
      minute: '2-digit',
      ...(seconds ? { second: '2-digit' as const } : {}),
      hourCycle: reader.locale === 'es' ? 'h23' : 'h12',
      timeZone: reader.zone,
    });
    timeFormats.set(key, format);
  }
  const text = format.format(instant);
  // es-CL puts a comma between the date and the time; Chilean statements print `29-11-2026 07:00`.
  return reader.locale === 'es' ? text.replace(', ', ' ') : text;
}

/** A stored time to the minute for the page being rendered, in its reader's zone and language; '' for none. */
export const atMinute = (iso: string | null | undefined): string =>
  timeText(iso, currentReader.getStore() ?? DEFAULT_READER);

/** The same to the second, where events follow each other closely. */
export const atSecond = (iso: string): string =>
  timeText(iso, currentReader.getStore() ?? DEFAULT_READER, true);

/** A time to the minute, or '-' for none. */
export const when = (iso: string | null | undefined): string => atMinute(iso) || '-';

/** A value of a table's cell as text: '-' for none. */
export const cellText = (value: unknown): string =>
  value === null || value === undefined ? '-' : String(value);

/** A query parameter given once, as a string; '' when it is missing or repeated. */
export const queryText = (query: Record<string, unknown>, name: string): string =>
  typeof query[name] === 'string' ? query[name] : '';

/** Boolean attributes, for a template's place between attributes (`<option${chosen && SELECTED}>`). */
export const SELECTED = html` selected`;
export const CHECKED = html` checked`;
/** A form's part in red: it disables or deletes something. */
export const DANGER = html` class="danger"`;

/** A page's facts as a term list; values are text or markup. */
export const factsHtml = (facts: readonly (readonly [term: string, value: HtmlValue])[]): Html =>
  html`<dl class="facts">${facts.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>`;

/**
 * A list filter's choice: "any" (the empty value) first, then each `[value, label]`, the current one selected.
 */
export function filterSelect(
  field: { id: string; name: string; any: string },
  options: readonly (readonly [value: string, label: string])[],
  selected: string | undefined,
): Html {
  const choices = options.map(
    ([value, label]) => html`<option value="${value}"${value === selected && SELECTED}>${label}</option>`,
  );
  return html`<select id="${field.id}" name="${field.name}"><option value="">${field.any}</option>${choices}</select>`;
}

/** What a change did, or why it was refused, above the page it changed. */
export const noticeHtml = (message: string): Html => html`<p class="notice" role="status">${message}</p>`;
export const problemHtml = (message: string): Html => html`<p class="error" role="alert">${message}</p>`;
