import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  HANG_GUARD_MS,
  createTenant,
  forEachEngine,
  RAISED_LIMITS,
  startTestApp,
} from '../helpers/harness.js';
import { createEndpoint, emitRefreshed } from '../helpers/webhook-events.js';
import { ok, startReceiver, startTarpit } from '../helpers/receiver.js';
import { runCli, runCliJson } from '../helpers/cli.js';

/**
 * The dispatcher's capacity is shared: one organisation whose endpoints take requests and never answer
 * must not hold up another organisation's deliveries (before, its 40 endpoints took all 32 slots and every
 * other delivery waited out their deadlines).
 */

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
      for (let i = 0; i < 40; i++) await createEndpoint(app, b.keys.sk_test.secret, tarpit.url(`/b/${i}`));
      await createEndpoint(app, a.keys.sk_test.secret, healthy.url);
      // B's backlog is older than anything of A's, so ordering by due time alone would put A last.
      await emitRefreshed(app.db, b.orgId, 3, app.clock);

      const controller = new AbortController();
      const running = new Dispatcher(app.services).run(controller.signal);
      try {
        t.ok(await until(() => tarpit.accepted() > 0), "B's attempts are out");
        await sleep(500); // and as many as will go out have gone
        const held = tarpit.open();
        t.ok(held < concurrency, `B holds ${held} of the ${concurrency} slots, not all of them`);

        const [eventId] = await emitRefreshed(app.db, a.orgId, 1, app.clock);
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

  t.test(
    'an endpoint that keeps going unanswered is backed off, shows it, is left alone, then resumes',
    async (t) => {
      const INITIAL_MS = 60_000;
      const app = await startTestApp(t, engine, {
        config: {
          dispatcher: {
            retryScheduleSeconds: [0, 10, 20, 30, 40, 50],
            attemptTimeoutMs: 300,
            perEndpointConcurrency: 4,
            backoffAfterUnanswered: 4,
            backoffInitialSeconds: INITIAL_MS / 1000,
            backoffMaxSeconds: 600,
          },
        },
      });
      const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
      const sk = tenant.keys.sk_test.secret;
      // Takes each request and never answers, until told to.
      const receiver = await startReceiver(t, () => undefined);
      const hook = await createEndpoint(app, sk, receiver.url);
      const events = await emitRefreshed(app.db, tenant.orgId, 6, app.clock);
      const dispatcher = new Dispatcher(app.services);
      t.teardown(() => dispatcher.close());
      const readEndpoint = async () =>
        (await app.request('GET', `/v1/webhook_endpoints/${hook.id}`, { key: sk })).body as {
          unanswered_attempts: number;
          backoff_until: string | null;
        };
      const deliveries = async () =>
        (await app.request('GET', `/v1/webhook_deliveries?endpoint_id=${hook.id}&per_page=100`, { key: sk }))
          .body as { event_id: string; attempts: number; status: string; next_attempt_at: string | null }[];
      t.match(await readEndpoint(), { unanswered_attempts: 0, backoff_until: null }, 'healthy to begin with');

      // Four go out at once (its limit), all four time out: the threshold.
      await dispatcher.dispatchDue();
      t.equal(receiver.received.length, 4, 'four attempts, at its limit');
      const backedOff = await readEndpoint();
      const until = app.clock.now() + INITIAL_MS;
      t.match(backedOff, { unanswered_attempts: 4, backoff_until: new Date(until).toISOString() });
      const waiting = await deliveries();
      t.equal(waiting.length, 6);
      t.same(
        waiting.map((d) => d.attempts).sort(),
        [0, 0, 1, 1, 1, 1],
        'the two never sent are not charged for the wait',
      );
      t.ok(
        waiting.every((d) => d.status === 'pending' && d.next_attempt_at === backedOff.backoff_until),
        'every delivery waits for the end of the back-off, the retry schedule’s 10 s included',
      );

      // The operator sees it, in the table and in JSON.
      // The CLI's clock is the test's: the system clock moved to the test's time.
      const cli = {
        home: app.config.home,
        env: {
          SVC_DATABASE_URL: app.config.databaseUrl,
          SVC_CLOCK_OFFSET_MS: String(app.clock.now() - Date.now()),
        },
      };
      const listed = await runCliJson<{ id: string; unanswered_attempts: number; backoff_until: string }[]>(
        t,
        ['webhooks', 'endpoints'],
        cli,
      );
      t.match(
        listed.find((e) => e.id === hook.id),
        {
          unanswered_attempts: 4,
          backoff_until: backedOff.backoff_until,
        },
      );
      const table = await runCli(['webhooks', 'endpoints'], cli);
      t.match(
        table.stdout,
        `${hook.id}  ${tenant.orgId}  test  backed off until ${backedOff.backoff_until} (4 unanswered)  ${receiver.url}`,
      );

      // Nothing is attempted while it lasts, and a new event waits with the others.
      app.clock.advance(INITIAL_MS - 1);
      const [later] = await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
      t.equal(await dispatcher.dispatchDue(), 0);
      t.equal(receiver.received.length, 4, 'no attempt while backed off');
      t.match(
        (await deliveries()).find((d) => d.event_id === later),
        { next_attempt_at: backedOff.backoff_until },
      );

      // At its end one attempt tries the endpoint; unanswered again, the back-off doubles.
      app.clock.advance(1);
      await dispatcher.dispatchDue();
      t.equal(receiver.received.length, 5, 'one attempt, not four');
      t.match(await readEndpoint(), {
        unanswered_attempts: 5,
        backoff_until: new Date(app.clock.now() + 2 * INITIAL_MS).toISOString(),
      });

      // The receiver is fixed: at the end of the back-off everything goes, and the endpoint is healthy again.
      receiver.setHandler(ok);
      app.clock.advance(2 * INITIAL_MS);
      await dispatcher.dispatchDue();
      const delivered = new Set(receiver.received.slice(5).map((r) => r.event.id));
      t.same([...delivered].sort(), [...events, later].sort(), 'every event arrived once it answered');
      t.match(await readEndpoint(), { unanswered_attempts: 0, backoff_until: null });
      t.ok((await deliveries()).every((d) => d.status === 'succeeded'));
      t.equal(
        (await deliveries()).reduce((sum, d) => sum + d.attempts, 0),
        receiver.received.length,
        'one attempt charged per request made, none for the waits',
      );
    },
  );

  t.test('a redelivery or an update of the endpoint ends its back-off', async (t) => {
    const HOUR_MS = 3_600_000;
    const app = await startTestApp(t, engine, {
      config: {
        dispatcher: {
          attemptTimeoutMs: 300,
          backoffAfterUnanswered: 1,
          backoffInitialSeconds: HOUR_MS / 1000,
        },
      },
    });
    const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const sk = tenant.keys.sk_test.secret;
    const tarpit = await startTarpit(t);
    const hook = await createEndpoint(app, sk, tarpit.url());
    const [first] = await emitRefreshed(app.db, tenant.orgId, 1, app.clock);
    const dispatcher = new Dispatcher(app.services);
    t.teardown(() => dispatcher.close());
    const readEndpoint = async () =>
      (await app.request('GET', `/v1/webhook_endpoints/${hook.id}`, { key: sk })).body;
    const deliveries = async () =>
      (await app.request('GET', `/v1/webhook_deliveries?endpoint_id=${hook.id}`, { key: sk })).body as {
        id: string;
        event_id: string;
        attempts: number;
        next_attempt_at: string | null;
      }[];
    const backedOff = {
      unanswered_attempts: 1,
      backoff_until: new Date(app.clock.now() + HOUR_MS).toISOString(),
    };
    await dispatcher.dispatchDue();
    t.match(await readEndpoint(), backedOff, 'one unanswered attempt backs it off for an hour');

    const [waiting] = await deliveries();
    const redelivered = await app.request('POST', `/v1/webhook_deliveries/${waiting!.id}/redeliver`, {
      key: sk,
    });
    t.equal(redelivered.status, 200);
    t.match(await readEndpoint(), { unanswered_attempts: 0, backoff_until: null }, 'a redelivery ends it');
    const now = new Date(app.clock.now()).toISOString();
    t.ok(
      (await deliveries()).every((d) => d.event_id === first && d.next_attempt_at === now),
      'the new delivery and the one that waited are both due at once',
    );
    await dispatcher.dispatchDue();
    t.same(
      (await deliveries()).map((d) => d.attempts).sort(),
      [1, 2],
      'both tried at once: its count started again from 0',
    );
    t.match(await readEndpoint(), { unanswered_attempts: 2, backoff_until: /Z$/ }, 'and backed off again');

    const receiver = await startReceiver(t);
    const patched = await app.request('PATCH', `/v1/webhook_endpoints/${hook.id}`, {
      key: sk,
      body: { url: receiver.url },
    });
    t.match(patched.body, { unanswered_attempts: 0, backoff_until: null }, 'an update ends it');
    t.ok(
      (await deliveries()).every((d) => d.next_attempt_at === now),
      'its deliveries are due at once',
    );
    await dispatcher.dispatchDue();
    t.equal(receiver.received.length, 2, 'and sent');
    t.match(await readEndpoint(), { unanswered_attempts: 0, backoff_until: null });
  });
});
