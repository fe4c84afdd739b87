import t from 'tap';
import parseLinkHeader from 'parse-link-header';
import { createTenant, forEachEngine, startTestApp, tableCounts, RAISED_LIMITS } from '../helpers/harness.js';

const hook = 'http://127.0.0.1:9/hook';

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  // Raised limits: these tests make more writes than the default burst allows.
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const other = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;

  t.test('create returns the secret once; get and list never do', async (t) => {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: hook, enabled_events: ['link.created', 'link.refreshed'] },
    });
    t.equal(created.status, 200);
    t.match(created.body, {
      object: 'webhook_endpoint',
      url: hook,
      enabled_events: ['link.created', 'link.refreshed'],
      disabled: false,
      mode: 'test',
    });
    t.match(created.body.id, /^we_[0-9a-f]{16}$/);
    t.match(created.body.secret, /^whsec_[0-9A-Za-z]{40}$/);
    const fetched = await app.request('GET', `/v1/webhook_endpoints/${created.body.id}`, { key: sk });
    t.equal(fetched.status, 200);
    t.equal(fetched.body.secret, undefined);
    const listed = await app.request('GET', '/v1/webhook_endpoints', { key: sk });
    t.notOk(listed.text.includes(created.body.secret), 'the list does not carry the secret');
    const stored = await app.db.knex('webhook_endpoints').where({ id: created.body.id }).first();
    t.notOk(JSON.stringify(stored).includes(created.body.secret), 'the secret is not stored in plaintext');
  });

  t.test('update, roll and delete', async (t) => {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: hook, enabled_events: ['*'] },
    });
    const id = created.body.id;
    const updated = await app.request('PATCH', `/v1/webhook_endpoints/${id}`, {
      key: sk,
      body: { disabled: true, enabled_events: ['link.expired'] },
    });
    t.equal(updated.status, 200);
    t.match(updated.body, { disabled: true, enabled_events: ['link.expired'] });
    const rolled = await app.request('POST', `/v1/webhook_endpoints/${id}/roll_secret`, {
      key: sk,
      body: { grace_seconds: 3600 },
    });
    t.equal(rolled.status, 200);
    t.match(rolled.body.secret, /^whsec_/);
    t.not(rolled.body.secret, created.body.secret);
    const row = await app.db.knex('webhook_endpoints').where({ id }).first();
    t.equal(
      Number(row.previous_secret_expires_at),
      app.clock.now() + 3600_000,
      'the old secret signs for the grace period',
    );
    const deleted = await app.request('DELETE', `/v1/webhook_endpoints/${id}`, { key: sk });
    t.same(deleted.body, { object: 'webhook_endpoint', id, deleted: true });
    t.equal((await app.request('GET', `/v1/webhook_endpoints/${id}`, { key: sk })).status, 404);
  });

  t.test("another organisation's endpoint is 404; the other mode's is 403 wrong_mode", async (t) => {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: hook, enabled_events: ['*'] },
    });
    const id = created.body.id;
    for (const [method, path, body] of [
      ['GET', `/v1/webhook_endpoints/${id}`, undefined],
      ['PATCH', `/v1/webhook_endpoints/${id}`, { disabled: true }],
      ['DELETE', `/v1/webhook_endpoints/${id}`, undefined],
      ['POST', `/v1/webhook_endpoints/${id}/roll_secret`, {}],
    ] as const) {
      const before = await tableCounts(app.db);
      const foreign = await app.request(method, path, { key: other.keys.sk_test.secret, body });
      t.equal(foreign.status, 404, `${method} ${path} by another organisation`);
      t.match(foreign.body, { error: { type: 'invalid_request_error', code: 'resource_missing' } });
      t.notOk(foreign.text.includes(tenant.orgId), 'the owner is not named');
      const live = await app.request(method, path, { key: tenant.keys.sk_live.secret, body });
      t.equal(live.status, 403, `${method} ${path} with a live key`);
      t.match(live.body, { error: { type: 'permission_error', code: 'wrong_mode' } });
      const publishable = await app.request(method, path, { key: tenant.keys.pk_test.secret, body });
      t.equal(publishable.status, 403);
      t.match(publishable.body, { error: { code: 'insufficient_scope' } });
      t.ok(publishable.headers.get('x-ratelimit-remaining'), 'a 403 still carries the rate-limit headers');
      t.same(await tableCounts(app.db), before, 'nothing was written');
    }
    const stillThere = await app.request('GET', `/v1/webhook_endpoints/${id}`, { key: sk });
    t.equal(stillThere.body.disabled, false);
    const foreignList = await app.request('GET', '/v1/webhook_endpoints', { key: other.keys.sk_test.secret });
    t.same(foreignList.body, [], "lists show only the caller's organisation");
    t.equal(foreignList.headers.get('x-total-count'), '0');
  });

  t.test('bad input is a 400 naming the parameter, and writes nothing', async (t) => {
    const cases: [unknown, string, string][] = [
      [{ url: hook }, 'parameter_missing', 'enabled_events'],
      [{ enabled_events: ['*'] }, 'parameter_missing', 'url'],
      [{ url: hook, enabled_events: ['link.nope'] }, 'parameter_invalid', 'enabled_events'],
      [{ url: hook, enabled_events: ['*', 'link.created'] }, 'parameter_invalid', 'enabled_events'],
      [{ url: hook, enabled_events: [] }, 'parameter_invalid', 'enabled_events'],
      [{ url: 'ftp://example.com/x', enabled_events: ['*'] }, 'parameter_invalid', 'url'],
      [{ url: 'not a url', enabled_events: ['*'] }, 'parameter_invalid', 'url'],
      [{ url: hook, enabled_events: ['*'], colour: 'red' }, 'parameter_invalid', 'colour'],
      [{ url: 42, enabled_events: ['*'] }, 'parameter_invalid', 'url'],
    ];
    for (const [body, code, param] of cases) {
      const before = await tableCounts(app.db);
      const response = await app.request('POST', '/v1/webhook_endpoints', { key: sk, body });
      t.equal(response.status, 400, JSON.stringify(body));
      t.match(response.body, { error: { type: 'invalid_request_error', code, param } });
      t.same(await tableCounts(app.db), before, 'nothing was written');
    }
    const empty = await app.request('PATCH', '/v1/webhook_endpoints/we_0000000000000000', {
      key: sk,
      body: {},
    });
    t.equal(empty.status, 400);
    const badId = await app.request('GET', '/v1/webhook_endpoints/nope', { key: sk });
    t.equal(badId.status, 400);
    t.match(badId.body, { error: { code: 'parameter_invalid', param: 'endpointId' } });
  });

  t.test('live mode refuses http, private, loopback, link-local and metadata addresses', async (t) => {
    const live = tenant.keys.sk_live.secret;
    for (const url of [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://10.0.0.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://192.168.1.20/hook',
      'https://[::1]/hook',
      'https://localhost/hook',
      // IPv6 forms that carry or reach a refused IPv4 address: mapped, compatible, NAT64, 6to4, Teredo.
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:a9fe:a9fe]/latest/meta-data',
      'https://[::127.0.0.1]/hook',
      'https://[64:ff9b::169.254.169.254]/latest/meta-data',
      'https://[2002:a00:1::1]/hook',
      'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook',
      'https://[2001:db8::1]/hook',
      'https://[fec0::1]/hook',
    ]) {
      const response = await app.request('POST', '/v1/webhook_endpoints', {
        key: live,
        body: { url, enabled_events: ['*'] },
      });
      t.equal(response.status, 400, url);
      t.match(response.body, { error: { code: 'parameter_invalid', param: 'url' } });
    }
    const publicAddress = await app.request('POST', '/v1/webhook_endpoints', {
      key: live,
      body: { url: 'https://93.184.216.34/hook', enabled_events: ['*'] },
    });
    t.equal(publicAddress.status, 200, 'a public address is accepted');
    for (const url of ['https://[::ffff:7f00:1]/hook', 'https://[64:ff9b::a9fe:a9fe]/hook']) {
      const moved = await app.request('PATCH', `/v1/webhook_endpoints/${publicAddress.body.id}`, {
        key: live,
        body: { url },
      });
      t.equal(moved.status, 400, `an update to ${url} too`);
      t.match(moved.body, { error: { code: 'parameter_invalid', param: 'url' } });
    }
  });

  t.test('test mode refuses the same addresses unless the operator allows it', async (t) => {
    const strict = await startTestApp(t, engine, {
      config: { webhooks: { allowPrivateAddressesInTestMode: false } },
    });
    const owner = await createTenant(strict, { rateLimits: RAISED_LIMITS });
    const key = owner.keys.sk_test.secret;
    const before = await tableCounts(strict.db);
    for (const url of [
      'http://127.0.0.1:8080/admin',
      'http://localhost:5432/',
      'http://10.0.0.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]:9464/metrics',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[64:ff9b::a9fe:a9fe]/latest/meta-data',
    ]) {
      const response = await strict.request('POST', '/v1/webhook_endpoints', {
        key,
        body: { url, enabled_events: ['*'] },
      });
      t.equal(response.status, 400, url);
      t.match(response.body, {
        error: { code: 'parameter_invalid', param: 'url', message: /unless the operator allows it/ },
      });
    }
    t.same(await tableCounts(strict.db), before, 'nothing was created');
    const open = await strict.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: 'http://93.184.216.34/hook', enabled_events: ['*'] },
    });
    t.equal(open.status, 200, 'test mode still takes plain http to a public address');
    const moved = await strict.request('PATCH', `/v1/webhook_endpoints/${open.body.id}`, {
      key,
      body: { url: 'http://127.0.0.1:8080/admin' },
    });
    t.equal(moved.status, 400, 'nor may an update point it inside');

    // The operator of a development box opts in for test mode; live mode keeps its policy.
    const allowed = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: 'http://127.0.0.1:3000/hook', enabled_events: ['*'] },
    });
    t.equal(allowed.status, 200, 'with allowPrivateAddressesInTestMode, a loopback receiver in test mode');
    const live = await app.request('POST', '/v1/webhook_endpoints', {
      key: tenant.keys.sk_live.secret,
      body: { url: 'https://127.0.0.1:3000/hook', enabled_events: ['*'] },
    });
    t.equal(live.status, 400, 'but not in live mode');
  });

  t.test('pagination: X-Total-Count and a Link header a standard parser reads', async (t) => {
    const fresh = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const key = fresh.keys.sk_test.secret;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      app.clock.advance(1000);
      ids.push(
        (
          await app.request('POST', '/v1/webhook_endpoints', {
            key,
            body: { url: hook, enabled_events: ['*'] },
          })
        ).body.id,
      );
    }
    const first = await app.request('GET', '/v1/webhook_endpoints?per_page=2', { key });
    t.equal(first.headers.get('x-total-count'), '5');
    t.same(
      first.body.map((e: { id: string }) => e.id),
      [ids[4], ids[3]],
      'newest first',
    );
    const links = parseLinkHeader(first.headers.get('link'))!;
    t.same(Object.keys(links).sort(), ['first', 'last', 'next']);
    t.equal(links.next!.page, '2');
    t.equal(links.last!.page, '3');
    t.ok(
      links.next!.url.startsWith(app.config.api.baseUrl + '/v1/webhook_endpoints?'),
      'absolute URLs from the base URL',
    );
    const middle = await app.request('GET', '/v1/webhook_endpoints?per_page=2&page=2', { key });
    const middleLinks = parseLinkHeader(middle.headers.get('link'))!;
    t.same(Object.keys(middleLinks).sort(), ['first', 'last', 'next', 'prev']);
    const last = await app.request(
      'GET',
      new URL(links.last!.url).pathname + new URL(links.last!.url).search,
      { key },
    );
    t.same(
      last.body.map((e: { id: string }) => e.id),
      [ids[0]],
    );
    t.notOk(parseLinkHeader(last.headers.get('link'))!.next, 'no next on the last page');
    const beyond = await app.request('GET', '/v1/webhook_endpoints?per_page=2&page=9', { key });
    t.equal(beyond.status, 200);
    t.same(beyond.body, [], 'paging past the end is an empty page');
    t.equal(
      parseLinkHeader(beyond.headers.get('link'))!.prev!.page,
      '3',
      'prev from past the end points at the last page',
    );
    for (const query of ['per_page=0', 'per_page=301', 'page=0', 'page=x', 'per_page=2.5', 'sort=asc']) {
      const bad = await app.request('GET', `/v1/webhook_endpoints?${query}`, { key });
      t.equal(bad.status, 400, query);
      t.equal(bad.body.error.param, query.split('=')[0]);
    }
  });
});
