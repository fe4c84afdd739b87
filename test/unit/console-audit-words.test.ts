import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  AUDIT_ACTIONS,
  auditActorText,
  auditDetailLines,
  auditSentence,
} from '../../src/console/audit-words.js';
import { readingAs } from '../../src/console/views.js';

/* The audit log as sentences: what a person reads on the console's audit page, in both languages. */

t.test('every action is a sentence in both languages', async (t) => {
  t.equal(auditSentence('es', 'api_key.revoked'), 'Revocó una clave de API');
  t.equal(auditSentence('en', 'api_key.revoked'), 'Revoked an API key');
  t.equal(auditSentence('es', 'link.pause'), 'Pausó una conexión');
  t.equal(auditSentence('es', 'future.action'), 'future.action', "a newer build's action as its code");
  t.equal(auditSentence('es', 'constructor'), 'constructor', "an object's own keys only");
  for (const [action, words] of Object.entries(AUDIT_ACTIONS)) {
    t.notMatch(words.es, /[._]/, `${action}: no code in the Spanish sentence`);
    t.not(words.es, words.en, `${action}: translated`);
  }
});

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

t.test('every action the appliance writes has its sentence', async (t) => {
  // The audit page showed `link.create` and its raw keys (via, login, bank_id) because nothing held the list
  // to the code. An action written is a quoted dotted name on an `action` line (a literal, a ternary, the
  // union of a function's `action` parameter) or among the arguments of the console's `auditOwnAction`.
  const src = new URL('../../../src/', import.meta.url).pathname;
  const written = new Set<string>();
  for (const file of filesUnder(src).filter((name) => name.endsWith('.ts'))) {
    const text = readFileSync(file, 'utf8');
    const places = [
      ...[...text.matchAll(/\baction\??:([^\n]*)/g)].map((match) => match[1]!),
      ...[...text.matchAll(/auditOwnAction\(([^;]*)/g)].map((match) => match[1]!),
    ];
    for (const place of places)
      for (const [, name] of place.matchAll(/'([a-z_]+\.[a-z_]+)'/g)) written.add(name!);
  }
  for (const action of ['link.consent_revoked', 'webhook_endpoint.enable', 'console_user.password_reset'])
    t.ok(written.has(action), `the scan finds ${action} (a union, a ternary, an auditOwnAction)`);
  const missing = [...written].filter((action) => !Object.hasOwn(AUDIT_ACTIONS, action));
  t.same(missing, [], 'each has a sentence in AUDIT_ACTIONS');
});

t.test('the details as labelled lines, values in words', async (t) => {
  const details = { mode: 'test', type: 'secret', rate_limits: null };
  t.same(auditDetailLines('es', details), [
    ['Modo', 'prueba'],
    ['Tipo', 'secreta'],
  ]);
  t.same(auditDetailLines('en', details), [
    ['Mode', 'test'],
    ['Type', 'secret'],
  ]);
  t.same(
    auditDetailLines('en', { enabled_events: ['link.created', 'link.refreshed'], url: 'https://x.cl/h' }),
    [
      ['Events', 'link.created, link.refreshed'],
      ['URL', 'https://x.cl/h'],
    ],
  );
  t.same(
    auditDetailLines('es', {
      via: 'api',
      login: 'credentials',
      bank_id: 'bancochile',
      holder_type: 'individual',
    }),
    [
      ['Desde', 'API'],
      ['Acceso', 'clave del banco'],
      ['Banco', 'bancochile'],
      ['Titular', 'persona'],
    ],
    "a link's creation in words",
  );
  t.same(auditDetailLines('es', null), []);
  const when = await readingAs({ locale: 'es', zone: 'America/Santiago' }, async () =>
    auditDetailLines('es', { expires_at: '2026-11-29T10:00:00.000Z' }),
  );
  t.same(when, [['Vence', '29-11-2026 07:00']], "a time in the operator's zone");
});

t.test('who did it, by name', async (t) => {
  const emails = new Map([['cu_0123456789abcdef', 'ana@lender.cl']]);
  t.equal(auditActorText('es', 'console:cu_0123456789abcdef', emails), 'ana@lender.cl');
  t.equal(auditActorText('es', 'console:cu_ffffffffffffffff', emails), 'cu_ffffffffffffffff');
  t.equal(auditActorText('es', 'key:key_0123456789abcdef', emails), 'Clave key_0123456789abcdef');
  t.equal(auditActorText('en', 'cli:root', emails), 'Command line (root)');
  t.equal(auditActorText('es', 'scheduler', emails), 'scheduler');
});
