import t from 'tap';
import type { Test } from 'tap';
import { defineRoute } from '../../src/api/route.js';
import { openDatabase } from '../../src/db/database.js';
import { createOrganisation } from '../../src/orgs/orgs.js';
import {
  RAISED_LIMITS,
  createTenant,
  forEachEngine,
  startTestApp,
  tableCounts,
  type TestApp,
  type TestResponse,
} from '../helpers/harness.js';

const REQUEST_ID = /^req_[0-9a-f]{16}$/;
/** Values for a list's required query parameters that are well formed and name nothing. */
const DUMMY_IDS: Record<string, string> = { link_id: 'link_0000000000000000' };
const SECRET = 'svc_sk_live_LeakedSecretValue0123456789abcdefXYZ';

interface EchoBody {
  name: string;
  count?: number;
  address?: { city: string };
}

/** Test routes mounted through the real middleware stack. The POST writes a row, so a leak would show. */
const extraRoutes = [
  defineRoute<Record<string, never>, EchoBody>({
    method: 'post',
    path: '/v1/test/organisations',
    operationId: 'testCreateOrganisation',
    summary: 'test route',
    tag: 'test',
    auth: ['secret_key'],
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1 },
        count: { type: 'integer', minimum: 1 },
        address: {
          type: 'object',
          required: ['city'],
          properties: { city: { type: 'string' } },
        },
      },
    },
    responses: { 200: { description: 'created' } },
    async handler({ body, services, now }) {
      const org = await services.db.transaction((trx) => createOrganisation(trx, body.name, 'test', now));
      return { body: org };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/test/crash',
    operationId: 'testCrash',
    summary: 'test route',
    tag: 'test',
    auth: ['secret_key'],
    responses: { 200: { description: 'never' } },
    async handler() {
      throw new Error(`could not reach upstream with password=hunter2 and key ${SECRET}`);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/test/refused',
    operationId: 'testRefused',
    summary: 'test route',
    tag: 'test',
    auth: ['secret_key'],
    responses: { 200: { description: 'never' } },
    async handler() {
      throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:5432 (user svc, password hunter2)'), {
        code: 'ECONNREFUSED',
      });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/test/unreachable',
    operationId: 'testUnreachable',
    summary: 'test route',
    tag: 'test',
    auth: ['secret_key'],
    responses: { 200: { description: 'never' } },
    async handler() {
      // A real driver failure: nothing listens on port 1.
      const db = openDatabase({ url: 'postgres://svc:hunter2@127.0.0.1:1/svc' });
      try {
        await db.knex.raw('select 1');
        return { body: {} };
      } finally {
        await db.close();
      }
    },
  }),
];

