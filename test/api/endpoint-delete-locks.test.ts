import t from 'tap';
import knexFactory from 'knex';
import {
  createTenant,
  engines,
  HANG_GUARD_MS,
  linkBody,
  RAISED_LIMITS,
  startTestApp,
} from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';
import { waitFor } from '../helpers/cli.js';
import { removeExpiredEndpoints } from '../../src/webhooks/endpoints.js';

/**
 * The dispatcher records a result on a delivery and then on its endpoint, in one transaction. Removing an
 * endpoint must take the same two locks in the same order, or PostgreSQL aborts one of the two as a
 * deadlock (seen in CI: the housekeeping pass that removes an expired listener's endpoint). SQLite's writers
 * take turns, so only PostgreSQL can interleave them.
 */
for (const engine of engines().filter((name) => name === 'postgres')) {
  t.test(engine, async (t) => {
    const app = await startTestApp(t, engine);
    const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const sk = tenant.keys.sk_test.secret;
    const receiver = await startReceiver(t);
    const endpoint = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: receiver.url, enabled_events: ['*'] },
    });
    t.equal(endpoint.status, 200);
    const link = await app.request('POST', '/v1/links', { key: sk, body: linkBody() });
    t.equal(link.status, 200);
    const fired = await app.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type: 'account.created', link_id: link.body.id },
    });
    t.equal(fired.status, 200);
    const endpointId = endpoint.body.id as string;
    const deliveries = () => app.db.knex('webhook_deliveries').where({ endpoint_id: endpointId });
    t.ok((await deliveries()).length > 0, 'the endpoint has deliveries');
    // A listener's endpoint that was not renewed in time.
    await app.db
      .knex('webhook_endpoints')
      .where({ id: endpointId })
      .update({ expires_at: app.clock.now() - 1 });

    const observer = knexFactory({ client: 'pg', connection: app.config.databaseUrl.split('?')[0] });
    t.teardown(() => observer.destroy());
    const waitingOnLocks = async () => {
      const rows = await observer.raw(
        "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()",
      );
      return rows.rows[0].n > 0 ? true : undefined;
    };

    // The dispatcher's order: first the delivery…
    const recorder = await app.db.knex.transaction();
    await recorder('webhook_deliveries').where({ endpoint_id: endpointId }).update({ attempts: 1 });
    const removal = removeExpiredEndpoints(app.db, app.clock.now()).then(
      (removed) => ({ removed }),
      (error: Error) => ({ error }),
    );
    t.ok(await waitFor(waitingOnLocks, HANG_GUARD_MS, 20), 'the removal waits for the delivery');
    // …then its endpoint, while the removal waits.
    const endpointUpdate = await recorder('webhook_endpoints')
      .where({ id: endpointId })
      .update({ unanswered_attempts: 1 })
      .then(
        () => null,
        (error: Error) => error,
      );
    if (endpointUpdate) await recorder.rollback().catch(() => undefined);
    else await recorder.commit();
    t.equal(endpointUpdate?.message ?? null, null, "the dispatcher's transaction is not aborted");
    const outcome = await removal;
    t.same(outcome, { removed: 1 }, 'and the removal is not aborted either: it removes the endpoint');
    t.equal(await app.db.knex('webhook_endpoints').where({ id: endpointId }).first(), undefined);
    t.equal((await deliveries()).length, 0, 'with its deliveries');
  });
}
