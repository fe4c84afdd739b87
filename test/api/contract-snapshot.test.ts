import { readFileSync, writeFileSync } from 'node:fs';
import t from 'tap';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createTenant, forEachEngine, startTestApp, RAISED_LIMITS } from '../helpers/harness.js';
import { causeEveryEventType } from '../helpers/every-event.js';
import { startReceiver } from '../helpers/receiver.js';

/**
 * What integrators build against, held still: the served OpenAPI document, and the shape (keys in their
 * order, and the JSON type of each value) of every event type as a webhook body, as `GET /v1/events`
 * shows it, and as `POST /v1/sandbox/events/fire` makes it. A refactoring that changes any of them fails
 * here. A change made on purpose rewrites the fixture with `UPDATE_CONTRACT=1` and shows in its diff.
 */
const FIXTURE = new URL('../../../test/fixtures/contract.json', import.meta.url);

type Shape = string | Shape[] | { [key: string]: Shape };

/** A value's JSON type, recursively; objects keep their key order, arrays list their elements' shapes once. */
function shapeOf(value: unknown): Shape {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    const shapes = new Map(value.map((element) => [JSON.stringify(shapeOf(element)), shapeOf(element)]));
    return [...shapes.values()];
  }
  if (typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, shapeOf(inner)]));
  return typeof value;
}

/** Every shape seen per event type, each listed once, sorted so the fixture does not depend on timing. */
function shapesByType(events: { type: string }[]): Record<string, Shape[]> {
  const byType = new Map<string, Map<string, Shape>>();
  for (const event of events) {
    const seen = byType.get(event.type) ?? new Map<string, Shape>();
    seen.set(JSON.stringify(shapeOf(event)), shapeOf(event));
    byType.set(event.type, seen);
  }
  return Object.fromEntries(
    [...byType.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([type, shapes]) => [
        type,
        [...shapes.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, s]) => s),
      ]),
  );
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const receiver = await startReceiver(t);
  await app.request('POST', '/v1/webhook_endpoints', {
    key: sk,
    body: { url: receiver.url, enabled_events: ['*'] },
  });
  const dispatcher = new Dispatcher(app.services);
  t.teardown(() => dispatcher.close());
  // Each type from the flow that causes it; the mfa link stays, for the sandbox to fire about.
  const { mfa } = await causeEveryEventType(t, app, sk);
  await dispatcher.dispatchDue();
  const real = receiver.received.map((received) => received.event as { type: string });

  // Then each type fired from the sandbox about a live link.
  const types = [...new Set(real.map((event) => event.type))].sort();
  const fired = [];
  for (const type of types) {
    const response = await app.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type, link_id: mfa },
    });
    t.equal(response.status, 200, `${type} fires`);
    fired.push(response.body as { type: string });
  }

  const listed: { type: string }[] = [];
  for (let page = 1; ; page++) {
    const response = await app.request('GET', `/v1/events?per_page=300&page=${page}`, { key: sk });
    t.equal(response.status, 200);
    // Lists answer a bare array; the totals are in headers.
    listed.push(...(response.body as { type: string }[]));
    if (response.body.length < 300) break;
  }
  const openapi = (await app.request('GET', '/v1/openapi.json', { key: sk })).body;
  openapi.servers = openapi.servers.map((server: { url: string }) => ({ ...server, url: 'BASE_URL' }));

  const actual = {
    openapi,
    webhook_bodies: shapesByType(real),
    listed_events: shapesByType(listed),
    sandbox_fired: shapesByType(fired),
  };
  if (process.env.UPDATE_CONTRACT === '1' && engine === 'sqlite') {
    writeFileSync(FIXTURE, `${JSON.stringify(actual, null, 2)}\n`);
    t.comment(`wrote ${FIXTURE.pathname}`);
  }
  const expected = JSON.parse(readFileSync(FIXTURE, 'utf8'));

  t.equal(types.length, 10, 'the flows caused all ten types');
  // Compared as text: key order is part of what a receiver sees.
  const text = (value: unknown) => JSON.stringify(value, null, 1);
  t.equal(text(actual.openapi), text(expected.openapi), 'the OpenAPI document is unchanged');
  for (const part of ['webhook_bodies', 'listed_events', 'sandbox_fired'] as const)
    t.equal(text(actual[part]), text(expected[part]), `${part}: every event type keeps its shape`);
});