async function expectError(
  t: Test,
  app: TestApp,
  send: () => Promise<TestResponse>,
  expected: { status: number; type: string; code: string; param?: string },
  label: string,
): Promise<TestResponse> {
  const before = await tableCounts(app.db);
  const response = await send();
  t.equal(response.status, expected.status, `${label}: status`);
  t.equal(response.body?.error?.type, expected.type, `${label}: error.type`);
  t.equal(response.body?.error?.code, expected.code, `${label}: error.code`);
  t.type(response.body?.error?.message, 'string', `${label}: message`);
  if (expected.param !== undefined) t.equal(response.body.error.param, expected.param, `${label}: param`);
  t.match(response.headers.get('content-type'), /^application\/json/, `${label}: JSON`);
  t.match(response.headers.get('x-request-id'), REQUEST_ID, `${label}: X-Request-Id`);
  t.same(await tableCounts(app.db), before, `${label}: nothing was written`);
  return response;
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    extraRoutes,
    config: {
      api: { bodyLimitBytes: 1024 },
      rateLimits: { resource_write: { perMinute: 1000, burst: 1000 } },
    },
  });
  const tenant = await createTenant(app);
  const key = tenant.keys.sk_test.secret;
  const post = '/v1/test/organisations';

  t.test(
    'every list refuses a page no database can reach, and any page that is not a whole number',
    async (t) => {
      const reader = (await createTenant(app, { rateLimits: RAISED_LIMITS })).keys.sk_test.secret;
      const spec = (await app.request('GET', '/v1/openapi.json', { key: reader })).body;
      type Parameter = { name: string; in: string; required?: boolean };
      const lists = Object.entries(
        spec.paths as Record<string, { get?: { parameters?: Parameter[] } }>,
      ).flatMap(([path, item]) => {
        const parameters = item.get?.parameters ?? [];
        if (!parameters.some((parameter) => parameter.name === 'page')) return [];
        // Well-formed ids that name nothing: the query is checked before any lookup.
        const required = parameters.filter((p) => p.in === 'query' && p.required).map((p) => p.name);
        const query = required.map((name) => `${name}=${DUMMY_IDS[name] ?? 'no-dummy-for-this-parameter'}&`);
        return [`${path.replace(/\{[^}]+\}/g, 'acc_0000000000000000')}?${query.join('')}`];
      });
      t.ok(lists.length >= 7, `${lists.length} lists`);
      for (const list of lists) {
        for (const page of [
          '1e20',
          '99999999999999999999',
          '1000000001',
          'Infinity',
          '-Infinity',
          'NaN',
          '2.5',
        ]) {
          await expectError(
            t,
            app,
            () => app.request('GET', `${list}page=${page}`, { key: reader }),
            { status: 400, type: 'invalid_request_error', code: 'parameter_invalid', param: 'page' },
            `${list}page=${page}`,
          );
        }
      }
    },
  );

  t.test('an unknown route is 404 resource_missing', async (t) => {
    const invalid = { status: 404, type: 'invalid_request_error', code: 'resource_missing' };
    const response = await expectError(t, app, () => app.request('GET', '/v1/nothing_here'), invalid, 'GET');
    t.match(response.body.error.message, /\/v1\/nothing_here/, 'the message names the URL');
    await expectError(
      t,
      app,
      () => app.request('GET', '/v1/nothing_here', { key }),
      invalid,
      'GET with a key',
    );
    await expectError(t, app, () => app.request('DELETE', '/nope', { key }), invalid, 'DELETE');
  });

  t.test('a wrong method is 405 with an Allow header', async (t) => {
    const response = await expectError(
      t,
      app,
      () => app.request('POST', '/health'),
      { status: 405, type: 'invalid_request_error', code: 'method_not_allowed' },
      'POST /health',
    );
    t.match(response.headers.get('allow'), /\bGET\b/, 'Allow lists GET');
    t.notMatch(response.headers.get('allow'), /\bPOST\b/, 'and not POST');
  });

  t.test(
    "OPTIONS lists a path's methods; a method no route has is refused, with the same list",
    async (t) => {
      const options = await app.request('OPTIONS', '/v1/links');
      t.equal(options.status, 200, 'OPTIONS answers');
      t.equal(options.headers.get('allow'), 'POST, HEAD, GET', 'with every method of the path');
      const response = await expectError(
        t,
        app,
        () => app.request('PROPFIND', '/v1/links/lnk_missing'),
        { status: 400, type: 'invalid_request_error', code: 'method_not_implemented' },
        'PROPFIND',
      );
      t.equal(response.headers.get('allow'), 'HEAD, GET, DELETE', 'Allow lists what the path has');
    },
  );

  t.test('a valid request goes through (and writes)', async (t) => {
    const before = await tableCounts(app.db);
    const response = await app.request('POST', post, {
      key,
      body: { name: 'Acme', address: { city: 'Santiago' } },
    });
    t.equal(response.status, 200);
    t.equal(response.body.name, 'Acme');
    t.equal((await tableCounts(app.db)).organisations, before.organisations! + 1);
    const charset = await app.request('POST', post, {
      key,
      rawBody: JSON.stringify({ name: 'Acme UTF-8' }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    t.equal(charset.status, 200, 'application/json with a charset is JSON too');
  });

  t.test('malformed JSON is 400 invalid_json', async (t) => {
    for (const rawBody of ['{"name": ', "{'name': 'x'}", '{"name": "x"} trailing', 'null'])
      await expectError(
        t,
        app,
        () => app.request('POST', post, { key, rawBody, headers: { 'content-type': 'application/json' } }),
        { status: 400, type: 'invalid_request_error', code: 'invalid_json' },
        `body ${rawBody}`,
      );
  });

  t.test('a body over the limit is 413 request_too_large', async (t) => {
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 'x'.repeat(2000) } }),
      { status: 413, type: 'invalid_request_error', code: 'request_too_large' },
      '2 KB body, 1 KB limit',
    );
  });

  t.test('a body that is not JSON is 415 unsupported_media_type', async (t) => {
    await expectError(
      t,
      app,
      () =>
        app.request('POST', post, { key, rawBody: 'name=Acme', headers: { 'content-type': 'text/plain' } }),
      { status: 415, type: 'invalid_request_error', code: 'unsupported_media_type' },
      'text/plain',
    );
    await expectError(
      t,
      app,
      () =>
        app.request('POST', post, {
          key,
          rawBody: 'name=Acme',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      { status: 415, type: 'invalid_request_error', code: 'unsupported_media_type' },
      'a form',
    );
  });

  t.test('a schema violation is 400 parameter_invalid naming the field', async (t) => {
    const invalid = { status: 400, type: 'invalid_request_error', code: 'parameter_invalid' };
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 5 } }),
      { ...invalid, param: 'name' },
      'wrong type',
    );
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 'Acme', count: 0 } }),
      { ...invalid, param: 'count' },
      'below minimum',
    );
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 'Acme', colour: 'red' } }),
      { ...invalid, param: 'colour' },
      'unknown field',
    );
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 'Acme', address: { city: 7 } } }),
      { ...invalid, param: 'address.city' },
      'nested field',
    );
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: ['Acme'] }),
      invalid,
      'an array body',
    );
  });

  t.test('a missing required field is 400 parameter_missing naming the field', async (t) => {
    const missing = { status: 400, type: 'invalid_request_error', code: 'parameter_missing' };
    const response = await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { count: 2 } }),
      { ...missing, param: 'name' },
      'no name',
    );
    t.match(response.body.error.message, /name/);
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key, body: { name: 'Acme', address: {} } }),
      { ...missing, param: 'address.city' },
      'nested',
    );
    await expectError(
      t,
      app,
      () => app.request('POST', post, { key }),
      { ...missing, param: 'name' },
      'no body at all',
    );
  });

  t.test('an unexpected error is a 500 that leaks nothing', async (t) => {
    const response = await expectError(
      t,
      app,
      () => app.request('GET', '/v1/test/crash', { key }),
      { status: 500, type: 'api_error', code: 'internal_error' },
      'crash',
    );
    t.match(response.body.error.request_id, REQUEST_ID, 'the body carries a request id');
    t.equal(response.body.error.request_id, response.headers.get('x-request-id'));
    for (const leak of ['hunter2', SECRET, 'could not reach upstream', 'Error:', '    at ', '.js:'])
      t.notOk(response.text.includes(leak), `the response does not contain ${JSON.stringify(leak)}`);
  });

  t.test('an unreachable database is 503 with Retry-After', async (t) => {
    const unavailable = { status: 503, type: 'api_error', code: 'service_unavailable' };
    for (const path of ['/v1/test/refused', '/v1/test/unreachable']) {
      const response = await expectError(t, app, () => app.request('GET', path, { key }), unavailable, path);
      const retryAfter = Number(response.headers.get('retry-after'));
      t.ok(
        Number.isInteger(retryAfter) && retryAfter >= 1,
        `${path}: Retry-After is a positive number of seconds`,
      );
      t.notOk(response.text.includes('hunter2'), `${path}: no password in the response`);
      t.notOk(response.text.includes('ECONNREFUSED'), `${path}: no driver detail in the response`);
    }
  });
});
