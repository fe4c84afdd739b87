import t from 'tap';
import { EVENT_PAYLOADS, EVENT_TYPES, isEventType, type EventType } from '../../src/events/catalogue.js';
import {
  accountCreated,
  accountRemoved,
  linkCreated,
  linkDeleted,
  linkExpired,
  linkRefreshed,
  refreshIntentCreated,
  refreshIntentFailed,
  refreshIntentRequiresMfa,
  refreshIntentSucceeded,
} from '../../src/events/payloads.js';

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
    linkCreated(link),
    `{"object":"link","id":"${link.id}","bank_id":"bci","status":"active","holder_name":"Ana","created_at":"${ISO}"}`,
  ],
  'link.refreshed': [
    linkRefreshed(link, { syncedAt: AT, nextSyncAt: AT, accountsCount: 2, newMovements: 5 }),
    `{"object":"link","id":"${link.id}","status":"active","last_synced_at":"${ISO}","next_sync_at":"${ISO}","accounts_count":2,"new_movements_count":5}`,
  ],
  'link.expired': [
    linkExpired({ id: link.id, last_error_code: 'rejected_credentials', expired_at: AT }),
    `{"object":"link","id":"${link.id}","status":"expired","last_error_code":"rejected_credentials","expired_at":"${ISO}"}`,
  ],
  'link.deleted': [linkDeleted(link, AT), `{"object":"link","id":"${link.id}","deleted_at":"${ISO}"}`],
  'account.created': [
    accountCreated({
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
    accountRemoved({ id: 'acc_1', link_id: link.id }, AT),
    `{"object":"account","id":"acc_1","link_id":"${link.id}","status":"removed","removed_at":"${ISO}"}`,
  ],
  'refresh_intent.created': [
    refreshIntentCreated({ ...intent, refresh_type: 'only_last' }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"created","refresh_type":"only_last"}`,
  ],
  'refresh_intent.requires_mfa': [
    refreshIntentRequiresMfa(intent, { widgetToken: 'tok', expiresAt: AT }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"requires_mfa","requires_mfa":{"widget_token":"tok","expires_at":"${ISO}"}}`,
  ],
  'refresh_intent.succeeded': [
    refreshIntentSucceeded({ ...intent, completed_at: AT, accounts_updated: 2, new_movements_count: 5 }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"succeeded","completed_at":"${ISO}","summary":{"accounts_updated":2,"new_movements_count":5}}`,
  ],
  'refresh_intent.failed': [
    refreshIntentFailed({ ...intent, error_code: 'bank_unavailable', completed_at: AT }),
    `{"object":"refresh_intent","id":"${intent.id}","link_id":"${link.id}","status":"failed","error_code":"bank_unavailable","completed_at":"${ISO}"}`,
  ],
};

t.test('each builder gives its event the body receivers have always had', async (t) => {
  for (const type of EVENT_TYPES) t.equal(JSON.stringify(expected[type][0]), expected[type][1], type);
});

t.test('the catalogue is the spec list, in its order, and knows its own types only', async (t) => {
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
  ]);
  t.same(Object.keys(EVENT_PAYLOADS), EVENT_TYPES);
  t.ok(isEventType('link.created'));
  t.notOk(isEventType('link.nope'));
  t.notOk(isEventType('toString'), 'no inherited name passes for a type');
});
