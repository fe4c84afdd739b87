import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { CONSOLE_CATALOGUES } from '../../src/console/messages.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  RAISED_LIMITS,
  RAISED_CONSOLE_ACTIONS,
  startTestApp,
  tableCounts,
} from '../helpers/harness.js';
import { signedIn } from '../helpers/console.js';
import { startReceiver } from '../helpers/receiver.js';

/*
 * The console's webhooks pages over real HTTP (issue 18): an admin creates, edits, disables and enables an
 * endpoint and rolls its secret (each secret shown in that one answer only), fires a sandbox event in test
 * mode and redelivers; support reads and redelivers and gets 403 for the rest; another organisation's
 * endpoint or delivery, and the other mode's, answer 404; live pages never show test endpoints; every
 * refused request leaves the database as it was; every change is in the audit log with the console user.
 */

const SECRET = /whsec_[A-Za-z0-9]{40}/;

/** The form fields that tick these event types. */
const ticked = (...types: string[]) =>
  Object.fromEntries(types.map((type) => [`event:${type.replaceAll('.', ':')}`, '1']));

t.test('every webhooks word is in both languages', async (t) => {
  const es = Object.keys(CONSOLE_CATALOGUES.es).filter((key) => key.startsWith('webhooks.'));
  const en = Object.keys(CONSOLE_CATALOGUES.en).filter((key) => key.startsWith('webhooks.'));
  t.same(es, en);
  t.ok(es.length > 50);
});

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, { config: RAISED_CONSOLE_ACTIONS });
  const a = await createTenant(app);
  const b = await createTenant(app);
  const adminA = await signedIn(app, 'admin', a.orgId, 'admin@a.cl');
  const supportA = await signedIn(app, 'support', a.orgId, 'help@a.cl');
  const adminB = await signedIn(app, 'admin', b.orgId, 'admin@b.cl');
  const hooks = (org: string, mode = 'test') => `/console/o/${org}/${mode}/webhooks`;
  // A receiver that fails, with markup in its answer: the console must show it as text.
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(500, { 'content-type': 'text/html' });
    response.end('<script>alert("owned")</script> broken');
  });
  const link = await app.request('POST', '/v1/links', { key: a.keys.sk_test.secret, body: linkBody() });
  t.equal(link.status, 200, link.text);
  const linkB = await app.request('POST', '/v1/links', { key: b.keys.sk_test.secret, body: linkBody() });
  /** The endpoint of b, made through the API: the console must not reach it from a. */
  const endpointB = await app.request('POST', '/v1/webhook_endpoints', {
    key: b.keys.sk_test.secret,
    body: { url: receiver.url, enabled_events: ['*'] },
  });
  t.equal(endpointB.status, 200);
  const audited = (action: string, targetId: string) =>
    app.db.knex('audit_log').where({ action, target_id: targetId }).orderBy('created_at', 'desc').first();

  let endpointId = '';
  let firstSecret = '';
  await t.test('an admin creates an endpoint; its secret is shown in that answer only', async (t) => {
    const page = await adminA('GET', hooks(a.orgId));
    t.equal(page.status, 200);
    t.match(page.text, 'Create an endpoint');
    t.match(page.text, 'Fire a test event', 'test mode offers the sandbox');
    const created = await adminA('POST', hooks(a.orgId), {
      url: receiver.url,
      description: '<b>payroll</b>',
      ...ticked('link.refreshed', 'link.expired'),
    });
    t.equal(created.status, 200, created.text);
    firstSecret = SECRET.exec(created.text)?.[0] ?? '';
    t.match(firstSecret, SECRET, 'the signing secret, once');
    endpointId = /Endpoint (we_[0-9a-f]{16}) created/.exec(created.text)![1]!;
    const row = await app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    t.match(row, { org_id: a.orgId, mode: 'test', url: receiver.url, description: '<b>payroll</b>' });
    t.same(JSON.parse(row.enabled_events), ['link.refreshed', 'link.expired']);
    t.notMatch(row.secret_encrypted, firstSecret, 'stored sealed');
    const audit = await audited('webhook_endpoint.create', endpointId);
    t.equal(audit.actor, `console:${adminA.userId}`);
    t.notMatch(audit.details ?? '', 'whsec_', 'no secret in the audit log');
    for (const path of [hooks(a.orgId), `${hooks(a.orgId)}/${endpointId}`, `${hooks(a.orgId)}/deliveries`]) {
      const again = await adminA('GET', path);
      t.equal(again.status, 200, path);
      t.notMatch(again.text, 'whsec_', `${path} shows no secret`);
    }
    const detail = await adminA('GET', `${hooks(a.orgId)}/${endpointId}`);
    t.match(detail.text, '&lt;b&gt;payroll&lt;/b&gt;', 'the description is escaped');
    t.notMatch(detail.text, '<b>payroll</b>');
  });

  await t.test('a refused request is explained and changes nothing', async (t) => {
    const before = await tableCounts(app.db);
    const row = () => app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    const rowBefore = await row();
    const endpoint = `${hooks(a.orgId)}/${endpointId}`;
    for (const [path, form, message] of [
      [hooks(a.orgId), { url: '', ...ticked('*') }, 'Enter the endpoint'],
      [hooks(a.orgId), { url: `https://example.com/${'x'.repeat(2048)}`, ...ticked('*') }, 'at most 2048'],
      [hooks(a.orgId), { url: receiver.url }, 'Tick at least one event type'],
      [hooks(a.orgId), { url: receiver.url, ...ticked('link.exploded') }, 'Unknown event type'],
      [hooks(a.orgId), { url: receiver.url, ...ticked('*', 'link.created') }, 'do not combine'],
      [hooks(a.orgId), { url: 'ftp://example.com/hook', ...ticked('*') }, 'must use http or https'],
      [hooks(a.orgId), { url: 'https://user:pw@example.com/', ...ticked('*') }, 'user name or password'],
      [
        hooks(a.orgId, 'live'),
        { url: 'https://127.0.0.1/hook', ...ticked('*') },
        'private, loopback, link-local or metadata address',
      ],
      [hooks(a.orgId), { url: receiver.url, description: 'd'.repeat(501), ...ticked('*') }, 'at most 500'],
      [endpoint, { url: 'not a url', ...ticked('*') }, 'not a valid absolute URL'],
      [endpoint, { url: receiver.url }, 'Tick at least one event type'],
      [`${endpoint}/roll`, { grace_hours: '9999' }, 'grace period'],
      [`${endpoint}/roll`, {}, 'grace period'],
      [`${hooks(a.orgId)}/fire`, { type: 'link.exploded', link_id: link.body.id }, 'Choose an event type'],
      [`${hooks(a.orgId)}/fire`, { type: 'link.created', link_id: 'nope' }, 'Choose a test link'],
    ] as const) {
      const response = await adminA('POST', path, form);
      t.equal(response.status, 400, `${path} ${JSON.stringify(form).slice(0, 80)}`);
      t.match(response.text, /<p class="error" role="alert">/, 'the problem is on the page');
      t.match(response.text, message);
    }
    const refilled = await adminA('POST', hooks(a.orgId), {
      url: 'ftp://example.com/x',
      ...ticked('link.created'),
    });
    t.match(refilled.text, 'value="ftp://example.com/x"', 'a refused form keeps what was typed');
    t.match(refilled.text, /name="event:link:created" value="1" checked/);
    t.same(await tableCounts(app.db), before, 'nothing was written');
    t.same(await row(), rowBefore, 'the endpoint is as it was');
  });

  await t.test('an admin edits, disables, enables and rolls; each audited', async (t) => {
    const endpoint = `${hooks(a.orgId)}/${endpointId}`;
    const edited = await adminA('POST', endpoint, {
      url: receiver.url,
      description: 'payroll',
      ...ticked('*'),
    });
    t.equal(edited.status, 200, edited.text);
    t.match(edited.text, 'Changes saved.');
    let row = await app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    t.same(JSON.parse(row.enabled_events), ['*']);
    t.equal(row.description, 'payroll');
    t.match(JSON.parse((await audited('webhook_endpoint.update', endpointId)).details), {
      changed: ['enabled_events', 'description'],
    });

    t.match((await adminA('POST', `${endpoint}/disable`)).text, 'Endpoint disabled');
    row = await app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    t.ok(row.disabled, 'disabled in the database');
    t.ok(await audited('webhook_endpoint.disable', endpointId));
    t.match((await adminA('GET', hooks(a.orgId))).text, 'disabled');
    t.match((await adminA('POST', `${endpoint}/enable`)).text, 'Endpoint enabled');
    row = await app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    t.notOk(row.disabled, 'enabled again');
    t.ok(await audited('webhook_endpoint.enable', endpointId));

    const rolled = await adminA('POST', `${endpoint}/roll`, { grace_hours: '24' });
    t.equal(rolled.status, 200);
    const second = SECRET.exec(rolled.text)?.[0] ?? '';
    t.match(second, SECRET, 'the new secret, once');
    t.not(second, firstSecret);
    t.match(rolled.text, /keeps signing beside it until Jun 16, 2026, 11:00\sAM/);
    row = await app.db.knex('webhook_endpoints').where({ id: endpointId }).first();
    t.equal(Number(row.previous_secret_expires_at), app.clock.now() + 86_400_000);
    const audit = await audited('webhook_endpoint.roll_secret', endpointId);
    t.equal(audit.actor, `console:${adminA.userId}`);
    t.notMatch(audit.details, 'whsec_');
    const detail = await adminA('GET', endpoint);
    t.notMatch(detail.text, 'whsec_', 'a reload shows no secret');
    t.match(detail.text, 'Old secret signs until');
  });

  let deliveryId = '';
  await t.test('firing in test mode shows each endpoint’s first attempt', async (t) => {
    const answer = adminA('POST', `${hooks(a.orgId)}/fire`, {
      type: 'link.refreshed',
      link_id: link.body.id,
    });
    // The page waits for the first attempts: send them, as a running dispatcher would.
    let fired: Awaited<typeof answer> | null = null;
    while (!(fired = await Promise.race([answer, sleep(50).then(() => null)])))
      await new Dispatcher(app.services).dispatchDue();
    t.equal(fired.status, 200, fired.text);
    t.match(fired.text, /Event link\.refreshed evt_[0-9a-f]{16} fired about link_/);
    t.match(fired.text, endpointId);
    t.match(fired.text, 'HTTP 500', 'the failing answer');
    t.notMatch(fired.text, endpointB.body.id, "no other organisation's endpoint");
    deliveryId = /deliveries\/(wd_[0-9a-f]{16})/.exec(fired.text)![1]!;
    const reopened = await adminA('GET', `${hooks(a.orgId)}/fire`);
    t.equal(reopened.status, 303, "the fire's address, opened again, leads back to the webhooks");
    t.match(await audited('sandbox.fire', /evt_[0-9a-f]{16}/.exec(fired.text)![0]), {
      actor: `console:${adminA.userId}`,
    });
    const detail = await adminA('GET', `${hooks(a.orgId)}/deliveries/${deliveryId}`);
    t.equal(detail.status, 200);
    t.match(
      detail.text,
      '&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt; broken',
      'the answer, escaped',
    );
    t.notMatch(detail.text, '<script>alert', 'never as markup');
    t.match(
      detail.text,
      /<td[^>]*>1<\/td><td[^>]*>Jun 15, 2026, 11:00:00\sAM<\/td><td[^>]*>\d+ ms<\/td><td[^>]*>500<\/td>/,
    );
    const filtered = await adminA(
      'GET',
      `${hooks(a.orgId)}/deliveries?endpoint_id=${endpointId}&status=pending`,
    );
    t.match(filtered.text, deliveryId);
    const none = await adminA(
      'GET',
      `${hooks(a.orgId)}/deliveries?endpoint_id=${endpointId}&status=succeeded`,
    );
    t.notMatch(none.text, deliveryId, 'the status filter applies');
    t.match(none.text, 'No delivery matches.');
  });

  await t.test('support reads and redelivers, and may change nothing else', async (t) => {
    const endpoint = `${hooks(a.orgId)}/${endpointId}`;
    const list = await supportA('GET', hooks(a.orgId));
    t.equal(list.status, 200);
    t.match(list.text, endpointId);
    t.notMatch(list.text, 'Create an endpoint', 'no create form');
    t.notMatch(list.text, 'Fire a test event', 'no fire form');
    t.notMatch((await supportA('GET', endpoint)).text, 'Roll the secret', 'no roll form');
    const before = await tableCounts(app.db);
    for (const [path, form] of [
      [hooks(a.orgId), { url: receiver.url, ...ticked('*') }],
      [endpoint, { url: receiver.url, ...ticked('link.created') }],
      [`${endpoint}/roll`, { grace_hours: '1' }],
      [`${endpoint}/disable`, {}],
      [`${endpoint}/enable`, {}],
      [`${hooks(a.orgId)}/fire`, { type: 'link.created', link_id: link.body.id }],
    ] as const) {
      const response = await supportA('POST', path, form);
      t.equal(response.status, 403, path);
      t.match(response.text, 'Your role does not allow this.');
      t.notMatch(response.text, 'whsec_');
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
    const page = await supportA('GET', `${hooks(a.orgId)}/deliveries/${deliveryId}`);
    t.match(page.text, 'Redeliver', 'support has the button');
    const redelivered = await supportA('POST', `${hooks(a.orgId)}/deliveries/${deliveryId}/redeliver`);
    t.equal(redelivered.status, 200, redelivered.text);
    const queued = /New delivery (wd_[0-9a-f]{16}) queued/.exec(redelivered.text)![1]!;
    const row = await app.db.knex('webhook_deliveries').where({ id: queued }).first();
    t.match(row, { endpoint_id: endpointId, status: 'pending', attempts: 0 });
    const audit = await audited('webhook_delivery.redeliver', deliveryId);
    t.equal(audit.actor, `console:${supportA.userId}`);
    t.match(JSON.parse(audit.details), { new_delivery: queued });

    // A disabled endpoint would be sent nothing: the redelivery is refused on the page, nothing queued.
    await adminA('POST', `${endpoint}/disable`);
    const countsBefore = await tableCounts(app.db);
    const refused = await supportA('POST', `${hooks(a.orgId)}/deliveries/${deliveryId}/redeliver`);
    t.equal(refused.status, 409);
    t.match(refused.text, /<p class="error" role="alert">The endpoint we_[0-9a-f]{16} is disabled/);
    t.same(await tableCounts(app.db), countsBefore, 'nothing was written');
    await adminA('POST', `${endpoint}/enable`);
  });

  await t.test(
    "another organisation's endpoints and deliveries, and the other mode's, answer 404",
    async (t) => {
      const before = await tableCounts(app.db);
      const endpoint = `${hooks(a.orgId)}/${endpointId}`;
      const delivery = `${hooks(a.orgId)}/deliveries/${deliveryId}`;
      const inB = (path: string) => path.replace(a.orgId, b.orgId);
      const inLive = (path: string) => path.replace('/test/', '/live/');
      for (const [method, path, form] of [
        ['GET', endpoint, {}],
        ['GET', delivery, {}],
        ['POST', `${endpoint}/roll`, { grace_hours: '1' }],
        ['POST', `${endpoint}/disable`, {}],
        ['POST', endpoint, { url: receiver.url, ...ticked('*') }],
        ['POST', `${delivery}/redeliver`, {}],
        ['GET', inB(endpoint), {}],
        ['GET', inB(delivery), {}],
        ['POST', `${inB(endpoint)}/roll`, { grace_hours: '1' }],
        ['POST', `${inB(delivery)}/redeliver`, {}],
        ['POST', `${inB(hooks(a.orgId))}/fire`, { type: 'link.created', link_id: link.body.id }],
        ['GET', `${inB(hooks(a.orgId))}/we_zz`, {}],
      ] as const) {
        const response = await adminB(method, path, form);
        t.equal(response.status, 404, `${method} ${path}`);
        t.notMatch(response.text, `127.0.0.1:${receiver.port}`);
        t.notMatch(response.text, 'whsec_');
      }
      for (const [method, path, form] of [
        ['GET', inLive(endpoint), {}],
        ['GET', inLive(delivery), {}],
        ['POST', `${inLive(endpoint)}/roll`, { grace_hours: '1' }],
        ['POST', `${inLive(delivery)}/redeliver`, {}],
        ['GET', `${hooks(a.orgId)}/${endpointB.body.id}`, {}],
        ['POST', `${hooks(a.orgId)}/${endpointB.body.id}/disable`, {}],
        ['POST', `${hooks(a.orgId)}/fire`, { type: 'link.created', link_id: linkB.body.id }],
      ] as const) {
        const response = await adminA(method, path, form);
        t.equal(response.status, 404, `${method} ${path}`);
      }
      t.same(await tableCounts(app.db), before, 'nothing was written');
    },
  );

  await t.test('live pages never show test endpoints or deliveries, and have no sandbox', async (t) => {
    const live = await adminA('POST', hooks(a.orgId, 'live'), {
      url: 'https://93.184.215.14/hook',
      ...ticked('link.created'),
    });
    t.equal(live.status, 200, live.text);
    const liveId = /Endpoint (we_[0-9a-f]{16}) created/.exec(live.text)![1]!;
    const list = await adminA('GET', hooks(a.orgId, 'live'));
    t.match(list.text, liveId);
    t.notMatch(list.text, endpointId, 'no test endpoint');
    t.notMatch(list.text, 'Fire a test event', 'no sandbox in live mode');
    const deliveries = await adminA('GET', `${hooks(a.orgId, 'live')}/deliveries`);
    t.notMatch(deliveries.text, deliveryId, 'no test delivery');
    t.notMatch(deliveries.text, endpointId, 'not even in the endpoint filter');
    const testList = await adminA('GET', hooks(a.orgId));
    t.notMatch(testList.text, liveId, 'and the other way round');
    const before = await tableCounts(app.db);
    const fire = await adminA('POST', `${hooks(a.orgId, 'live')}/fire`, {
      type: 'link.created',
      link_id: link.body.id,
    });
    t.equal(fire.status, 404, 'no firing in live mode');
    t.same(await tableCounts(app.db), before, 'nothing was written');
  });

  await t.test('endpoints and deliveries come 30 a page', async (t) => {
    const c = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const adminC = await signedIn(app, 'admin', c.orgId, 'admin@c.cl');
    const key = c.keys.sk_test.secret;
    for (let i = 0; i < 31; i++) {
      const made = await app.request('POST', '/v1/webhook_endpoints', {
        key,
        body: { url: `${receiver.url}/${i}`, enabled_events: ['link.deleted'] },
      });
      t.equal(made.status, 200);
    }
    const linkC = await app.request('POST', '/v1/links', { key, body: linkBody() });
    const fired = await app.request('POST', '/v1/sandbox/events/fire', {
      key,
      body: { type: 'link.deleted', link_id: linkC.body.id },
    });
    t.equal(fired.status, 200);
    for (const path of [hooks(c.orgId), `${hooks(c.orgId)}/deliveries`]) {
      const first = await adminC('GET', path);
      t.match(first.text, '1–30 of 31', path);
      t.equal(first.text.match(/<tbody>[\s\S]*?<\/tbody>/)![0].match(/<tr>/g)!.length, 30);
      t.match(first.text, 'rel="next"');
      const second = await adminC('GET', `${path}?page=2`);
      t.match(second.text, '31–31 of 31');
      t.equal(second.text.match(/<tbody>[\s\S]*?<\/tbody>/)![0].match(/<tr>/g)!.length, 1);
    }
    const oneEndpoint = /<option value="(we_[0-9a-f]{16})">/.exec(
      (await adminC('GET', `${hooks(c.orgId)}/deliveries`)).text,
    )![1]!;
    const filtered = await adminC(
      'GET',
      `${hooks(c.orgId)}/deliveries?endpoint_id=${oneEndpoint}&event_id=${fired.body.id}`,
    );
    t.match(filtered.text, '1–1 of 1', 'filtered by endpoint and event');
  });

  await t.test('without the CSRF token nothing changes', async (t) => {
    const before = await tableCounts(app.db);
    const endpoint = `${hooks(a.orgId)}/${endpointId}`;
    for (const [path, form] of [
      [hooks(a.orgId), { url: receiver.url, ...ticked('*') }],
      [`${endpoint}/roll`, { grace_hours: '1' }],
      [`${endpoint}/disable`, {}],
      [`${hooks(a.orgId)}/deliveries/${deliveryId}/redeliver`, {}],
      [`${hooks(a.orgId)}/fire`, { type: 'link.created', link_id: link.body.id }],
    ] as const) {
      const response = await adminA('POST', path, { ...form, _csrf: 'forged' });
      t.equal(response.status, 403, path);
      t.notMatch(response.text, 'whsec_');
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
  });
});
