export function formatBytes(bytes: number | null): string {
  if (bytes === null) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function formatSeconds(seconds: number | null): string {
  if (seconds === null) return '-';
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}

/**
 * Control characters (C0, DEL, C1), the bidirectional overrides and the line separators that a terminal
 * would act on: an escape sequence can clear the screen, retitle the window, rewrite earlier lines or hide
 * text, and a carriage return or newline can forge a row.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
const LAYOUT = new Set(['\n', '\t']);

/**
 * Text a tenant, a bank or a receiver supplied, made safe to print on the operator's terminal: every
 * character a terminal would act on is shown as its escape (`\u001b`). With `multiline`, the CLI's own
 * newlines and tabs pass. `--json` output is never passed through here: JSON.stringify escapes the same
 * characters itself, and the value stays exact.
 */
export function printable(text: string, multiline = false): string {
  return text.replace(UNPRINTABLE, (char) =>
    multiline && LAYOUT.has(char) ? char : `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** `value` with every string in it made printable on one line, for a view that shows it field by field. */
export function printableFields<T>(value: T): T {
  if (typeof value === 'string') return printable(value) as T;
  if (Array.isArray(value)) return value.map(printableFields) as T;
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, printableFields(item)])) as T;
  return value;
}
