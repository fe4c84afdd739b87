import t from 'tap';
import parseLinkHeader from 'parse-link-header';
import { EVENT_TYPES } from '../../src/events/catalogue.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  appWithTenants,
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  tableCounts,
} from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';

/** The spec's catalogue: the data fields of each type. */
const CATALOGUE: Record<string, string[]> = {
  'link.created': ['object', 'id', 'bank_id', 'status', 'holder_name', 'created_at'],
  'link.refreshed': [
    'object',
    'id',
    'status',
    'last_synced_at',
    'next_sync_at',
    'accounts_count',
    'new_movements_count',
  ],
  'link.expired': ['object', 'id', 'status', 'last_error_code', 'expired_at'],
  'link.deleted': ['object', 'id', 'deleted_at'],
  'account.created': ['object', 'id', 'link_id', 'name', 'type', 'currency', 'last_4'],
  'account.removed': ['object', 'id', 'link_id', 'status', 'removed_at'],
  'refresh_intent.created': ['object', 'id', 'link_id', 'status', 'refresh_type'],
  'refresh_intent.requires_mfa': ['object', 'id', 'link_id', 'status', 'requires_mfa'],
  'refresh_intent.succeeded': ['object', 'id', 'link_id', 'status', 'completed_at', 'summary'],
  'refresh_intent.failed': ['object', 'id', 'link_id', 'status', 'error_code', 'completed_at'],
  // The appliance's own (docs/open-finance.md, docs/webhook-endpoints.md).
  'link.consent_expiring': ['object', 'link_id', 'status', 'expires_at', 'days_left'],
  'webhook_endpoint.disabled': [
    'object',
    'id',
    'url',
    'disabled',
    'disabled_reason',
    'failing_since',
    'disabled_at',
  ],
};

