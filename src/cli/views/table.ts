import { printable } from './format.js';

/**
 * A table for a person: a header row, then one row per item, columns two spaces apart and as wide as their
 * widest cell (the last one unpadded). Every cell is made printable on one line first, so a tenant's or a
 * bank's text can neither drive the terminal nor forge a row, and the widths count what is shown.
 */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const cells = [headers, ...rows].map((row) => row.map((cell) => printable(cell)));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  return cells.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}
