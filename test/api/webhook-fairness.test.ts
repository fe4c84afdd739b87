import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { emitEvent } from '../../src/events/outbox.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import {
  HANG_GUARD_MS,
  createTenant,
  forEachEngine,
  RAISED_LIMITS,
  startTestApp,
  type TestApp,
} from '../helpers/harness.js';
import { startReceiver, startTarpit } from '../helpers/receiver.js';

/**
 * The dispatcher's capacity is shared: one organisation whose endpoints take requests and never answer
 * must not hold up another organisation's deliveries (before, its 40 endpoints took all 32 slots and every
 * other delivery waited out their deadlines).
 */

async function endpoint(app: TestApp, key: string, url: string) {
  const response = await app.request('POST', '/v1/webhook_endpoints', {
    key,
    body: { url, enabled_events: ['*'] },
  });
  if (response.status !== 200) throw new Error(`endpoint: ${response.text}`);
  return response.body as { id: string; secret: string };
}

/** `count` events for the organisation, in one transaction: one delivery each per endpoint. */
async function emit(app: TestApp, orgId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  await app.db.transaction(async (trx) => {
    for (let i = 0; i < count; i++) {
      const event = await emitEvent(trx, {
        orgId,
        mode: 'test',
        type: 'link.refreshed',
        linkId: null,
        data: { object: 'link', id: 'link_0000000000000000', status: 'active', i },
        now: app.clock.now(),
      });
      ids.push(event.id);
    }
  });
  return ids;
}

async function until(check: () => boolean, timeoutMs = HANG_GUARD_MS): Promise<boolean> {
  for (let waited = 0; !check(); waited += 20) {
    if (waited >= timeoutMs) return false;
    await sleep(20);
  }
  return true;
}

forEachEngine(t, async (t, engine) => {
  t.test(
    "one organisation's hanging endpoints do not hold up another organisation's deliveries",
    async (t) => {
      // Long enough that no hanging attempt ends while the test looks, on a slow machine too.
      const ATTEMPT_TIMEOUT_MS = 8000;
      const app = await startTestApp(t, engine, {
        config: { dispatcher: { attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, pollIntervalMs: 50 } },
      });
      const { concurrency } = app.config.dispatcher;
      const a = await createTenant(app, { rateLimits: RAISED_LIMITS });
      const b = await createTenant(app, { rateLimits: RAISED_LIMITS });
      const tarpit = await startTarpit(t);
      const healthy = await startReceiver(t);
      // More hanging endpoints than the dispatcher has slots, each with more deliveries than its own limit.
      for (let i = 0; i < 40; i++) await endpoint(app, b.keys.sk_test.secret, tarpit.url(`/b/${i}`));
      await endpoint(app, a.keys.sk_test.secret, healthy.url);
      // B's backlog is older than anything of A's, so ordering by due time alone would put A last.
      await emit(app, b.orgId, 3);

      const controller = new AbortController();
      const running = new Dispatcher(app.services).run(controller.signal);
      try {
        t.ok(await until(() => tarpit.accepted() > 0), "B's attempts are out");
        await sleep(500); // and as many as will go out have gone
        const held = tarpit.open();
        t.ok(held < concurrency, `B holds ${held} of the ${concurrency} slots, not all of them`);

        const [eventId] = await emit(app, a.orgId, 1);
        const [got] = await healthy.waitFor(1, HANG_GUARD_MS);
        t.equal(got!.event.id, eventId);
        const firstGaveUp = tarpit.firstClosedAt();
        t.ok(
          firstGaveUp === null || firstGaveUp > got!.at,
          `A's delivery arrived while every one of B's attempts still hung (B's first attempt ended ${
            firstGaveUp === null ? 'later' : `${firstGaveUp - got!.at} ms after it`
          }; deadline ${ATTEMPT_TIMEOUT_MS} ms)`,
        );
        t.equal(tarpit.open(), tarpit.accepted(), 'none of B’s attempts had ended');
      } finally {
        // Its hanging attempts fail now, so the dispatcher can stop at once.
        await tarpit.close();
        controller.abort();
        await running;
      }
    },
  );
});
