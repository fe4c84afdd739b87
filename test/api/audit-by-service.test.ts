import t from 'tap';
import { appWithTenants, forEachEngine, linkBody, runSyncs, tableCounts } from '../helpers/harness.js';

/*
 * The audit row of a change is written by the service that makes it, so a change made through the API is
 * in the audit log as one made in the console or with the CLI is: who (the key), what, on which resource.
 * A refused change writes none. An integration's refresh is its traffic, not an operator's action: the
 * refresh intent records it, the audit log does not.
 */

const hook = 'http://127.0.0.1:9/hook';

forEachEngine(t, async (t, engine) => {
  const { app, tenant, other } = await appWithTenants(t, engine);
  const sk = tenant.keys.sk_test;
  const actor = `key:${sk.id}`;
  const auditOf = (targetId: string) =>
    app.db
      .knex('audit_log')
      .where({ target_id: targetId })
      // The test clock stands still, so rows of one test share their time: ordered by action.
      .orderBy('action')
      .select('org_id', 'actor', 'action', 'target_type', 'details');
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await app.request(method, path, { key: sk.secret, body });
    if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  };

  t.test('link changes through the API name the key', async (t) => {
    const link = await call('POST', '/v1/links', linkBody());
    await runSyncs(app);
    await call('POST', `/v1/links/${link.id}/pause`);
    await call('POST', `/v1/links/${link.id}/resume`);
    await call('POST', '/v1/refresh_intents', { link_id: link.id, refresh_type: 'only_last' });
    await call('DELETE', `/v1/links/${link.id}`);
    t.same(
      (await auditOf(link.id)).map((row) => [row.org_id, row.actor, row.action, row.target_type]),
      [
        [tenant.orgId, actor, 'link.create', 'link'],
        [tenant.orgId, actor, 'link.delete', 'link'],
        [tenant.orgId, actor, 'link.pause', 'link'],
        [tenant.orgId, actor, 'link.resume', 'link'],
      ],
      'creation (issue 44), pause, resume and delete are audited; the refresh is not',
    );
  });

  t.test('endpoint changes, a redelivery and a fired event through the API name the key', async (t) => {
    const link = await call(
      'POST',
      '/v1/links',
      linkBody({ credentials: { rut: '11.111.111-1', password: 'sandbox' } }),
    );
    await runSyncs(app);
    const endpoint = await call('POST', '/v1/webhook_endpoints', { url: hook, enabled_events: ['*'] });
    await call('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { enabled_events: ['link.refreshed'] });
    await call('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { disabled: true });
    await call('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { disabled: false });
    await call('POST', `/v1/webhook_endpoints/${endpoint.id}/roll_secret`, { grace_seconds: 60 });
    const fired = await call('POST', '/v1/sandbox/events/fire', { type: 'link.refreshed', link_id: link.id });
    const delivery = await app.db.knex('webhook_deliveries').where({ event_id: fired.id }).first();
    const again = await call('POST', `/v1/webhook_deliveries/${delivery.id}/redeliver`);
    await call('DELETE', `/v1/webhook_endpoints/${endpoint.id}`);

    const endpointRows = await auditOf(endpoint.id);
    t.same(
      endpointRows.map((row) => [row.actor, row.action]),
      [
        [actor, 'webhook_endpoint.create'],
        [actor, 'webhook_endpoint.delete'],
        [actor, 'webhook_endpoint.disable'],
        [actor, 'webhook_endpoint.enable'],
        [actor, 'webhook_endpoint.roll_secret'],
        [actor, 'webhook_endpoint.update'],
      ],
    );
    t.same(JSON.parse(endpointRows[5].details), {
      changed: ['enabled_events'],
      enabled_events: ['link.refreshed'],
    });
    t.same(JSON.parse(endpointRows[4].details), { grace_seconds: 60 });
    t.notOk(
      endpointRows.some((row) => row.details?.includes('whsec_')),
      'no signing secret in the audit log',
    );
    const [fire] = await auditOf(fired.id);
    t.match(fire, { actor, action: 'sandbox.fire', target_type: 'event' });
    t.same(JSON.parse(fire.details), { type: 'link.refreshed', link_id: link.id });
    const [redelivery] = await auditOf(delivery.id);
    t.match(redelivery, { actor, action: 'webhook_delivery.redeliver', target_type: 'webhook_delivery' });
    t.match(JSON.parse(redelivery.details), { new_delivery: again.id, event_id: fired.id });
  });

  t.test('a refused change writes no audit row', async (t) => {
    const link = await call(
      'POST',
      '/v1/links',
      linkBody({ credentials: { rut: '22.222.222-2', password: 'sandbox' } }),
    );
    const endpoint = await call('POST', '/v1/webhook_endpoints', { url: hook, enabled_events: ['*'] });
    const before = await tableCounts(app.db);
    const stranger = other.keys.sk_test.secret;
    for (const [method, path, body] of [
      ['POST', `/v1/links/${link.id}/pause`],
      ['DELETE', `/v1/links/${link.id}`],
      ['PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { disabled: true }],
      ['POST', `/v1/webhook_endpoints/${endpoint.id}/roll_secret`, {}],
      ['DELETE', `/v1/webhook_endpoints/${endpoint.id}`],
      ['POST', '/v1/sandbox/events/fire', { type: 'link.refreshed', link_id: link.id }],
    ] as [string, string, unknown?][]) {
      const refused = await app.request(method, path, { key: stranger, body });
      t.equal(refused.status, 404, `${method} ${path} by another organisation`);
    }
    const invalid = await app.request('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, {
      key: sk.secret,
      body: { url: 'ftp://example.com/hook' },
    });
    t.equal(invalid.status, 400);
    t.same(await tableCounts(app.db), before, 'nothing written, the audit log included');
  });
});
