import type { Knex } from 'knex';
import t, { type Test } from 'tap';
import * as listTallies from '../../migrations/20261125000011_list_tallies.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { appWithTenants, forEachEngine, linkBody, runSyncs, type TestApp } from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';

/*
 * `X-Total-Count` of the event and delivery lists comes from tallies kept beside the rows (src/db/tallies.ts),
 * not from a count of them. Whatever happens to the rows (syncs emit events and queue deliveries, the
 * dispatcher finishes and retries them, a person redelivers, retention prunes, an endpoint is deleted,
 * housekeeping folds the tallies, a migration fills them from rows already there), every filter's total
 * must still be the number of rows it matches, counted here in the database, and another tenant's rows
 * never count.
 */

const DAY = 86_400_000;

type Where = (query: Knex.QueryBuilder) => Knex.QueryBuilder | void;

async function counted(app: TestApp, table: string, where: Where): Promise<number> {
  const query = app.db.knex(table);
  where(query);
  const [row] = await query.count({ n: '*' });
  return Number((row as { n: number | string }).n);
}

forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine, {
    // Two attempts, the second a minute later: the failing endpoint's deliveries pend, then fail.
    config: { dispatcher: { retryScheduleSeconds: [0, 60] } },
  });
  const good = await startReceiver(t);
  const bad = await startReceiver(t, (_request, response) => {
    response.writeHead(503);
    response.end('down');
  });
  const endpoints: string[] = [];
  for (const [key, url, events] of [
    [sk, good.url, ['*']],
    [sk, bad.url, ['account.created', 'link.refreshed']],
    [other.keys.sk_test.secret, good.url, ['*']],
  ] as const) {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url, enabled_events: events },
    });
    t.equal(created.status, 200, created.text);
    endpoints.push(created.body.id);
  }
  let rutSeq = 1;
  const newLink = async (key = sk) => {
    const n = rutSeq++;
    const body = linkBody({
      credentials: { rut: `${n}${n}.${n}${n}${n}.${n}${n}${n}-${n}`, password: 'sandbox' },
    });
    const created = await app.request('POST', '/v1/links', { key, body });
    if (created.status !== 200) throw new Error(created.text);
    return created.body.id as string;
  };
  const dispatch = () => new Dispatcher(app.services).dispatchDue();

  const totalOf = async (path: string) => {
    const response = await app.request('GET', path, { key: sk });
    t.equal(response.status, 200, path);
    return Number(response.headers.get('x-total-count'));
  };

  /** Every filter of both lists: the header against the rows. */
  const checkTotals = async (t: Test, when: string) => {
    const own = (query: Knex.QueryBuilder) => query.where({ org_id: tenant.orgId, mode: 'test' });
    const types: string[] = (await own(app.db.knex('events')).distinct('type')).map(
      (row: { type: string }) => row.type,
    );
    const links: string[] = (
      await own(app.db.knex('events')).whereNotNull('link_id').distinct('link_id')
    ).map((row: { link_id: string }) => row.link_id);
    t.ok(types.length >= 2, `${when}: events of several types`);
    const eventCases: [string, Where][] = [
      ['', own],
      ...types.map((type): [string, Where] => [`type=${type}`, (q) => own(q).where({ type })]),
      ...links.map((link): [string, Where] => [`link_id=${link}`, (q) => own(q).where({ link_id: link })]),
      [
        `created_after=${new Date(app.clock.now() - DAY).toISOString()}`,
        (q) => own(q).where('created_at', '>', app.clock.now() - DAY),
      ],
    ];
    for (const [filter, where] of eventCases) {
      t.equal(
        await totalOf(`/v1/events?per_page=1&${filter}`),
        await counted(app, 'events', where),
        `${when}: events ${filter}`,
      );
    }
    const [oneEvent] = await own(app.db.knex('webhook_deliveries')).orderBy('created_at', 'desc').limit(1);
    const deliveryCases: [string, Where][] = [
      ['', own],
      [`event_id=${oneEvent.event_id}`, (q) => own(q).where({ event_id: oneEvent.event_id })],
    ];
    for (const status of ['pending', 'succeeded', 'failed']) {
      deliveryCases.push([`status=${status}`, (q) => own(q).where({ status })]);
      for (const endpoint of endpoints.slice(0, 2)) {
        deliveryCases.push([
          `endpoint_id=${endpoint}&status=${status}`,
          (q) => own(q).where({ endpoint_id: endpoint, status }),
        ]);
      }
    }
    for (const endpoint of endpoints.slice(0, 2)) {
      deliveryCases.push([`endpoint_id=${endpoint}`, (q) => own(q).where({ endpoint_id: endpoint })]);
    }
    for (const [filter, where] of deliveryCases) {
      t.equal(
        await totalOf(`/v1/webhook_deliveries?per_page=1&${filter}`),
        await counted(app, 'webhook_deliveries', where),
        `${when}: deliveries ${filter}`,
      );
    }
  };

  const housekeep = async (eventsDays = 30) => {
    app.clock.advance(60_000); // a new housekeeping tick
    await runHousekeeping({
      ...app.services,
      config: { ...app.config, retention: { ...app.config.retention, eventsDays } },
    });
  };

  // History: syncs of two tenants, every delivery attempted once (the failing endpoint's wait a minute).
  for (let i = 0; i < 3; i++) await newLink();
  await newLink(other.keys.sk_test.secret);
  await runSyncs(app);
  await dispatch();
  await t.test('after syncs and first attempts', (t) => checkTotals(t, 'first attempts'));
  t.ok(
    (await counted(app, 'webhook_deliveries', (q) =>
      q.where({ status: 'pending', endpoint_id: endpoints[1] }),
    )) > 0,
  );

  app.clock.advance(61_000);
  await dispatch(); // the failing endpoint's second and last attempts: failed
  const [failed] = await app.db.knex('webhook_deliveries').where({ status: 'failed', org_id: tenant.orgId });
  t.ok(failed, 'a delivery failed');
  const redelivered = await app.request('POST', `/v1/webhook_deliveries/${failed.id}/redeliver`, { key: sk });
  t.equal(redelivered.status, 200, redelivered.text);
  await t.test('after retries and a redelivery', (t) => checkTotals(t, 'retries'));

  await housekeep();
  const keys = await app.db.knex('event_tallies').distinct('org_id', 'mode', 'type');
  t.equal(
    await counted(app, 'event_tallies', () => undefined),
    keys.length,
    'housekeeping folded the event tallies into one row per key',
  );
  await t.test('after housekeeping folded the tallies', (t) => checkTotals(t, 'folded'));

  // Forty days on, new history; retention prunes the old events with their finished deliveries.
  app.clock.advance(40 * DAY);
  await newLink();
  await runSyncs(app);
  await dispatch();
  const eventsBefore = await counted(app, 'events', (q) => q.where({ org_id: tenant.orgId }));
  await housekeep();
  t.ok(
    (await counted(app, 'events', (q) => q.where({ org_id: tenant.orgId }))) < eventsBefore,
    'retention pruned events',
  );
  await t.test('after retention', (t) => checkTotals(t, 'pruned'));

  const deleted = await app.request('DELETE', `/v1/webhook_endpoints/${endpoints[1]}`, { key: sk });
  t.equal(deleted.status, 200, deleted.text);
  t.equal(
    await counted(app, 'webhook_delivery_tallies', (q) => q.where({ endpoint_id: endpoints[1] })),
    0,
    'a deleted endpoint leaves no tally',
  );
  await t.test('after an endpoint was deleted', (t) => checkTotals(t, 'endpoint deleted'));

  // A database that had rows before the tallies: the migration (the latest) fills them from the rows.
  await listTallies.down(app.db.knex);
  await listTallies.up(app.db.knex);
  await t.test('after the migration filled the tallies from the rows', (t) => checkTotals(t, 'migrated'));
  t.equal(
    (
      await app.request('GET', '/v1/webhook_deliveries?per_page=1', { key: other.keys.sk_test.secret })
    ).headers.get('x-total-count'),
    String(await counted(app, 'webhook_deliveries', (q) => q.where({ org_id: other.orgId }))),
    "the other tenant's total counts its own deliveries",
  );
});
