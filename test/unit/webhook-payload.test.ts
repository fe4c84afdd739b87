import { randomBytes } from 'node:crypto';
import t from 'tap';
import { presentEvent, type EventRow } from '../../src/events/store.js';
import { SecretBox } from '../../src/secrets/secret-box.js';
import { rememberingOpener, signingSecrets } from '../../src/webhooks/endpoints.js';
import { eventBody } from '../../src/webhooks/dispatch/payload.js';

function row(data: unknown): EventRow {
  return {
    id: 'evt_0123456789abcdef',
    org_id: 'org_0123456789abcdef',
    mode: 'test',
    type: 'link.refreshed',
    link_id: null,
    // As recordEvent stores it.
    data: JSON.stringify(data),
    created_at: Date.UTC(2026, 5, 15, 15, 0, 0, 123),
  };
}

t.test('the body of a delivery is exactly the event as GET /v1/events/{id} serialises it', async (t) => {
  const cases: [string, unknown][] = [
    ['empty', {}],
    ['a link', { object: 'link', id: 'link_0123456789abcdef', status: 'active', accounts_count: 3 }],
    [
      'text to escape',
      { text: 'ñandú € "quoted" \\ back\nslash \u2028 \u0001', emoji: '🏦', lone: '\ud800' },
    ],
    ['nesting', { nested: { list: [1, -2.5, 1e21, null, true, { deep: [] }] } }],
    ['numbers', { amount: -1234567890123, tiny: 5e-7, zero: -0 }],
  ];
  for (const [label, data] of cases) {
    const stored = row(data);
    const body = eventBody(stored);
    t.ok(body === JSON.stringify(presentEvent(stored)), label);
    t.same(JSON.parse(body), presentEvent(stored), `${label}: parses back`);
  }
});

t.test('secrets are opened once per ciphertext, and a rolled secret is a new one', async (t) => {
  const box = new SecretBox({ id: 'mk_test', key: randomBytes(32) });
  let opened = 0;
  const counting = {
    open: (sealed: string, context?: string) => {
      opened += 1;
      return box.open(sealed, context);
    },
  };
  const opener = rememberingOpener(counting);
  const endpoint = {
    id: 'we_0123456789abcdef',
    secret_encrypted: box.seal('whsec_current', 'we_0123456789abcdef'),
    previous_secret_encrypted: box.seal('whsec_previous', 'we_0123456789abcdef'),
    previous_secret_expires_at: 2_000,
  };
  t.same(signingSecrets(endpoint, opener, 1_000), ['whsec_current', 'whsec_previous']);
  t.same(signingSecrets(endpoint, opener, 1_500), ['whsec_current', 'whsec_previous']);
  t.equal(opened, 2, 'each ciphertext opened once');
  t.same(signingSecrets(endpoint, opener, 2_000), ['whsec_current'], 'the grace ends on time');
  const rolled = { ...endpoint, secret_encrypted: box.seal('whsec_next', endpoint.id) };
  t.same(signingSecrets(rolled, opener, 1_000), ['whsec_next', 'whsec_previous']);
  t.equal(opened, 3);
  t.throws(
    () => opener.open(endpoint.secret_encrypted, 'we_another'),
    /integrity/,
    'the context is part of what is remembered: another endpoint cannot open it',
  );
});
