import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';
import { linkDeleted } from '../../src/events/payloads.js';
import { publishEvent } from '../../src/webhooks/fan-out.js';
import { defaultConfig } from '../../src/config/defaults.js';
import { Dispatcher, type DispatcherServices } from '../../src/webhooks/dispatch/dispatcher.js';
import { createEndpoint, TEMPORARY_ENDPOINT_TTL_MS } from '../../src/webhooks/endpoints.js';
import { operatorPrincipal } from '../../src/auth/principal.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  startTestApp,
  type TestApp,
  type TestTenant,
  RAISED_LIMITS,
} from '../helpers/harness.js';
import { independentlyVerified, ok, startReceiver } from '../helpers/receiver.js';

const SCHEDULE = [0, 10, 20, 30, 40, 50];
/** Long enough that an attempt cut at connection time cannot be mistaken for one that timed out. */
const CONNECT_TIMEOUT_MS = 60_000;
function dispatcherFor(t: Test, services: DispatcherServices): Dispatcher {
  const dispatcher = new Dispatcher(services);
  t.teardown(() => dispatcher.close());
  return dispatcher;
}

async function endpoint(app: TestApp, key: string, url: string, events: string[] = ['*']) {
  const response = await app.request('POST', '/v1/webhook_endpoints', {
    key,
    body: { url, enabled_events: events },
  });
  if (response.status !== 200) throw new Error(`endpoint: ${response.text}`);
  return response.body as { id: string; secret: string };
}

async function newLink(app: TestApp, key: string): Promise<string> {
  const response = await app.request('POST', '/v1/links', { key, body: linkBody() });
  if (response.status !== 200) throw new Error(`link: ${response.text}`);
  return response.body.id;
}

async function fire(app: TestApp, key: string, type: string, linkId: string) {
  const response = await app.request('POST', '/v1/sandbox/events/fire', {
    key,
    body: { type, link_id: linkId },
  });
  if (response.status !== 200) throw new Error(`fire: ${response.text}`);
  return response.body as { id: string; type: string };
}

async function deliveryOf(app: TestApp, key: string, eventId: string, endpointId: string) {
  const list = await app.request(
    'GET',
    `/v1/webhook_deliveries?event_id=${eventId}&endpoint_id=${endpointId}`,
    { key },
  );
  const [first] = list.body as { id: string }[];
  if (!first) throw new Error(`no delivery of ${eventId} to ${endpointId}`);
  return (await app.request('GET', `/v1/webhook_deliveries/${first.id}`, { key })).body;
}

