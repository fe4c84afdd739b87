import { setTimeout as sleep } from 'node:timers/promises';
import type { Test } from 'tap';
import type { Database } from '../../src/db/database.js';
import { linkRefreshed } from '../../src/events/payloads.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { publishEvent } from '../../src/webhooks/fan-out.js';
import { createTenant, linkBody, RAISED_LIMITS, runSyncs, type TestApp } from './harness.js';
import { startReceiver } from './receiver.js';

/*
 * Webhook traffic for the dispatcher's and retention's tests: endpoints, and bursts of events written as the
 * sync writes them (fan-out in the event's transaction), without a bank or a sync to make them.
 */

/** A `link.refreshed` of a made-up link; `n` varies its body. */
export function sampleRefreshed(n: number, now: number) {
  const sync = { syncedAt: now, nextSyncAt: now, accountsCount: n, newMovements: 0 };
  return linkRefreshed({ id: 'link_0000000000000000' }, sync);
}

/** An endpoint at `url` for every event, of the key's organisation: its id and signing secret. */
export async function createEndpoint(app: Pick<TestApp, 'request'>, key: string, url: string) {
  const response = await app.request('POST', '/v1/webhook_endpoints', {
    key,
    body: { url, enabled_events: ['*'] },
  });
  if (response.status !== 200) throw new Error(`endpoint: ${response.text}`);
  return response.body as { id: string; secret: string };
}

/**
 * `count` `link.refreshed` events of the organisation in test mode, in one transaction: one delivery each per
 * endpoint. Their bodies are numbered from `from`; `clock` dates them. Answers their ids.
 */
export async function emitRefreshed(
  db: Pick<Database, 'transaction'>,
  orgId: string,
  count: number,
  clock: { now(): number },
  from = 0,
): Promise<string[]> {
  const ids: string[] = [];
  await db.transaction(async (trx) => {
    for (let i = 0; i < count; i++) {
      const event = await publishEvent(trx, {
        orgId,
        mode: 'test',
        type: 'link.refreshed',
        linkId: null,
        data: sampleRefreshed(from + i, clock.now()),
        now: clock.now(),
      });
      ids.push(event.id);
    }
  });
  return ids;
}

/**
 * What the retention tests start from: a tenant (limits out of reach) with a synced link and two endpoints
 * at a receiver, `stalled` for `refresh_intent.succeeded` (the tests disable it, so that its deliveries wait
 * and hold their events) and one for `link.refreshed`, whose deliveries go out. `fire` has the sandbox fire
 * an event of the link: its id.
 */
export async function tenantWithStalledEndpoint(t: Test, app: TestApp) {
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const receiver = await startReceiver(t);
  const endpoint = async (events: string[]) => {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: receiver.url, enabled_events: events },
    });
    if (created.status !== 200) throw new Error(created.text);
    return created.body.id as string;
  };
  const stalled = await endpoint(['refresh_intent.succeeded']);
  await endpoint(['link.refreshed']);
  const link = await app.request('POST', '/v1/links', { key: sk, body: linkBody() });
  t.equal(link.status, 200, link.text);
  await runSyncs(app);
  const fire = async (type: string) => {
    const fired = await app.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type, link_id: link.body.id },
    });
    if (fired.status !== 200) throw new Error(fired.text);
    return fired.body.id as string;
  };
  return { sk, stalled, receiver, fire };
}

/** Does `action` while sending what falls due, as a running dispatcher would (for a page that waits for it). */
export async function whileDispatching(
  app: Pick<TestApp, 'services'>,
  action: () => Promise<unknown>,
): Promise<void> {
  let done = false;
  const acting = action().finally(() => (done = true));
  while (!done) {
    await new Dispatcher(app.services).dispatchDue();
    await sleep(50);
  }
  await acting;
}
