import t from 'tap';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  HANG_GUARD_MS,
  createTenant,
  forEachEngine,
  RAISED_LIMITS,
  startTestApp,
  storedAttempts,
} from '../helpers/harness.js';
import { createEndpoint, emitRefreshed } from '../helpers/webhook-events.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';

/**
 * The dispatcher records results and claims rows in shared cycles, binds whole row sets as a few values and
 * keeps endpoints between claims: what that must not change.
 */

forEachEngine(t, async (t, engine) => {
  t.test('a burst: every delivery attempted once and recorded once, leases all given up', async (t) => {
    const app = await startTestApp(t, engine, {
      config: { dispatcher: { concurrency: 8, perEndpointConcurrency: 8, pollIntervalMs: 50 } },
    });
    const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const receiver = await startReceiver(t);
    await createEndpoint(app, tenant.keys.sk_test.secret, receiver.url);
    const emitted = await emitRefreshed(app.db, tenant.orgId, 600, app.clock);
    const controller = new AbortController();
    const running = new Dispatcher(app.services).run(controller.signal);
    await receiver.waitFor(emitted.length, 2 * HANG_GUARD_MS);
    for (let i = 0; i < 300; i++) {
      const left = await app.db.knex('webhook_deliveries').where('status', 'pending').first('id');
      if (!left) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    controller.abort();
    await running;
    t.same(receiver.received.map((r) => r.event.id).sort(), [...emitted].sort(), 'each event once');
    const deliveries = await app.db
      .knex('webhook_deliveries')
      .select('status', 'attempts', 'locked_by', 'locked_until', 'last_response_status');
    t.equal(deliveries.length, emitted.length);
    t.ok(
      deliveries.every(
        (d) =>
          d.status === 'succeeded' &&
          d.attempts === 1 &&
          d.locked_by === null &&
          d.locked_until === null &&
          d.last_response_status === 200,
      ),
      'every delivery succeeded at its first attempt, with no lease left',
    );
    const attempts = await storedAttempts(app.db);
    t.equal(attempts.length, emitted.length, 'one attempt each');
    t.equal(new Set(attempts.map((a) => a.delivery_id)).size, emitted.length);
    t.ok(attempts.every((a) => a.number === 1 && a.status_code === 200));
  });

  t.test('what a receiver answers is recorded as it came, whatever its characters', async (t) => {
    const app = await startTestApp(t, engine);
    const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const key = tenant.keys.sk_test.secret;
    const answer = `"quoted" 'single' \\back\\slash {brace,comma} NULL ñandú 🏦\nline two\t[1,2]`;
    const receiver = await startReceiver(t, (_request, response) => {
      response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      response.end(answer);
    });
    const hook = await createEndpoint(app, key, receiver.url);
    const [eventId] = await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
    await new Dispatcher(app.services).dispatchDue();
    const list = await app.request(
      'GET',
      `/v1/webhook_deliveries?event_id=${eventId}&endpoint_id=${hook.id}`,
      {
        key,
      },
    );
    const delivery = (await app.request('GET', `/v1/webhook_deliveries/${list.body[0].id}`, { key })).body;
    t.match(delivery, { status: 'pending', attempts: 1, last_response_status: 500, last_error: 'HTTP 500' });
    t.equal(delivery.attempt_history[0].response_excerpt, answer);
  });

  t.test("a dispatcher that keeps running follows an endpoint's new URL and secret at once", async (t) => {
    const app = await startTestApp(t, engine);
    const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const key = tenant.keys.sk_test.secret;
    const first = await startReceiver(t);
    const second = await startReceiver(t);
    const hook = await createEndpoint(app, key, first.url);
    const dispatcher = new Dispatcher(app.services);
    t.teardown(() => dispatcher.close());
    await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
    await dispatcher.dispatchDue();
    t.equal(first.received.length, 1);

    // The clock stands still: the endpoint's updated_at does not change, its URL and secret do.
    const moved = await app.request('PATCH', `/v1/webhook_endpoints/${hook.id}`, {
      key,
      body: { url: second.url },
    });
    t.equal(moved.status, 200);
    await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
    await dispatcher.dispatchDue();
    t.equal(first.received.length, 1, 'nothing more to the old URL');
    t.equal(second.received.length, 1, 'the new URL at once');

    const rolled = await app.request('POST', `/v1/webhook_endpoints/${hook.id}/roll_secret`, {
      key,
      body: { grace_seconds: 0 },
    });
    t.equal(rolled.status, 200);
    await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
    await dispatcher.dispatchDue();
    const [, latest] = second.received;
    t.equal(independentlyVerified(latest!.body, latest!.headers['svc-signature'], rolled.body.secret), 1);
    t.equal(
      independentlyVerified(latest!.body, latest!.headers['svc-signature'], hook.secret),
      0,
      'the old secret no longer signs',
    );
  });
});
