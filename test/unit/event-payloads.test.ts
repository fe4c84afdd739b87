import t from 'tap';
import { EVENT_PAYLOADS, EVENT_TYPES, isEventType, type EventType } from '../../src/events/catalogue.js';
import { sampleEvent } from '../../src/sandbox/sandbox-events.js';
import { linkRowAt } from '../helpers/link-row.js';

const build = EVENT_PAYLOADS;

const AT = Date.UTC(2026, 5, 15, 15, 0, 0, 123);
const ISO = '2026-06-15T15:00:00.123Z';
const link = {
  id: 'link_0123456789abcdef',
  bank_id: 'bci',
  status: 'active',
  holder_name: 'Ana',
  created_at: AT,
};
const intent = { id: 'ri_0123456789abcdef', link_id: link.id };

// The exact text receivers got before the builders existed (hand-built objects in each flow): key order is
// part of a body, and the sandbox and the flows now share these builders, so both send this shape.
const expected: Record<EventType, [unknown, string]> = {
  'link.created': [
    build['link.created'](link),
    `{"object":"link","id":"${link.id}","bank_id":"bci","status":"active","holder_name":"Ana","created_at":"${ISO}"}`,
  ],
  'link.refreshed': [
    build['link.refreshed'](link, { syncedAt: AT, nextSyncAt: AT, accountsCount: 2, newMovements: 5 }),
    `{"object":"link","id":"${link.id}","status":"active","last_synced_at":"${ISO}","next_sync_at":"${ISO}","accounts_count":2,"new_movements_count":5}`,
  ],
  'link.expired': [
    build['link.expired']({ id: link.id, last_error_code: 'rejected_credentials', expired_at: AT }),
    `{"object":"link","id":"${link.id}","status":"expired","last_error_code":"rejected_credentials","expired_at":"${ISO}"}`,
  ],
  'link.deleted': [
    build['link.deleted'](link, AT),
    `{"object":"link","id":"${link.id}","deleted_at":"${ISO}"}`,
  ],
  'account.created': [
    build['account.created']({
      id: 'acc_1',
      link_id: link.id,
      name: 'Cuenta',
      type: 'checking',
      currency: 'CLP',
      last_4: '1234',
    }),
    `{"object":"account","id":"acc_1","link_id":"${link.id}","name":"Cuenta","type":"checking","currency":"CLP","last_4":"1234"}`,
  ],
  'account.removed': [
    build['account.removed']({ id: 'acc_1', link_id: link.id }, AT),
    `{"object":"account","id":"acc_1","link_id":"${link.id}","status":"removed","removed_at":"${ISO}"}`,
  ],
  'refresh_intent.created': [
    build['refresh_intent.created']({ ...intent, refresh_type: 'only_last' }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"created","refresh_type":"only_last"}`,
  ],
  'refresh_intent.requires_mfa': [
    build['refresh_intent.requires_mfa'](intent, { widgetToken: 'tok', expiresAt: AT }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"requires_mfa","requires_mfa":{"widget_token":"tok","expires_at":"${ISO}"}}`,
  ],
  'refresh_intent.succeeded': [
    build['refresh_intent.succeeded']({
      ...intent,
      completed_at: AT,
      accounts_updated: 2,
      new_movements_count: 5,
    }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"succeeded","completed_at":"${ISO}","summary":{"accounts_updated":2,"new_movements_count":5}}`,
  ],
  'refresh_intent.failed': [
    build['refresh_intent.failed']({ ...intent, error_code: 'bank_unavailable', completed_at: AT }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"failed","error_code":"bank_unavailable","completed_at":"${ISO}"}`,
  ],
  'link.consent_expiring': [
    build['link.consent_expiring']({ link_id: link.id, expires_at: AT + 6.5 * 86_400_000 }, AT),
    `{"object":"consent","link_id":"${link.id}","status":"expiring","expires_at":"2026-06-22T03:00:00.123Z","days_left":7}`,
  ],
  'webhook_endpoint.disabled': [
    build['webhook_endpoint.disabled'](
      { id: 'we_0123456789abcdef', url: 'https://example.com/hook', failing_since: AT },
      AT,
    ),
    `{"object":"webhook_endpoint","id":"we_0123456789abcdef","url":"https://example.com/hook","disabled":true,"disabled_reason":"failing","failing_since":"${ISO}","disabled_at":"${ISO}"}`,
  ],
};

t.test('each builder gives its event the body receivers have always had', async (t) => {
  for (const type of EVENT_TYPES) t.equal(JSON.stringify(expected[type][0]), expected[type][1], type);
});

t.test(
  "the catalogue is the spec list, in its order, then the appliance's own, and knows its types only",
  async (t) => {
    t.same(EVENT_TYPES, [
      'link.created',
      'link.refreshed',
      'link.expired',
      'link.deleted',
      'account.created',
      'account.removed',
      'refresh_intent.created',
      'refresh_intent.requires_mfa',
      'refresh_intent.succeeded',
      'refresh_intent.failed',
      'link.consent_expiring',
      'webhook_endpoint.disabled',
    ]);
    t.same(Object.keys(EVENT_PAYLOADS), EVENT_TYPES);
    t.ok(isEventType('link.created'));
    t.notOk(isEventType('link.nope'));
    t.notOk(isEventType('toString'), 'no inherited name passes for a type');
  },
);

/** Every key path of a payload, nested ones as `a.b`, in order. */
function keyPaths(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, inner]) => [
    prefix + key,
    ...keyPaths(inner, `${prefix}${key}.`),
  ]);
}

t.test('a fired sandbox event has the keys, in order, of a real one of its type', async (t) => {
  const row = linkRowAt(AT, {
    new_movements_count: 5,
    sync_attempts: 1,
    sync_successes: 1,
    last_synced_at: AT,
    next_sync_at: AT,
  });
  const account = { id: 'acc_1', name: 'Cuenta', type: 'checking', currency: 'CLP', last_4: '1234' };
  for (const type of EVENT_TYPES) {
    const fired = sampleEvent(type, {
      link: row,
      account,
      endpoint: { id: 'we_0123456789abcdef', url: 'https://example.com/hook' },
      intentId: intent.id,
      now: AT,
      syncIntervalMinutes: 240,
      consent: { isConsentLink: true, expiresAt: AT + 7 * 86_400_000 },
    });
    t.equal(fired.type, type);
    t.same(keyPaths(fired.data), keyPaths(expected[type][0]), type);
  }
});
