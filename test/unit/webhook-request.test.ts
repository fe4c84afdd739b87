import { createHmac } from 'node:crypto';
import t from 'tap';
import { deliveryRequest, requestNames } from '../../src/webhooks/dispatch/request.js';

const NOW = Date.UTC(2026, 5, 15, 15, 0, 0);
const event = {
  id: 'evt_0123456789abcdef',
  type: 'link.refreshed',
  created_at: NOW - 1000,
  mode: 'test' as const,
  data: '{"object":"link","id":"link_0123456789abcdef","status":"active"}',
};
const secret = 'whsec_test_0123456789abcdefghijklmnopqrstuv';
const previous = 'whsec_old_0123456789abcdefghijklmnopqrstuvw';

/** Written here from the spec, not with the project's code. */
function hmac(key: string, timestamp: number, payload: string): string {
  return createHmac('sha256', key).update(`${timestamp}.${payload}`).digest('hex');
}

t.test('the header names and user agent follow the brand', async (t) => {
  t.same(requestNames('svc'), {
    signature: 'Svc-Signature',
    eventId: 'Svc-Event-Id',
    userAgent: 'Svc-Webhooks/1.0',
  });
  t.same(requestNames('acme'), {
    signature: 'Acme-Signature',
    eventId: 'Acme-Event-Id',
    userAgent: 'Acme-Webhooks/1.0',
  });
});

t.test('the body is the event as the API presents it, with its stored data as it is', async (t) => {
  const { body } = deliveryRequest(event, [secret], NOW, requestNames('svc'));
  t.same(JSON.parse(body), {
    object: 'event',
    id: event.id,
    type: event.type,
    created_at: new Date(NOW - 1000).toISOString(),
    mode: 'test',
    data: JSON.parse(event.data),
  });
  t.ok(body.endsWith(`"data":${event.data}}`), 'data spliced in, not serialised again');
});

t.test('the headers: JSON, the user agent, the event id and the signature over t.body', async (t) => {
  const { body, headers } = deliveryRequest(event, [secret], NOW + 999, requestNames('acme'));
  const t0 = Math.floor(NOW / 1000);
  t.same(headers, {
    'content-type': 'application/json',
    'user-agent': 'Acme-Webhooks/1.0',
    'Acme-Signature': `t=${t0},v1=${hmac(secret, t0, body)}`,
    'Acme-Event-Id': event.id,
  });
});

t.test('during a secret roll, one v1 per active secret; each attempt signs with its own time', async (t) => {
  const names = requestNames('svc');
  const first = deliveryRequest(event, [secret, previous], NOW, names);
  const t0 = Math.floor(NOW / 1000);
  t.equal(
    first.headers['Svc-Signature'],
    `t=${t0},v1=${hmac(secret, t0, first.body)},v1=${hmac(previous, t0, first.body)}`,
  );
  const later = deliveryRequest(event, [secret], NOW + 60_000, names);
  t.equal(later.body, first.body, 'the same body');
  t.equal(later.headers['Svc-Signature'], `t=${t0 + 60},v1=${hmac(secret, t0 + 60, later.body)}`);
});

t.test('the same delivery, secrets and time give the same request: a pure function', async (t) => {
  const names = requestNames('svc');
  t.same(deliveryRequest(event, [secret], NOW, names), deliveryRequest(event, [secret], NOW, names));
});
