import t from 'tap';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createTenant, forEachEngine, linkBody, RAISED_LIMITS, startTestApp } from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';

/**
 * The verifier docs/webhooks.md shows (docs/examples/verify-signature.mjs, checked equal to the page by
 * test/unit/webhook-docs.test.ts), imported as a receiver imports it, against deliveries the dispatcher
 * really signed: with one secret, and with two while a secret is rolled.
 */
type Verify = (
  rawBody: string | Buffer,
  header: string | undefined,
  secret: string,
  toleranceSeconds?: number,
  nowMs?: number,
) => boolean;
const { verifySignature } = (await import(
  new URL('../../../docs/examples/verify-signature.mjs', import.meta.url).href
)) as { verifySignature: Verify };

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const key = tenant.keys.sk_test.secret;
  const receiver = await startReceiver(t);
  const endpoint = (
    await app.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: receiver.url, enabled_events: ['*'] },
    })
  ).body as { id: string; secret: string };
  const dispatcher = new Dispatcher(app.services);
  t.teardown(() => dispatcher.close());
  const link = (await app.request('POST', '/v1/links', { key, body: linkBody() })).body.id as string;

  // Signatures carry the system clock's time (dispatcher.ts), as the verifier's default `now` is.
  const verify = (rawBody: string | Buffer, header: string | undefined, secret: string) =>
    verifySignature(rawBody, header, secret);
  const fire = async () => {
    const before = receiver.received.length;
    const fired = await app.request('POST', '/v1/sandbox/events/fire', {
      key,
      body: { type: 'link.refreshed', link_id: link },
    });
    t.equal(fired.status, 200);
    await dispatcher.dispatchDue();
    const delivery = receiver.received.slice(before).find((r) => r.body.includes(fired.body.id));
    if (!delivery) throw new Error('the fired event was not delivered');
    return { body: delivery.body, header: delivery.headers['svc-signature'] as string };
  };

  t.test('a real delivery verifies with the endpoint secret, and nothing else does', async (t) => {
    const { body, header } = await fire();
    t.ok(verify(body, header, endpoint.secret), 'the raw body, as a string');
    t.ok(verify(Buffer.from(body), header, endpoint.secret), 'the raw body, as bytes');
    t.notOk(verify(body, header, `${endpoint.secret}x`), 'another secret');
    t.notOk(
      verify(JSON.stringify(JSON.parse(body), null, 1), header, endpoint.secret),
      'a re-serialised body',
    );
    t.notOk(verify(body, undefined, endpoint.secret), 'no header');
  });

  t.test('while a secret is rolled, either secret verifies', async (t) => {
    const rolled = await app.request('POST', `/v1/webhook_endpoints/${endpoint.id}/roll_secret`, {
      key,
      body: { grace_seconds: 3600 },
    });
    t.equal(rolled.status, 200);
    const { body, header } = await fire();
    t.match(header, /v1=.*v1=/, 'two signatures');
    t.ok(verify(body, header, rolled.body.secret), 'the new secret');
    t.ok(verify(body, header, endpoint.secret), 'the old secret, within its grace');
  });
});