t.test('the default retry schedule is the spec: immediately, 1 min, 5 min, 30 min, 2 h, 6 h', async (t) => {
  const settings = defaultConfig('/tmp').dispatcher;
  t.same(settings.retryScheduleSeconds, [0, 60, 300, 1800, 7200, 21600]);
  t.equal(settings.attemptTimeoutMs, 10_000);
});

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    config: { dispatcher: { retryScheduleSeconds: SCHEDULE, attemptTimeoutMs: 400 } },
  });
  const tenant: TestTenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const linkId = await newLink(app, sk);

  t.test('a delivery is the event JSON, signed, with the event id header and a user agent', async (t) => {
    const receiver = await startReceiver(t);
    const hook = await endpoint(app, sk, receiver.url, ['account.created']);
    const event = await fire(app, sk, 'account.created', linkId);
    const dispatcher = dispatcherFor(t, app.services);
    t.equal(await dispatcher.dispatchDue(), 1);
    t.equal(receiver.received.length, 1);
    const [got] = receiver.received;
    t.equal(got!.headers['content-type'], 'application/json');
    t.equal(got!.headers['svc-event-id'], event.id);
    t.match(got!.headers['user-agent'], /^Svc-Webhooks\//);
    t.equal(
      independentlyVerified(got!.body, got!.headers['svc-signature'], hook.secret),
      1,
      'signature verifies',
    );
    const stored = await app.request('GET', `/v1/events/${event.id}`, { key: sk });
    t.same(got!.event, stored.body, 'the body is the event as GET /v1/events/{id} returns it');
    t.match(got!.event, { object: 'event', id: event.id, type: 'account.created', mode: 'test' });
    const delivery = await deliveryOf(app, sk, event.id, hook.id);
    t.match(delivery, { status: 'succeeded', attempts: 1, last_response_status: 200, last_error: null });
    t.equal(delivery.next_attempt_at, null);
    t.match(delivery.attempt_history, [{ number: 1, status_code: 200, error: null, response_excerpt: 'ok' }]);
    t.equal(await dispatcher.dispatchDue(), 0, 'nothing more to do');
  });

  t.test(
    'a 500 gets exactly 6 attempts at the schedule offsets, then failed; redeliver sends once more',
    async (t) => {
      const receiver = await startReceiver(t, (_request, response) => {
        response.writeHead(500, { 'content-type': 'text/plain' });
        response.end('receiver exploded');
      });
      const hook = await endpoint(app, sk, receiver.url, ['link.refreshed']);
      const event = await fire(app, sk, 'link.refreshed', linkId);
      const dispatcher = dispatcherFor(t, app.services);
      const start = app.clock.now();
      await dispatcher.dispatchDue();
      t.equal(receiver.received.length, 1, 'attempt 1 is immediate');
      for (let attempt = 2; attempt <= 6; attempt++) {
        app.clock.advance(SCHEDULE[attempt - 1]! * 1000 - 1);
        await dispatcher.dispatchDue();
        t.equal(receiver.received.length, attempt - 1, `attempt ${attempt} not 1 ms early`);
        app.clock.advance(1);
        await dispatcher.dispatchDue();
        t.equal(receiver.received.length, attempt, `attempt ${attempt} after ${SCHEDULE[attempt - 1]} s`);
      }
      app.clock.advance(86_400_000);
      await dispatcher.dispatchDue();
      t.equal(receiver.received.length, 6, 'no seventh attempt');
      const delivery = await deliveryOf(app, sk, event.id, hook.id);
      t.match(delivery, {
        status: 'failed',
        attempts: 6,
        next_attempt_at: null,
        last_response_status: 500,
        last_error: 'HTTP 500',
      });
      const offsets = delivery.attempt_history.map(
        (a: { started_at: string }) => Date.parse(a.started_at) - start,
      );
      let at = 0;
      t.same(
        offsets,
        SCHEDULE.map((delay) => (at += delay * 1000)),
        'each attempt at its offset',
      );
      t.same(
        delivery.attempt_history.map((a: { number: number }) => a.number),
        [1, 2, 3, 4, 5, 6],
      );
      t.equal(delivery.attempt_history[0].response_excerpt, 'receiver exploded');
      const failedList = await app.request(
        'GET',
        `/v1/webhook_deliveries?status=failed&endpoint_id=${hook.id}`,
        {
          key: sk,
        },
      );
      t.same(
        failedList.body.map((d: { id: string }) => d.id),
        [delivery.id],
      );

      const again = await app.request('POST', `/v1/webhook_deliveries/${delivery.id}/redeliver`, { key: sk });
      t.equal(again.status, 200);
      t.match(again.body, {
        object: 'webhook_delivery',
        event_id: event.id,
        endpoint_id: hook.id,
        status: 'pending',
        attempts: 0,
        last_attempt_at: null,
      });
      t.not(again.body.id, delivery.id, 'a new attempt series');
      await dispatcher.dispatchDue();
      t.equal(receiver.received.length, 7, 'redeliver brings one more attempt');
      t.equal(receiver.received[6]!.event.id, event.id, 'of the same event');
      t.match((await deliveryOf(app, sk, event.id, hook.id)).status, 'pending');
      const original = (await app.request('GET', `/v1/webhook_deliveries/${delivery.id}`, { key: sk })).body;
      t.match(original, { status: 'failed', attempts: 6 }, 'the original is left as it was');
    },
  );

  t.test('a receiver that hangs is cut off at the deadline', async (t) => {
    const receiver = await startReceiver(t, () => undefined);
    const hook = await endpoint(app, sk, receiver.url, ['link.expired']);
    const event = await fire(app, sk, 'link.expired', linkId);
    const dispatcher = dispatcherFor(t, app.services);
    const began = Date.now();
    await dispatcher.dispatchDue();
    const took = Date.now() - began;
    t.equal(receiver.received.length, 1, 'the request arrived');
    // The receiver never answers: that the cycle ended at all, recording a timeout, is the cut.
    t.ok(took >= 380, `not before the deadline: cut after ${took} ms (deadline 400 ms)`);
    const delivery = await deliveryOf(app, sk, event.id, hook.id);
    t.match(delivery, { status: 'pending', attempts: 1, last_response_status: null });
    t.match(delivery.last_error, /timed out after 400 ms/);
    t.ok(delivery.attempt_history[0].duration_ms >= 380, 'the duration is recorded');
    t.equal(
      Date.parse(delivery.next_attempt_at) - app.clock.now(),
      SCHEDULE[1]! * 1000,
      'retried on the schedule',
    );
  });

  t.test('a redirect is not followed and counts as a failure', async (t) => {
    const target = await startReceiver(t);
    const redirecting = await startReceiver(t, (_request, response) => {
      response.writeHead(302, { location: target.url });
      response.end();
    });
    const hook = await endpoint(app, sk, redirecting.url, ['link.deleted']);
    const event = await fire(app, sk, 'link.deleted', linkId);
    await dispatcherFor(t, app.services).dispatchDue();
    t.equal(redirecting.received.length, 1);
    t.equal(target.received.length, 0, 'the redirect target got nothing');
    const delivery = await deliveryOf(app, sk, event.id, hook.id);
    t.match(delivery, { status: 'pending', attempts: 1, last_response_status: 302 });
    t.match(delivery.last_error, /redirect \(302 to http:\/\/127\.0\.0\.1:\d+\/hook\) not followed/);
  });

  t.test('during a secret roll two v1 values arrive, each verifying with one secret', async (t) => {
    const receiver = await startReceiver(t);
    const hook = await endpoint(app, sk, receiver.url, ['refresh_intent.created']);
    const rolled = await app.request('POST', `/v1/webhook_endpoints/${hook.id}/roll_secret`, {
      key: sk,
      body: { grace_seconds: 3600 },
    });
    const newSecret = rolled.body.secret as string;
    await fire(app, sk, 'refresh_intent.created', linkId);
    const dispatcher = dispatcherFor(t, app.services);
    await dispatcher.dispatchDue();
    const [during] = receiver.received;
    const header = during!.headers['svc-signature'] as string;
    t.equal(header.match(/v1=/g)?.length, 2, 'two v1 values');
    t.equal(independentlyVerified(during!.body, header, hook.secret), 1, 'one verifies with the old secret');
    t.equal(independentlyVerified(during!.body, header, newSecret), 1, 'one verifies with the new secret');

    app.clock.advance(3601_000);
    await fire(app, sk, 'refresh_intent.created', linkId);
    await dispatcher.dispatchDue();
    const after = receiver.received[1]!;
    const afterHeader = after.headers['svc-signature'] as string;
    t.equal(afterHeader.match(/v1=/g)?.length, 1, 'after the grace period, one v1');
    t.equal(independentlyVerified(after.body, afterHeader, newSecret), 1);
    t.equal(independentlyVerified(after.body, afterHeader, hook.secret), 0, 'the old secret no longer signs');
  });

  t.test("a disabled endpoint's deliveries wait, then go when it is enabled again", async (t) => {
    const receiver = await startReceiver(t);
    const hook = await endpoint(app, sk, receiver.url, ['refresh_intent.failed']);
    const event = await fire(app, sk, 'refresh_intent.failed', linkId);
    await app.request('PATCH', `/v1/webhook_endpoints/${hook.id}`, { key: sk, body: { disabled: true } });
    const dispatcher = dispatcherFor(t, app.services);
    await dispatcher.dispatchDue();
    t.equal(receiver.received.length, 0, 'nothing sent while disabled');
    const waiting = await deliveryOf(app, sk, event.id, hook.id);
    t.match(waiting, { status: 'pending', attempts: 0, next_attempt_at: null });
    const ignored = await fire(app, sk, 'refresh_intent.failed', linkId);
    const none = await app.request('GET', `/v1/webhook_deliveries?event_id=${ignored.id}`, { key: sk });
    t.same(none.body, [], 'an event emitted while disabled is not queued for it');
    const refused = await app.request('POST', `/v1/webhook_deliveries/${waiting.id}/redeliver`, { key: sk });
    t.equal(refused.status, 409);
    t.match(refused.body, { error: { code: 'endpoint_disabled' } });

    app.clock.advance(60_000);
    await app.request('PATCH', `/v1/webhook_endpoints/${hook.id}`, { key: sk, body: { disabled: false } });
    t.equal(
      (await deliveryOf(app, sk, event.id, hook.id)).next_attempt_at,
      new Date(app.clock.now()).toISOString(),
      'due at once when enabled',
    );
    await dispatcher.dispatchDue();
    t.equal(receiver.received.length, 1);
    t.equal(receiver.received[0]!.event.id, event.id);
  });

  t.test('a slow endpoint does not delay the others', async (t) => {
    const slowApp = await startTestApp(t, engine, {
      config: {
        dispatcher: {
          concurrency: 6,
          perEndpointConcurrency: 2,
          attemptTimeoutMs: 60_000,
          pollIntervalMs: 50,
        },
      },
    });
    const owner = await createTenant(slowApp, { rateLimits: RAISED_LIMITS });
    const key = owner.keys.sk_test.secret;
    const link = await newLink(slowApp, key);
    const slow = await startReceiver(t, () => undefined);
    const fast = await startReceiver(t);
    await endpoint(slowApp, key, slow.url, ['link.refreshed']);
    await endpoint(slowApp, key, fast.url, ['link.refreshed']);
    for (let i = 0; i < 8; i++) await fire(slowApp, key, 'link.refreshed', link);
    const controller = new AbortController();
    const dispatcher = new Dispatcher(slowApp.services);
    const running = dispatcher.run(controller.signal);
    // The slow receiver never answers, and its attempts may run for a minute: all 8 arriving while every
    // one of them is still open shows the fast endpoint never waited behind it.
    await fast.waitFor(8, 60_000);
    t.equal(
      slow.pending(),
      slow.received.length,
      'the fast endpoint got all 8 while the slow one still hangs',
    );
    // Its second request may still be on its way under load; once both are in, no third may follow.
    for (let waited = 0; slow.pending() < 2 && waited < 2000; waited += 20) await sleep(20);
    await sleep(200);
    t.equal(slow.pending(), 2, 'the slow endpoint holds only its two slots');
    await slow.close(); // its hung attempts fail now, so the dispatcher can stop
    controller.abort();
    await running;
  });

  t.test('a commit wakes the dispatcher long before its poll interval', async (t) => {
    const POLL_INTERVAL_MS = 600_000;
    const quietApp = await startTestApp(t, engine, {
      config: { dispatcher: { pollIntervalMs: POLL_INTERVAL_MS } },
    });
    const owner = await createTenant(quietApp, { rateLimits: RAISED_LIMITS });
    const key = owner.keys.sk_test.secret;
    const link = await newLink(quietApp, key);
    const receiver = await startReceiver(t);
    await endpoint(quietApp, key, receiver.url, ['account.removed']);
    const controller = new AbortController();
    const running = new Dispatcher(quietApp.services).run(controller.signal);
    await new Promise((resolve) => setTimeout(resolve, 300)); // asleep now, for ten minutes
    const began = Date.now();
    await fire(quietApp, key, 'account.removed', link);
    // A tenth of the poll interval: room for a slow machine, and still only a wake-up could explain it.
    await receiver.waitFor(1, POLL_INTERVAL_MS / 10);
    t.ok(
      Date.now() - began < POLL_INTERVAL_MS / 10,
      `delivered ${Date.now() - began} ms after the commit (poll interval ${POLL_INTERVAL_MS / 60_000} min)`,
    );
    controller.abort();
    await running;
  });

  t.test(
    'live mode refuses private, loopback, link-local and metadata addresses at connection time',
    async (t) => {
      // Endpoints created while the operator allowed private addresses, then the setting turned off.
      const liveApp = await startTestApp(t, engine, {
        config: {
          webhooks: { allowPrivateAddresses: true },
          dispatcher: { attemptTimeoutMs: CONNECT_TIMEOUT_MS },
        },
      });
      const owner = await createTenant(liveApp, { rateLimits: RAISED_LIMITS });
      const live = owner.keys.sk_live.secret;
      const receiver = await startReceiver(t);
      const urls = [
        receiver.url,
        `http://localhost:${receiver.port}/hook`,
        'https://10.0.0.1/hook',
        'https://169.254.169.254/latest/meta-data',
      ];
      for (const url of urls) await endpoint(liveApp, live, url);
      // And one inserted straight into the table, as no API would allow.
      await liveApp.db.knex('webhook_endpoints').insert({
        id: 'we_00000000000000aa',
        org_id: owner.orgId,
        mode: 'live',
        url: `http://127.0.0.1:${receiver.port}/direct`,
        enabled_events: JSON.stringify(['*']),
        disabled: false,
        secret_encrypted: liveApp.services.secrets.seal('whsec_direct', 'we_00000000000000aa'),
        created_at: liveApp.clock.now(),
        updated_at: liveApp.clock.now(),
      });
      const event = await liveApp.db.transaction((trx) =>
        publishEvent(trx, {
          orgId: owner.orgId,
          mode: 'live',
          type: 'link.deleted',
          linkId: null,
          data: linkDeleted({ id: 'link_0000000000000000' }, Date.now()),
          now: liveApp.clock.now(),
        }),
      );
      const strict: DispatcherServices = {
        ...liveApp.services,
        config: { ...liveApp.config, webhooks: { ...liveApp.config.webhooks, allowPrivateAddresses: false } },
      };
      const began = Date.now();
      await dispatcherFor(t, strict).dispatchDue();
      t.ok(
        Date.now() - began < CONNECT_TIMEOUT_MS / 2,
        `refused at once (${Date.now() - began} ms), not after a connect timeout of ${CONNECT_TIMEOUT_MS / 1000} s`,
      );
      t.equal(receiver.received.length, 0, 'nothing reached the loopback receiver');
      const deliveries = await liveApp.request('GET', `/v1/webhook_deliveries?event_id=${event.id}`, {
        key: live,
      });
      t.equal(deliveries.body.length, 5);
      for (const delivery of deliveries.body) {
        t.match(delivery, { status: 'pending', attempts: 1, last_response_status: null });
        t.match(delivery.last_error, /address refused/, delivery.endpoint_id);
      }

      // The same rows, with the operator's permission, do reach the receiver: the refusal was the policy.
      liveApp.clock.advance(SCHEDULE[1]! * 1000 + 60_000);
      await dispatcherFor(t, liveApp.services).dispatchDue();
      t.equal(receiver.received.length, 3, '127.0.0.1, localhost and the inserted row');
    },
  );

  t.test(
    "test mode: a tenant's endpoint cannot reach inside unless the operator allows it; a listener's can",
    async (t) => {
      const inside = await startReceiver(t, (_request, response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"internal":"secret configuration"}');
      });
      const listener = await startReceiver(t, ok);
      // Created while the operator allowed it, as on a development box; then the setting is turned off.
      const tenantHook = await endpoint(app, sk, `${inside.url}/admin`, ['link.created']);
      const temporary = await app.db.transaction((trx) =>
        createEndpoint(
          trx,
          operatorPrincipal(tenant.orgId, 'test', 'cli:test'),
          { url: listener.url, enabled_events: ['link.created'] },
          { secrets: app.services.secrets, addresses: app.config.webhooks },
          app.clock.now(),
          app.clock.now() + TEMPORARY_ENDPOINT_TTL_MS,
        ),
      );
      const strict: DispatcherServices = {
        ...app.services,
        config: {
          ...app.config,
          webhooks: { ...app.config.webhooks, allowPrivateAddressesInTestMode: false },
        },
      };
      const event = await fire(app, sk, 'link.created', linkId);
      await dispatcherFor(t, strict).dispatchDue();
      t.equal(inside.received.length, 0, "nothing reached the internal service from the tenant's endpoint");
      const refused = await deliveryOf(app, sk, event.id, tenantHook.id);
      t.match(refused, { status: 'pending', attempts: 1, last_response_status: null });
      t.match(refused.last_error, /address refused/);
      t.notMatch(JSON.stringify(refused), /secret configuration/, 'and the API shows nothing of its answer');
      t.equal(listener.received.length, 1, "the listener's temporary endpoint reached its loopback receiver");

      const moved = await app.request('PATCH', `/v1/webhook_endpoints/${temporary.id}`, {
        key: sk,
        body: { url: `${inside.url}/admin` },
      });
      t.equal(moved.status, 409, "a tenant cannot repoint the listener's endpoint");
      t.equal(moved.body.error.code, 'endpoint_temporary');
      t.equal(
        (await app.request('DELETE', `/v1/webhook_endpoints/${temporary.id}`, { key: sk })).status,
        200,
      );
    },
  );
});