forEachEngine(t, async (t, engine) => {
  // Two attempts, back to back: a receiver that fails is `failed` after one dispatch.
  // Private addresses allowed, so a live-mode endpoint can be created without a resolvable public host.
  const { app, tenant, other, sk } = await appWithTenants(t, engine, {
    config: { dispatcher: { retryScheduleSeconds: [0, 0] }, webhooks: { allowPrivateAddresses: true } },
  });
  const live = tenant.keys.sk_live.secret;
  const link = (await app.request('POST', '/v1/links', { key: sk, body: linkBody() })).body;
  await runSyncs(app);
  const fire = (type: string, linkId = link.id, key = sk) =>
    app.request('POST', '/v1/sandbox/events/fire', { key, body: { type, link_id: linkId } });

  const good = await startReceiver(t);
  const bad = await startReceiver(t, (_request, response) => {
    response.writeHead(503);
    response.end('down for maintenance');
  });
  const goodHook = (
    await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: good.url, enabled_events: ['*'] },
    })
  ).body;
  const badHook = (
    await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: bad.url, enabled_events: ['link.refreshed', 'link.expired'] },
    })
  ).body;
  const liveHook = (
    await app.request('POST', '/v1/webhook_endpoints', {
      key: live,
      body: { url: 'https://127.0.0.1:9/hook', enabled_events: ['*'] },
    })
  ).body;

  t.test(
    'sandbox firing: every catalogue type, with the catalogue data, to test-mode endpoints only',
    async (t) => {
      const jobsBefore = Number((await app.db.knex('jobs').count({ n: '*' }))[0]?.n);
      const linkBefore = await app.db.knex('links').where({ id: link.id }).first();
      const account = await app.db.knex('accounts').where({ link_id: link.id }).orderBy('created_at').first();
      for (const type of EVENT_TYPES) {
        const response = await fire(type);
        t.equal(response.status, 200, type);
        t.match(response.body, { object: 'event', type, mode: 'test' });
        t.match(response.body.id, /^evt_[0-9a-f]{16}$/);
        t.same(Object.keys(response.body.data).sort(), [...CATALOGUE[type]!].sort(), `${type} data fields`);
        if (type.startsWith('account.'))
          t.equal(response.body.data.id, account.id, "one of the link's accounts");
        if (type.startsWith('refresh_intent.')) t.match(response.body.data.id, /^ri_[0-9a-f]{16}$/);
        if (type === 'link.consent_expiring') t.equal(response.body.data.link_id, link.id);
        else if (type !== 'link.created' && type.startsWith('link.')) t.equal(response.body.data.id, link.id);
        if (type.startsWith('webhook_endpoint.')) t.match(response.body.data.id, /^we_[0-9a-f]{16}$/);
      }
      const mfa = (await fire('refresh_intent.requires_mfa')).body.data;
      t.match(mfa, { status: 'requires_mfa', requires_mfa: { widget_token: /^ri_[0-9a-f]{16}_sec_/ } });
      t.ok(mfa.requires_mfa.widget_token.startsWith(`${mfa.id}_sec_`), 'the token names its intent');
      t.equal(Number((await app.db.knex('jobs').count({ n: '*' }))[0]?.n), jobsBefore, 'no sync was queued');
      t.same(
        await app.db.knex('links').where({ id: link.id }).first(),
        linkBefore,
        'the link did not change',
      );
      const toLive = await app.db.knex('webhook_deliveries').where({ endpoint_id: liveHook.id });
      t.same(toLive, [], 'the live-mode endpoint of the same organisation got nothing');
      const listed = await app.request('GET', `/v1/events?link_id=${link.id}&type=link.deleted`, { key: sk });
      t.equal(listed.body.length, 1, 'fired events are stored and listed like any other');
    },
  );

  t.test('sandbox firing refuses live keys, unknown types and links, and writes nothing', async (t) => {
    const cases: [string, unknown, number, string, string | undefined][] = [
      [live, { type: 'link.created', link_id: link.id }, 403, 'wrong_mode', undefined],
      [sk, { type: 'link.exploded', link_id: link.id }, 400, 'parameter_invalid', 'type'],
      [sk, { type: 'link.created', link_id: 'link_0000000000000000' }, 404, 'resource_missing', undefined],
      [
        other.keys.sk_test.secret,
        { type: 'link.created', link_id: link.id },
        404,
        'resource_missing',
        undefined,
      ],
      [sk, { type: 'link.created' }, 400, 'parameter_missing', 'link_id'],
      [sk, { link_id: link.id }, 400, 'parameter_missing', 'type'],
      [sk, { type: 'link.created', link_id: 'nope' }, 400, 'parameter_invalid', 'link_id'],
      [
        tenant.keys.pk_test.secret,
        { type: 'link.created', link_id: link.id },
        403,
        'insufficient_scope',
        undefined,
      ],
    ];
    for (const [key, body, status, code, param] of cases) {
      const before = await tableCounts(app.db);
      const response = await app.request('POST', '/v1/sandbox/events/fire', { key, body });
      t.equal(response.status, status, JSON.stringify(body));
      t.match(response.body, { error: { code } });
      if (param !== undefined) t.equal(response.body.error.param, param);
      t.same(await tableCounts(app.db), before, 'nothing was written');
    }
    const unknown = await fire('link.exploded');
    t.match(unknown.body.error.message, /Known types: link\.created/, 'the message lists the types');
  });

  t.test('the deliveries list filters by event, endpoint and status, and paginates', async (t) => {
    const refreshed = (await fire('link.refreshed')).body;
    const created = (await fire('account.created')).body;
    await new Dispatcher(app.services).dispatchDue();
    const all = await app.request('GET', '/v1/webhook_deliveries?per_page=300', { key: sk });
    t.equal(all.status, 200);
    const total = Number(all.headers.get('x-total-count'));
    t.equal(all.body.length, total);
    t.ok(total >= 14, `${total} deliveries`);
    for (const delivery of all.body) {
      t.match(delivery, { object: 'webhook_delivery', mode: 'test' });
      t.match(delivery.id, /^wd_[0-9a-f]{16}$/);
    }
    const created_at = all.body.map((d: { created_at: string }) => d.created_at);
    t.same(created_at, [...created_at].sort().reverse(), 'newest first');

    const byEvent = await app.request('GET', `/v1/webhook_deliveries?event_id=${refreshed.id}`, { key: sk });
    t.same(
      byEvent.body.map((d: { endpoint_id: string }) => d.endpoint_id).sort(),
      [goodHook.id, badHook.id].sort(),
    );
    t.ok(byEvent.body.every((d: { event_type: string }) => d.event_type === 'link.refreshed'));

    const failed = await app.request('GET', '/v1/webhook_deliveries?status=failed', { key: sk });
    t.ok(failed.body.length >= 2);
    for (const delivery of failed.body) {
      t.match(delivery, {
        endpoint_id: badHook.id,
        status: 'failed',
        attempts: 2,
        last_response_status: 503,
        next_attempt_at: null,
      });
    }
    const succeeded = await app.request(
      'GET',
      `/v1/webhook_deliveries?status=succeeded&endpoint_id=${goodHook.id}&event_id=${created.id}`,
      { key: sk },
    );
    t.equal(succeeded.body.length, 1);
    t.match(succeeded.body[0], {
      status: 'succeeded',
      attempts: 1,
      last_response_status: 200,
      last_error: null,
    });
    const none = await app.request('GET', `/v1/webhook_deliveries?status=failed&endpoint_id=${goodHook.id}`, {
      key: sk,
    });
    t.same(none.body, []);
    t.equal(none.headers.get('x-total-count'), '0');

    const page2 = await app.request(
      'GET',
      `/v1/webhook_deliveries?endpoint_id=${goodHook.id}&page=2&per_page=3`,
      {
        key: sk,
      },
    );
    const goodAll = all.body.filter((d: { endpoint_id: string }) => d.endpoint_id === goodHook.id);
    t.same(
      page2.body.map((d: { id: string }) => d.id),
      goodAll.slice(3, 6).map((d: { id: string }) => d.id),
    );
    t.equal(page2.headers.get('x-total-count'), String(goodAll.length));
    const links = parseLinkHeader(page2.headers.get('link'))!;
    t.match(links.next!.url, new RegExp(`endpoint_id=${goodHook.id}.*page=3`));
    t.equal(links.prev!.page, '1');
    t.equal(links.first!.page, '1');

    const detail = await app.request('GET', `/v1/webhook_deliveries/${failed.body[0].id}`, { key: sk });
    t.equal(detail.status, 200);
    t.equal(detail.body.attempt_history.length, 2);
    t.match(detail.body.attempt_history[1], {
      object: 'webhook_attempt',
      number: 2,
      status_code: 503,
      error: 'HTTP 503',
      response_excerpt: 'down for maintenance',
    });

    for (const [query, param] of [
      ['status=lost', 'status'],
      ['event_id=evt_nope', 'event_id'],
      ['endpoint_id=x', 'endpoint_id'],
      ['per_page=301', 'per_page'],
      ['colour=red', 'colour'],
    ] as const) {
      const response = await app.request('GET', `/v1/webhook_deliveries?${query}`, { key: sk });
      t.equal(response.status, 400, query);
      t.match(response.body, { error: { code: 'parameter_invalid', param } });
    }
  });

  t.test("another organisation's deliveries are 404; the other mode's are 403", async (t) => {
    const [delivery] = (await app.request('GET', '/v1/webhook_deliveries', { key: sk })).body;
    const foreign = await app.request('GET', '/v1/webhook_deliveries', { key: other.keys.sk_test.secret });
    t.same(foreign.body, []);
    t.same(
      (await app.request('GET', '/v1/webhook_deliveries', { key: live })).body,
      [],
      'live sees no test rows',
    );
    for (const [method, path] of [
      ['GET', `/v1/webhook_deliveries/${delivery.id}`],
      ['POST', `/v1/webhook_deliveries/${delivery.id}/redeliver`],
    ] as const) {
      const before = await tableCounts(app.db);
      const otherOrg = await app.request(method, path, { key: other.keys.sk_test.secret });
      t.equal(otherOrg.status, 404, `${method} ${path}`);
      t.match(otherOrg.body, { error: { code: 'resource_missing' } });
      const wrongMode = await app.request(method, path, { key: live });
      t.equal(wrongMode.status, 403);
      t.match(wrongMode.body, { error: { code: 'wrong_mode' } });
      const publishable = await app.request(method, path, { key: tenant.keys.pk_test.secret });
      t.equal(publishable.status, 403);
      t.same(await tableCounts(app.db), before, 'nothing was written');
    }
    const missing = await app.request('POST', '/v1/webhook_deliveries/wd_0000000000000000/redeliver', {
      key: sk,
    });
    t.equal(missing.status, 404);
  });

  t.test('deliveries have their own rate-limit group: 60 a minute, burst 20', async (t) => {
    const limited = await createTenant(app);
    const key = limited.keys.sk_test.secret;
    for (let i = 1; i <= 20; i++) {
      const response = await app.request('GET', '/v1/webhook_deliveries', { key });
      t.equal(response.status, 200, `request ${i}`);
      t.equal(response.headers.get('x-ratelimit-limit'), '60');
    }
    const refused = await app.request('GET', '/v1/webhook_deliveries', { key });
    t.equal(refused.status, 429, 'the 21st is refused');
    t.match(refused.body, { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } });
    t.ok(Number(refused.headers.get('retry-after')) >= 1);
    t.equal(
      (await app.request('GET', '/v1/webhook_deliveries/wd_0000000000000000', { key })).status,
      429,
      'the single read shares the group',
    );
    const events = await app.request('GET', '/v1/events', { key });
    t.equal(events.status, 200, 'other reads use their own bucket');
    t.equal(events.headers.get('x-ratelimit-limit'), '100');
    app.clock.advance(1000);
    t.equal(
      (await app.request('GET', '/v1/webhook_deliveries', { key })).status,
      200,
      'one a second comes back',
    );
  });
});
