import t from 'tap';
import { createTenant, forEachEngine, startTestApp, tableCounts, RAISED_LIMITS } from '../helpers/harness.js';

const body = { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'] };

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  // Raised limits: these tests make more writes than the default burst allows.
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;

  t.test('a repeat with the same key and body replays the first response and creates nothing', async (t) => {
    const headers = { 'Idempotency-Key': 'create-endpoint-1' };
    const first = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body, headers });
    t.equal(first.status, 200);
    const before = await tableCounts(app.db);
    const again = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body, headers });
    t.equal(again.status, 200);
    t.same(again.body, first.body, 'the same endpoint, secret included');
    t.equal(again.headers.get('idempotent-replayed'), 'true');
    t.same(await tableCounts(app.db), before, 'no second endpoint');
  });

  t.test(
    'a publishable key is never handed an answer made for the secret key, nor the reverse',
    async (t) => {
      const pk = tenant.keys.pk_test.secret;
      for (const [first, second, label] of [
        [sk, pk, 'secret first'],
        [pk, sk, 'publishable first'],
      ] as const) {
        const headers = { 'Idempotency-Key': `widget-token-${label.replace(' ', '-')}` };
        const made = await app.request('POST', '/v1/widget_tokens', { key: first, body: {}, headers });
        t.equal(made.status, 200, `${label}: the first request makes a widget token`);
        const before = await tableCounts(app.db);
        const other = await app.request('POST', '/v1/widget_tokens', { key: second, body: {}, headers });
        t.equal(other.status, 409, `${label}: the other credential is refused`);
        t.match(other.body, { error: { code: 'idempotency_key_reused' } });
        t.notOk(other.text.includes(made.body.token), `${label}: nothing of the answer is replayed`);
        t.same(await tableCounts(app.db), before, `${label}: nothing written`);
        const again = await app.request('POST', '/v1/widget_tokens', { key: first, body: {}, headers });
        t.same(again.body, made.body, `${label}: the first credential still replays its answer`);
      }
    },
  );

  t.test('the same key with another body is 409 idempotency_key_reused', async (t) => {
    const headers = { 'Idempotency-Key': 'create-endpoint-2' };
    await app.request('POST', '/v1/webhook_endpoints', { key: sk, body, headers });
    const before = await tableCounts(app.db);
    const other = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { ...body, enabled_events: ['link.created'] },
      headers,
    });
    t.equal(other.status, 409);
    t.match(other.body, { error: { type: 'invalid_request_error', code: 'idempotency_key_reused' } });
    t.same(await tableCounts(app.db), before);
  });

  t.test(
    'a failed request is replayed as the same failure; keys are scoped per organisation and mode',
    async (t) => {
      const headers = { 'Idempotency-Key': 'bad-request' };
      const bad = { url: 'nope', enabled_events: ['*'] };
      const first = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body: bad, headers });
      t.equal(first.status, 400);
      const again = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body: bad, headers });
      t.equal(again.status, 400);
      t.equal(again.body.error.code, first.body.error.code);
      const otherMode = await app.request('POST', '/v1/webhook_endpoints', {
        key: tenant.keys.sk_live.secret,
        body,
        headers,
      });
      t.equal(
        otherMode.status,
        400,
        'the live key is refused for its own reason (http in live mode), not replayed',
      );
      t.equal(otherMode.headers.get('idempotent-replayed'), null);
    },
  );

  t.test('after the retention period a key can be used afresh', async (t) => {
    const headers = { 'Idempotency-Key': 'expires' };
    const first = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body, headers });
    app.clock.advance(24 * 3600_000 + 1000);
    const later = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body, headers });
    t.equal(later.status, 200);
    t.not(later.body.id, first.body.id, 'a new endpoint');
  });

  t.test('a malformed Idempotency-Key is a 400', async (t) => {
    const before = await tableCounts(app.db);
    const response = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body,
      headers: { 'Idempotency-Key': 'x'.repeat(256) },
    });
    t.equal(response.status, 400);
    t.match(response.body, { error: { code: 'parameter_invalid', param: 'Idempotency-Key' } });
    t.same(await tableCounts(app.db), before);
  });

  t.test('resource writes are limited to a burst of 10', async (t) => {
    const fresh = await createTenant(app);
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push(
        (await app.request('POST', '/v1/webhook_endpoints', { key: fresh.keys.sk_test.secret, body })).status,
      );
    }
    t.same(statuses, [...Array(10).fill(200), 429]);
  });
});
