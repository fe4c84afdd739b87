import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import {
  applicableNow,
  kindOf,
  migrationKinds,
  migrationNames,
  schemaMismatch,
  type MigrationKind,
  type MigrationStatus,
} from '../../src/db/migrations.js';

/**
 * Expand and contract migrations (docs/upgrade.md, "Rolling upgrades on PostgreSQL"): every migration says
 * whether the previous release runs on its schema, and the rules that decide what applies under a running
 * older build and whether a schema fits a build.
 */

const SOURCES = new URL('../../../migrations/', import.meta.url);

t.test('every migration declares its kind, with a line saying why', async (t) => {
  const files = readdirSync(SOURCES).filter((file) => file.endsWith('.ts'));
  t.equal(files.length, migrationNames().length, 'one source per compiled migration');
  for (const file of files) {
    const text = readFileSync(new URL(file, SOURCES), 'utf8');
    const declared =
      /\/\*\*\s*\*?\s*(Expand|Contract): ((?:(?!\*\/)[^])+)\*\/\nexport const kind = '(expand|contract)';/.exec(
        text,
      );
    t.ok(declared, `${file} exports kind 'expand' or 'contract' under a comment saying why`);
    if (declared)
      t.equal(declared[1]!.toLowerCase(), declared[3], `${file}: the comment names the same kind`);
  }
  const kinds = await migrationKinds();
  t.same(Object.keys(kinds), migrationNames(), 'the compiled migrations carry them');
  for (const [name, kind] of Object.entries(kinds))
    t.ok(kind === 'expand' || kind === 'contract', `${name}: ${kind}`);
});

t.test('a migration without a kind, or with another word, counts as contract', async (t) => {
  t.equal(kindOf({}), 'contract');
  t.equal(kindOf({ kind: 'Expand' }), 'contract');
  t.equal(kindOf({ kind: 'additive' }), 'contract');
  t.equal(kindOf({ kind: 'expand' }), 'expand');
  t.equal(kindOf({ kind: 'contract' }), 'contract');
});

const E: MigrationKind = 'expand';
const C: MigrationKind = 'contract';

t.test('which pending migrations apply now', async (t) => {
  const pending = ['a', 'b', 'c', 'd'];
  t.same(
    applicableNow(pending, { a: E, b: E, c: C, d: E }, false),
    { apply: pending, deferred: [] },
    'with no other build alive: all of them',
  );
  t.same(
    applicableNow(pending, { a: E, b: E, c: C, d: E }, true),
    { apply: ['a', 'b'], deferred: ['c', 'd'] },
    'under another build: the expand ones before the first contract one; an expand one after it waits too',
  );
  t.same(
    applicableNow(pending, { a: C, b: E, c: E, d: E }, true),
    { apply: [], deferred: pending },
    'a contract one first: nothing applies',
  );
  t.same(
    applicableNow(pending, { a: E, b: E, c: E, d: E }, true),
    { apply: pending, deferred: [] },
    'all expand: all apply',
  );
  t.same(
    applicableNow(['a', 'b'], { a: E }, true),
    { apply: ['a'], deferred: ['b'] },
    'a kind not known is contract',
  );
  t.same(applicableNow([], {}, true), { apply: [], deferred: [] });
});

function status(partial: Partial<MigrationStatus>): MigrationStatus {
  return { applied: ['x'], pending: [], unknown: [], version: 'x', kinds: {}, ...partial };
}

t.test('whether a schema fits a build', async (t) => {
  t.equal(schemaMismatch(status({})), null, 'the same migrations');
  t.equal(
    schemaMismatch(status({ unknown: ['n1', 'n2'], kinds: { n1: E, n2: E } })),
    null,
    'a newer build applied only expand migrations: this build runs on them',
  );
  t.match(
    schemaMismatch(status({ unknown: ['n1', 'n2'], kinds: { n1: E, n2: C } })),
    /^The database schema is newer than this version of svc \(it has n2\)\./,
    'one contract migration this build does not know: it no longer fits, naming that one',
  );
  t.match(
    schemaMismatch(status({ unknown: ['n1'] })),
    /newer than this version of svc \(it has n1\)/,
    'an unknown migration without a recorded kind counts as contract',
  );
  t.equal(
    schemaMismatch(status({ pending: ['p1', 'p2'], kinds: { p1: C, p2: C } })),
    null,
    'only contract migrations pending: this build runs before them',
  );
  t.equal(
    schemaMismatch(status({ pending: ['p1', 'p2'], kinds: { p1: C, p2: E } })),
    'The database has 1 pending migration (p2). Run `svc migrate` first.',
    'a pending expand migration: this build needs it, and says so',
  );
  t.match(
    schemaMismatch(status({ pending: ['p1'], unknown: ['n1'], kinds: { p1: E, n1: C } })),
    /newer than this version/,
    'newer and behind at once: the newer schema is what it says first',
  );
});
