#!/usr/bin/env node
// Each table has one owner: the capability folder that declares its row type and is the only code that
// writes it (or one file of that folder, where the table's state changes are named); others call its store.
// This finds every write to an owned table in src/ and commands/ and fails, naming file:line and the owner,
// when one lies outside the owner.
// A write is a knex chain that starts at `('table')` and, before its statement ends, calls a writing
// method; or raw SQL `insert into|update|delete from <table>` in a string. src/db/ (generic helpers that
// take a table name) and migrations/ (the schema) are allowed. Reads are not checked: they are cheap to
// move later and harmless meanwhile, where a second writer can break an owner's invariants.
//
// Usage: node scripts/check-table-owners.js [ROOT] (default: the checkout this script is in).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';

export const OWNERS = {
  links: 'src/links/',
  accounts: 'src/accounts/',
  account_read_marks: 'src/accounts/',
  movements: 'src/movements/',
  refresh_intents: 'src/refresh/',
  jobs: 'src/jobs/',
  webhook_deliveries: 'src/webhooks/',
  webhook_endpoints: 'src/webhooks/',
  events: 'src/events/',
  // A file, not the folder: the session's state changes are named there (SESSION_TRANSITIONS) and the
  // credential and consent flows call them; a consent trip's likewise.
  widget_sessions: 'src/widget/sessions.ts',
  widget_tokens: 'src/widget/',
  widget_consent_requests: 'src/widget/consent/consent-requests.ts',
  exchange_tokens: 'src/exchange/',
  api_keys: 'src/keys/',
  organisations: 'src/orgs/',
  bank_sync_outcomes: 'src/banks/',
  idempotency_keys: 'src/api/',
  audit_log: 'src/audit/',
  cron_ticks: 'src/scheduler/',
  retention_totals: 'src/scheduler/',
  retention_walks: 'src/scheduler/',
  event_tallies: 'src/events/',
  webhook_delivery_tallies: 'src/webhooks/',
  console_users: 'src/console/',
  console_tokens: 'src/console/',
  console_sign_in_attempts: 'src/console/',
  console_sessions: 'src/console/',
  serve_instances: 'src/processes/',
  rate_limit_buckets: 'src/ratelimit/',
  consent_bank_state: 'src/consent-bank/',
  consent_clients: 'src/banks/',
  bank_call_budgets: 'src/banks/',
  link_grants: 'src/links/',
  grant_revocations: 'src/links/',
};
const ALLOWED = ['src/db/', 'migrations/'];
const SCANNED = ['src', 'commands'];
const WRITES = /\.\s*(insert|update|del|delete|increment|decrement|onConflict|merge)\s*\(/;
const TABLES = Object.keys(OWNERS).join('|');
const KNEX_START = new RegExp(`\\(\\s*(['"\`])(${TABLES})\\1\\s*\\)`, 'g');
const RAW_SQL = new RegExp(`\\b(?:insert\\s+into|update|delete\\s+from)\\s+["\`]?(${TABLES})\\b`, 'gi');

const CODE = 0;
const COMMENT = 1;
const STRING = 2;

/** Whether a `/` at this point starts a regular expression rather than a division (after an operator). */
function regexMayStart(text, at) {
  let i = at - 1;
  while (i >= 0 && /\s/.test(text[i])) i--;
  if (i < 0) return true;
  if ('(,=:[!&|?{};+-*%<>~^'.includes(text[i])) return true;
  return /\b(?:return|typeof|case|in|of|void|yield|await)$/.test(text.slice(Math.max(0, i - 6), i + 1));
}

/**
 * What each character of a source file is: code, comment or the inside of a string (template literals
 * whole, `${…}` included: SQL is built in them). Regular expression literals count as strings, so that a
 * quote inside one does not open a string.
 */
export function classify(text) {
  const kind = new Uint8Array(text.length);
  let i = 0;
  const mark = (from, to, k) => kind.fill(k, from, Math.min(to, text.length));
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      const to = end < 0 ? text.length : end;
      mark(i, to, COMMENT);
      i = to;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      const to = end < 0 ? text.length : end + 2;
      mark(i, to, COMMENT);
      i = to;
    } else if (c === "'" || c === '"' || c === '`' || (c === '/' && regexMayStart(text, i))) {
      let j = i + 1;
      let inClass = false;
      while (j < text.length) {
        const d = text[j];
        if (d === '\\') {
          j += 2;
          continue;
        }
        if (c === '/' && (d === '[' || d === ']')) inClass = d === '[';
        else if (d === c && !(c === '/' && inClass)) break;
        else if (c !== '`' && d === '\n') break;
        j++;
      }
      mark(i, j + 1, STRING);
      i = j + 1;
    } else i++;
  }
  return kind;
}

/**
 * The rest of the statement that starts after `from`: up to a `;` or `,` at its own depth, or the bracket
 * that closes the expression it is part of (`Promise.all([db('a')…, …])`, a subquery in a callback).
 */
export function statementAfter(text, kind, from) {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    if (kind[i] !== CODE) continue;
    const c = text[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      if (--depth < 0) return text.slice(from, i);
    } else if ((c === ';' || c === ',') && depth === 0) return text.slice(from, i);
  }
  return text.slice(from);
}

/** `text[from, to)` with the characters whose kind is not `keep` blanked (same length, same offsets). */
function only(text, kind, keep, from = 0, to = text.length) {
  let out = '';
  for (let i = from; i < to; i++) out += kind[i] === keep || text[i] === '\n' ? text[i] : ' ';
  return out;
}

function lineOf(text, index) {
  let line = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** The writes to owned tables in one file's text: `{ table, line }` each. */
export function writesIn(text) {
  const kind = classify(text);
  let code = '';
  for (let i = 0; i < text.length; i++) code += kind[i] === COMMENT && text[i] !== '\n' ? ' ' : text[i];
  const found = [];
  for (const match of code.matchAll(KNEX_START)) {
    const end = match.index + match[0].length;
    // Only the chain's own calls count: blank strings out, so a message that says ".update(" does not.
    const rest = statementAfter(text, kind, end);
    const calls = only(text, kind, CODE, end, end + rest.length);
    if (WRITES.test(calls)) found.push({ table: match[2], line: lineOf(text, match.index) });
  }
  const strings = only(text, kind, STRING);
  for (const match of strings.matchAll(RAW_SQL))
    found.push({ table: match[1].toLowerCase(), line: lineOf(text, match.index) });
  return found;
}

export function sourceFiles(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|js|mjs|cjs)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every write outside its table's owner, as `file:line: …` lines. */
export function violations(root) {
  const out = [];
  for (const file of SCANNED.flatMap((dir) => sourceFiles(join(root, dir)))) {
    const path = relative(root, file).split(sep).join('/');
    if (ALLOWED.some((prefix) => path.startsWith(prefix))) continue;
    for (const { table, line } of writesIn(readFileSync(file, 'utf8'))) {
      if (!path.startsWith(OWNERS[table]))
        out.push(`${path}:${line}: writes ${table}, which only ${OWNERS[table]} may write (call its store)`);
    }
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const found = violations(root);
  for (const line of found) console.error(line);
  if (found.length > 0) {
    console.error(`check-table-owners: ${found.length} write(s) outside their table's owner`);
    process.exit(1);
  }
}
