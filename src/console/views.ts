import type { Locale } from '../widget/messages.js';
import { escapeHtml } from '../widget/page.js';
import { consoleMessage } from './messages.js';

/*
 * Pieces every console page is made of: tables with a caption and column headers, a pager like the API's
 * (`page`, 30 rows, never an unbounded list), and small forms that POST with the session's CSRF token.
 */

export const PER_PAGE = 30;

/** `?page=` as a window of PER_PAGE rows; a bad or absurd page is the first. */
export function pageWindow(query: Record<string, unknown>): { page: number; offset: number; limit: number } {
  // Decimal digits only: `Number()` alone would also read `0x10`, `1e2` and ` 1`.
  const raw = typeof query.page === 'string' && /^[0-9]{1,6}$/.test(query.page) ? Number(query.page) : 1;
  const page = raw >= 1 && raw <= 100_000 ? raw : 1;
  return { page, offset: (page - 1) * PER_PAGE, limit: PER_PAGE };
}

/**
 * A table; cells are HTML the caller built (escape text with `escapeHtml`). Each cell carries its column's
 * header as `data-label`: on a phone the stylesheet stacks a row into label/value lines, as the header row
 * no longer fits beside it (console.css).
 */
export function table(caption: string, headers: string[], rows: string[][], empty: string): string {
  if (rows.length === 0) return `<p class="empty">${escapeHtml(empty)}</p>`;
  return `<div class="table-scroll" tabindex="0" role="region" aria-label="${escapeHtml(caption)}">
<table>
<caption>${escapeHtml(caption)}</caption>
<thead><tr>${headers.map((header) => `<th scope="col">${escapeHtml(header)}</th>`).join('')}</tr></thead>
<tbody>
${rows.map((cells) => `<tr>${cells.map((cell, column) => `<td data-label="${escapeHtml(headers[column] ?? '')}">${cell}</td>`).join('')}</tr>`).join('\n')}
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
): string {
  if (total === 0) return '';
  const last = Math.max(1, Math.ceil(total / PER_PAGE));
  const link = (target: number, label: string, rel: string) => {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query))
      if (typeof value === 'string' && key !== 'page') params.set(key, value);
    params.set('page', String(target));
    return `<a href="${escapeHtml(`${path}?${params.toString()}`)}" rel="${rel}">${escapeHtml(label)}</a>`;
  };
  const from = (page - 1) * PER_PAGE + 1;
  const to = Math.min(total, page * PER_PAGE);
  return `<nav class="pager" aria-label="${escapeHtml(words.of(from, to, total))}">
${page > 1 ? link(page - 1, words.previous, 'prev') : ''}
<span>${escapeHtml(words.of(Math.min(from, total), to, total))}</span>
${page < last ? link(page + 1, words.next, 'next') : ''}
</nav>`;
}

export function csrfInput(csrf: string): string {
  return `<input type="hidden" name="_csrf" value="${escapeHtml(csrf)}">`;
}

/** A one-button form (an action on a row). */
export function actionForm(action: string, csrf: string, label: string, extra = ''): string {
  return `<form method="post" action="${escapeHtml(action)}" class="inline-form">${csrfInput(csrf)}${extra}<button type="submit">${escapeHtml(label)}</button></form>`;
}

/** A secret shown once, with a copy button (console.js; without JavaScript, select and copy it by hand). */
export function secretOnce(label: string, secret: string, warning: string, copy: string): string {
  return `<div class="secret-once" role="status">
<p><strong>${escapeHtml(label)}</strong></p>
<p class="secret-row"><code id="secret-value">${escapeHtml(secret)}</code> <button type="button" class="copy" data-copy="secret-value" hidden>${escapeHtml(copy)}</button></p>
<p>${escapeHtml(warning)}</p>
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

/**
 * A stored time as the console shows it, in UTC and saying so: `2026-06-15 15:00 UTC`, or '' for none. UTC
 * rather than the reader's zone: the appliance knows no reader's zone, and the logs, the CLI and the API
 * all speak UTC, so a time copied from the console matches them.
 */
export const atMinute = (iso: string | null | undefined): string =>
  iso ? `${iso.slice(0, 16).replace('T', ' ')} UTC` : '';

/** The same to the second (`2026-06-15 15:00:07 UTC`), where events follow each other closely. */
export const atSecond = (iso: string): string => `${iso.slice(0, 19).replace('T', ' ')} UTC`;

/** A page's facts as a term list; values are HTML (escape text before). */
export const factsHtml = (facts: readonly (readonly [term: string, valueHtml: string])[]): string =>
  `<dl class="facts">${facts.map(([term, value]) => `<dt>${escapeHtml(term)}</dt><dd>${value}</dd>`).join('')}</dl>`;

/**
 * A list filter's choice: "any" (the empty value) first, then each `[value, label]`, the current one selected.
 */
export function filterSelect(
  field: { id: string; name: string; any: string },
  options: readonly (readonly [value: string, label: string])[],
  selected: string | undefined,
): string {
  const choices = options
    .map(
      ([value, label]) =>
        `<option value="${escapeHtml(value)}"${value === selected ? ' selected' : ''}>${escapeHtml(label)}</option>`,
    )
    .join('');
  return `<select id="${field.id}" name="${field.name}"><option value="">${escapeHtml(field.any)}</option>${choices}</select>`;
}

/** What a change did, or why it was refused, above the page it changed. */
export const noticeHtml = (message: string) => `<p class="notice" role="status">${escapeHtml(message)}</p>`;
export const problemHtml = (message: string) => `<p class="error" role="alert">${escapeHtml(message)}</p>`;
