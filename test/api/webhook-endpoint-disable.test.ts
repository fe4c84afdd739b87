import t from 'tap';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  appWithTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  setTimeLimit,
  TEST_EPOCH,
} from '../helpers/harness.js';
import { ok, startReceiver, type Handler } from '../helpers/receiver.js';

/*
 * Issue 28, item 11: end what never ends. An endpoint whose every attempt has failed for
 * `webhooks.disableAfterFailingDays` (3 by default) is disabled with a `webhook_endpoint.disabled` event,
 * its pending deliveries end `failed`, and the API says why; one that succeeded within the window stays.
 * Real receivers over HTTP, the app's clock moved six hours at a time.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

setTimeLimit(t, 300_000);

const failing: Handler = (_request, response) => {
  response.writeHead(503);
  response.end('down');
};

forEachEngine(t, async (t, engine) => {
  const { app, sk } = await appWithTenant(t, engine);
  t.equal(app.config.webhooks.disableAfterFailingDays, 3, 'three days by default');
  const dead = await startReceiver(t, failing);
  const flaky = await startReceiver(t, failing);
  const watcher = await startReceiver(t, ok);
  const endpoint = async (url: string, events: string[]) => {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url, enabled_events: events },
    });
    t.equal(created.status, 200, created.text);
    return created.body.id as string;
  };
  const deadId = await endpoint(dead.url, ['link.refreshed']);
  const flakyId = await endpoint(flaky.url, ['link.refreshed']);
  await endpoint(watcher.url, ['webhook_endpoint.disabled']);
  const link = await app.request('POST', '/v1/links', { key: sk, body: linkBody() });
  t.equal(link.status, 200, link.text);
  const dispatcher = new Dispatcher(app.services);
  t.teardown(() => dispatcher.close());
  await runSyncs(app); // its first sync's link.refreshed: the first failures of both
  await dispatcher.dispatchDue();
  const get = async (id: string) =>
    (await app.request('GET', `/v1/webhook_endpoints/${id}`, { key: sk })).body;
  const fire = async () => {
    const fired = await app.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type: 'link.refreshed', link_id: link.body.id },
    });
    t.equal(fired.status, 200, fired.text);
  };
  /** Six hours on, an event, every delivery due made. */
  const sixHoursOn = async () => {
    app.clock.advance(6 * HOUR);
    await fire();
    await dispatcher.dispatchDue();
  };
  const firstFailure = new Date(TEST_EPOCH).toISOString();
  t.match(await get(deadId), { disabled: false, disabled_reason: null, failing_since: firstFailure });

  t.test('within the window, failing endpoints stay enabled', async (t) => {
    for (let hours = 6; hours <= 48; hours += 6) await sixHoursOn();
    // The flaky receiver answers once, on the second day.
    flaky.setHandler((request, response) => {
      flaky.setHandler(failing);
      ok(request, response);
    });
    for (let hours = 54; hours <= 66; hours += 6) await sixHoursOn();
    t.match(await get(deadId), { disabled: false, failing_since: firstFailure }, '66 hours of failures');
    const flakyNow = await get(flakyId);
    t.equal(flakyNow.disabled, false);
    t.ok(Date.parse(flakyNow.failing_since) >= TEST_EPOCH + 48 * HOUR, 'failing again since its success');
    t.equal(
      (await app.request('GET', '/v1/events?type=webhook_endpoint.disabled', { key: sk })).body.length,
      0,
    );
  });

  t.test('past three days of failures the endpoint is disabled, with an event', async (t) => {
    const attemptsBefore = dead.received.length;
    await sixHoursOn(); // 72 hours: the attempt that fails is the one past the window
    t.ok(dead.received.length > attemptsBefore, 'it was tried, and failed');
    const disabled = await get(deadId);
    t.match(disabled, { disabled: true, disabled_reason: 'failing', failing_since: firstFailure });
    const listed = await app.request('GET', '/v1/webhook_endpoints', { key: sk });
    t.match(
      listed.body.find((e: { id: string }) => e.id === deadId),
      { disabled: true, disabled_reason: 'failing' },
      'the list says it too',
    );

    const pending = await app.request('GET', `/v1/webhook_deliveries?endpoint_id=${deadId}&status=pending`, {
      key: sk,
    });
    t.equal(pending.body.length, 0, 'no delivery of it is pending any more');
    const failed = await app.request(
      'GET',
      `/v1/webhook_deliveries?endpoint_id=${deadId}&status=failed&per_page=100`,
      { key: sk },
    );
    const endedByDisable = failed.body.filter((d: { last_error: string }) =>
      /^endpoint_disabled: every attempt failed for 3 days/.test(d.last_error ?? ''),
    );
    t.ok(endedByDisable.length > 0, `${endedByDisable.length} deliveries ended failed by the disable`);
    t.equal(
      Number(
        (
          await app.db
            .knex('webhook_delivery_tallies')
            .where({ endpoint_id: deadId, status: 'pending' })
            .sum({ n: 'n' })
        )[0]?.n ?? 0,
      ),
      0,
      'and the pending count says so',
    );

    const events = await app.request('GET', '/v1/events?type=webhook_endpoint.disabled', { key: sk });
    t.equal(events.body.length, 1, 'one webhook_endpoint.disabled event');
    t.same(events.body[0].data, {
      object: 'webhook_endpoint',
      id: deadId,
      url: dead.url,
      disabled: true,
      disabled_reason: 'failing',
      failing_since: firstFailure,
      disabled_at: new Date(app.clock.now()).toISOString(),
    });
    const got = watcher.received.filter((r) => r.event.type === 'webhook_endpoint.disabled');
    t.equal(got.length, 1, 'delivered to the endpoint that subscribes to it');
    t.equal(got[0]?.event.id, events.body[0].id);

    t.match(await get(flakyId), { disabled: false, disabled_reason: null }, 'a success within the window');

    // Nothing more is queued for it, nor sent.
    const sent = dead.received.length;
    await sixHoursOn();
    app.clock.advance(DAY);
    await dispatcher.dispatchDue();
    t.equal(dead.received.length, sent, 'no attempt after the disable');
  });

  t.test('enabled again, it starts from a clean slate', async (t) => {
    const enabled = await app.request('PATCH', `/v1/webhook_endpoints/${deadId}`, {
      key: sk,
      body: { disabled: false },
    });
    t.equal(enabled.status, 200, enabled.text);
    t.match(enabled.body, { disabled: false, disabled_reason: null, failing_since: null });
    const requested = await app.request('PATCH', `/v1/webhook_endpoints/${flakyId}`, {
      key: sk,
      body: { disabled: true },
    });
    t.match(requested.body, { disabled: true, disabled_reason: 'requested' });
  });
});
