/**
 * Log entries as a person at a terminal reads them: `12:52:36.237 INFO  api  api listening url=…`, one
 * line each. The JSON lines stay the format for journald, files and anything not a terminal; this is
 * only a view of them, so nothing is logged twice or differently. A field may carry a bank's or a tenant's
 * text: it is shown through the one neutraliser (text/printable.ts).
 */

import { printable } from '../text/printable.js';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const WARN = 40;
const SHOWN_ELSEWHERE = new Set(['level', 'time', 'role', 'pid', 'msg']);

export type LogFormat = 'json' | 'pretty';

/**
 * The format a process writes: `json` into a file or when asked, `pretty` when asked or, for `auto`,
 * when its stdout is a terminal.
 */
export function resolveLogFormat(setting: string, toFile: boolean, stdoutIsTerminal: boolean): LogFormat {
  if (toFile || setting === 'json') return 'json';
  if (setting === 'pretty') return 'pretty';
  return stdoutIsTerminal ? 'pretty' : 'json';
}

/** A field's value: a string as it is (quoted when it has spaces, so fields stay apart), anything else as JSON. */
function shown(value: unknown): string {
  if (typeof value !== 'string') return printable(JSON.stringify(value) ?? String(value));
  const safe = printable(value);
  return safe === '' || /\s/.test(safe) ? JSON.stringify(safe) : safe;
}

function clock(time: unknown): string {
  const match = typeof time === 'string' ? /T(\d\d:\d\d:\d\d\.\d\d\d)/.exec(time) : null;
  return match ? match[1]! : String(time ?? '');
}

/**
 * One JSON log line as readable text. An access line reads `GET /v1/links 200 3.1 ms req_…`. Below a
 * warning, a line is cut to `width` (the terminal's) so that each entry takes one row and the start of a
 * session (the keys `svc install` printed) stays in view; warnings and errors are shown whole, with an
 * error's stack under them. A line that is not JSON passes as it is.
 */
export function prettyLine(line: string, width?: number): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  if (entry === null || typeof entry !== 'object') return line;
  const level = Number(entry.level);
  const head = `${clock(entry.time)} ${(LEVELS[level] ?? String(entry.level)).padEnd(5)} ${printable(String(entry.role ?? ''))}`;
  let body: string;
  let rest: [string, unknown][];
  if (entry.msg === 'request' && typeof entry.method === 'string') {
    body = `${shown(entry.method)} ${shown(entry.route)} ${shown(entry.status)} ${shown(entry.ms)} ms`;
    rest = Object.entries(entry).filter(
      ([key]) => !SHOWN_ELSEWHERE.has(key) && !['method', 'route', 'status', 'ms'].includes(key),
    );
  } else {
    body = printable(String(entry.msg ?? ''));
    rest = Object.entries(entry).filter(([key]) => !SHOWN_ELSEWHERE.has(key));
  }
  let stack = '';
  const fields = rest.map(([key, value]) => {
    if (key === 'err' && value !== null && typeof value === 'object') {
      const err = value as { message?: unknown; stack?: unknown };
      if (level >= WARN && typeof err.stack === 'string') stack = err.stack;
      return `err=${shown(err.message ?? value)}`;
    }
    return `${key}=${shown(value)}`;
  });
  let text = `${head}  ${[body, ...fields].join(' ')}`;
  if (level < WARN && width !== undefined && text.length > width) text = `${text.slice(0, width - 1)}…`;
  if (stack) text += `\n${printable(stack, true).replace(/^/gm, '    ')}`;
  return `${text}\n`;
}
