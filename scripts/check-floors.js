#!/usr/bin/env node
// Every import points down (issue 42). The folders of src/ (rooms) stand on floors, ground first; a file may
// import from rooms on lower floors only: never from its own floor's other rooms, never from above. So the
// ground (clock, errors, ids, db …) can be read alone, and no two rooms need each other. A new import that
// fails here means one of three things: the imported code belongs lower (move it, as `maskUrl` went from
// config/ to db/), the importing room belongs higher (move it up in FLOORS, and in docs/architecture.md's
// floor list, which test/unit/architecture-doc.test.ts holds to this one), or it is one of the EXCEPTIONS
// below, each named with why. commands/ stands above every room.
//
// Usage: node scripts/check-floors.js [ROOT] (default: the checkout this script is in).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { sourceFiles } from './check-table-owners.js';

/** The floors, ground first. `index` is src/index.ts, the package's entry. */
export const FLOORS = [
  ['text'],
  ['clock', 'cpf', 'errors', 'html', 'ids', 'logging', 'metrics', 'net', 'open-finance', 'rut'],
  ['db'],
  ['audit', 'consent-bank', 'jobs'],
  ['secrets'],
  ['banks'],
  ['config'],
  ['ratelimit', 'test-mode'],
  ['orgs'],
  ['keys'],
  ['auth'],
  ['api'],
  ['accounts', 'events', 'health', 'institutions'],
  ['movements', 'webhooks'],
  ['index', 'links'],
  ['exchange', 'income', 'refresh', 'sandbox'],
  ['backfill', 'inspect', 'sync', 'widget'],
  ['console', 'scheduler'],
  ['http'],
  ['processes'],
  ['doctor', 'install'],
  ['backup', 'cli'],
  ['upgrade'],
];

/** The imports that run back up, each with why it stays: file → imported file. */
export const EXCEPTIONS = [
  {
    from: 'src/auth/authenticator.ts',
    to: 'src/refresh/store.ts',
    why: "the MFA step's intent token is one of the credentials auth resolves; the token lives on refresh's row, read through refresh's store so the table keeps one reader",
  },
  {
    from: 'src/jobs/jobs.ts',
    to: 'src/refresh/intents.ts',
    why: '`enqueueSync` makes the intent, the job and the queued link in one transaction, for links/, refresh/ and widget/ alike',
  },
  {
    from: 'src/jobs/jobs.ts',
    to: 'src/links/link-states.ts',
    why: '`enqueueSync` (above) marks the link queued by its named state change',
  },
  {
    from: 'src/jobs/jobs.ts',
    to: 'src/refresh/store.ts',
    why: 'a type only (`RefreshType`, the kinds of sync a job runs), with `enqueueSync`',
  },
];

/** Static imports, re-exports and dynamic `import('…')` with a literal path. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\1/g;

/** The room a path of the checkout stands in, or null outside src/ and commands/. */
export function roomOf(path) {
  if (path.startsWith('commands/')) return 'commands';
  const match = /^src\/([^/]+)\//.exec(path);
  if (match) return match[1];
  return /^src\/index\.[jt]sx?$/.test(path) ? 'index' : null;
}

/** A compiled path (`…/store.js`) as its source file (`…/store.ts`). */
function sourceOf(path) {
  return path.replace(/\.js$/, '.ts').replace(/\.jsx$/, '.tsx');
}

/** Every import that does not point down, and every room missing from FLOORS, as `file:line: …` lines. */
export function violations(root) {
  const floorOf = new Map(FLOORS.flatMap((rooms, floor) => rooms.map((room) => [room, floor])));
  floorOf.set('commands', FLOORS.length);
  const out = [];
  for (const name of readdirSync(join(root, 'src'))) {
    if (statSync(join(root, 'src', name)).isDirectory() && !floorOf.has(name))
      out.push(`src/${name}/: a room on no floor; add it to FLOORS in scripts/check-floors.js`);
  }
  const files = [...sourceFiles(join(root, 'src')), ...sourceFiles(join(root, 'commands'))];
  for (const file of files) {
    const path = relative(root, file).split(sep).join('/');
    const room = roomOf(path);
    if (room === null || !floorOf.has(room)) continue;
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(IMPORT)) {
      const target = sourceOf(
        relative(root, normalize(join(dirname(file), match[2])))
          .split(sep)
          .join('/'),
      );
      const targetRoom = roomOf(target);
      if (targetRoom === null || targetRoom === room || !floorOf.has(targetRoom)) continue;
      if (floorOf.get(targetRoom) < floorOf.get(room)) continue;
      if (EXCEPTIONS.some((e) => e.from === path && e.to === target)) continue;
      const line = text.slice(0, match.index).split('\n').length;
      const where = floorOf.get(targetRoom) === floorOf.get(room) ? 'on its own floor' : 'above it';
      out.push(`${path}:${line}: imports ${target}, of ${targetRoom}/, which stands ${where}`);
    }
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const found = violations(root);
  for (const line of found) console.error(line);
  if (found.length > 0) {
    console.error(
      `check-floors: ${found.length} import(s) that do not point down (see the top of scripts/check-floors.js)`,
    );
    process.exit(1);
  }
}
