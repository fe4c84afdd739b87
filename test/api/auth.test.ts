import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Test } from 'tap';
import { generateExchangeToken, generateWidgetToken } from '../../src/auth/tokens.js';
import { newId } from '../../src/ids/ids.js';
import { generateApiKey } from '../../src/keys/key-format.js';
import { revokeApiKey, rotateApiKey } from '../../src/keys/keys.js';
import { sha256Hex } from '../../src/secrets/secret-box.js';
import {
  createTenant,
  forEachEngine,
  startTestApp,
  tableCounts,
  type TestApp,
  type TestResponse,
} from '../helpers/harness.js';

const PATH = '/v1/openapi.json';
const REQUEST_ID = /^req_[0-9a-f]{16}$/;

/** Checks the spec's envelope, the status and that the request wrote nothing. */
async function expectRejected(
  t: Test,
  app: TestApp,
  send: () => Promise<TestResponse>,
  expected: { status: number; type: string; code: string },
  label: string,
): Promise<TestResponse> {
  const before = await tableCounts(app.db);
  const response = await send();
  t.equal(response.status, expected.status, `${label}: status ${expected.status}`);
  t.equal(response.body?.error?.type, expected.type, `${label}: error.type`);
  t.equal(response.body?.error?.code, expected.code, `${label}: error.code`);
  t.type(response.body?.error?.message, 'string', `${label}: a message`);
  t.ok(response.body.error.message.length > 0, `${label}: the message is not empty`);
  t.match(response.headers.get('x-request-id'), REQUEST_ID, `${label}: X-Request-Id`);
  t.same(await tableCounts(app.db), before, `${label}: nothing was written`);
  return response;
}

/** `key` as the Bearer credential of GET PATH, refused as `expected` (with every check of expectRejected). */
const keyRejected = (
  t: Test,
  app: TestApp,
  key: string,
  expected: { status: number; type: string; code: string },
  label: string,
) => expectRejected(t, app, () => app.request('GET', PATH, { key }), expected, label);

const unauthenticated = { status: 401, type: 'authentication_error', code: 'invalid_credential' };
const forbidden = { status: 403, type: 'permission_error', code: 'insufficient_scope' };

forEachEngine(t, async (t, engine) => {
  // One server for the tests that need no special configuration; each uses its own organisation.
  const app = await startTestApp(t, engine);

  t.test('a missing or non-Bearer Authorization header is 401', async (t) => {
    const tenant = await createTenant(app);
    const sk = tenant.keys.sk_test.secret;
    const none = await expectRejected(t, app, () => app.request('GET', PATH), unauthenticated, 'no header');
    t.match(none.body.error.message, /Bearer/, 'the message says how to send a key');
    await expectRejected(
      t,
      app,
      () =>
        app.request('GET', PATH, {
          headers: { authorization: `Basic ${Buffer.from(sk + ':').toString('base64')}` },
        }),
      unauthenticated,
      'Basic scheme',
    );
    await expectRejected(
      t,
      app,
      () => app.request('GET', PATH, { headers: { authorization: sk } }),
      unauthenticated,
      'a key without a scheme',
    );
    await expectRejected(
      t,
      app,
      () => app.request('GET', PATH, { headers: { authorization: 'Bearer' } }),
      unauthenticated,
      'Bearer without a key',
    );
    t.equal((await app.request('GET', PATH, { key: sk })).status, 200, 'the same key as Bearer works');
  });

  t.test('malformed keys, bad checksums, other brands and unknown keys are 401', async (t) => {
    const tenant = await createTenant(app);
    const sk = tenant.keys.sk_test.secret;
    const last = sk.at(-1)!;
    const cases: [string, string][] = [
      ['garbage', 'not-a-key'],
      ['truncated', sk.slice(0, -1)],
      ['bad checksum', sk.slice(0, -1) + (last === 'a' ? 'b' : 'a')],
      ['other brand', generateApiKey('acme', 'secret', 'test')],
      ['well-formed but unknown', generateApiKey('svc', 'secret', 'test')],
      ['unknown publishable', generateApiKey('svc', 'publishable', 'live')],
      ['a widget-token look-alike', `wt_${randomBytes(4).toString('hex')}_sec_${'A'.repeat(32)}`],
      ['an exchange-token look-alike', generateExchangeToken()],
      ['an intent-token look-alike', `ri_${randomBytes(8).toString('hex')}_sec_${'A'.repeat(32)}`],
    ];
    for (const [label, key] of cases) await keyRejected(t, app, key, unauthenticated, label);
    t.equal((await app.request('GET', PATH, { key: sk })).status, 200, 'the real key still works');
  });

  t.test('a revoked key is 401 at once when the key cache is off', async (t) => {
    const app = await startTestApp(t, engine, { config: { auth: { cacheSeconds: 0 } } });
    const tenant = await createTenant(app);
    const { id, secret } = tenant.keys.sk_live;
    t.equal((await app.request('GET', PATH, { key: secret })).status, 200, 'works before revocation');
    await app.db.transaction((trx) => revokeApiKey(trx, { keyId: id, actor: 'test', now: app.clock.now() }));
    await keyRejected(t, app, secret, unauthenticated, 'revoked');
    t.equal(
      (await app.request('GET', PATH, { key: tenant.keys.sk_test.secret })).status,
      200,
      'other keys unaffected',
    );
  });

  t.test('with the default 5 s key cache, a revoked key is refused 5 s later', async (t) => {
    t.equal(app.config.auth.cacheSeconds, 5);
    const tenant = await createTenant(app);
    const { id, secret } = tenant.keys.sk_test;
    t.equal((await app.request('GET', PATH, { key: secret })).status, 200, 'works (and is now cached)');
    await app.db.transaction((trx) => revokeApiKey(trx, { keyId: id, actor: 'test', now: app.clock.now() }));
    app.clock.advance(5000);
    await keyRejected(t, app, secret, unauthenticated, 'revoked, 5 s on');
  });

  t.test('a rotated key works until its grace period ends; the new key works', async (t) => {
    const tenant = await createTenant(app);
    const old = tenant.keys.sk_test;
    t.equal((await app.request('GET', PATH, { key: old.secret })).status, 200);
    const rotated = await app.db.transaction((trx) =>
      rotateApiKey(trx, {
        brand: app.config.brand,
        keyId: old.id,
        graceSeconds: 3600,
        actor: 'test',
        now: app.clock.now(),
        defaultLimits: app.config.rateLimits,
      }),
    );
    t.not(rotated.secret, old.secret);
    t.equal(
      (await app.request('GET', PATH, { key: rotated.secret })).status,
      200,
      'the new key works at once',
    );
    t.equal(
      (await app.request('GET', PATH, { key: old.secret })).status,
      200,
      'the old key works just after',
    );
    app.clock.advance(3599_000);
    t.equal(
      (await app.request('GET', PATH, { key: old.secret })).status,
      200,
      'and one second before the end',
    );
    app.clock.advance(1000);
    await keyRejected(t, app, old.secret, unauthenticated, 'grace over');
    t.equal((await app.request('GET', PATH, { key: rotated.secret })).status, 200, 'the new key still works');
  });

  t.test('a publishable key is 403 insufficient_scope on a secret-key endpoint', async (t) => {
    const tenant = await createTenant(app);
    for (const pk of [tenant.keys.pk_test.secret, tenant.keys.pk_live.secret]) {
      const response = await keyRejected(t, app, pk, forbidden, 'pk');
      t.match(response.body.error.message, /secret key/, 'the message names the credential needed');
    }
  });

  t.test('a widget token is 403 while valid and 401 once expired', async (t) => {
    const tenant = await createTenant(app);
    const { id, token } = generateWidgetToken();
    const now = app.clock.now();
    await app.db.knex('widget_tokens').insert({
      id,
      org_id: tenant.orgId,
      mode: 'test',
      token_hash: sha256Hex(token),
      intent: 'connect',
      expires_at: now + 600_000,
      created_at: now,
    });
    await keyRejected(t, app, token, forbidden, 'valid widget token');
    app.clock.advance(599_999);
    await keyRejected(t, app, token, forbidden, 'just before expiry');
    app.clock.advance(1);
    await keyRejected(t, app, token, unauthenticated, 'expired widget token');
  });

  t.test('an exchange token is 403 while valid and 401 once consumed or expired', async (t) => {
    const tenant = await createTenant(app);
    const now = app.clock.now();
    const linkId = newId('link');
    await app.db.knex('links').insert({
      id: linkId,
      org_id: tenant.orgId,
      mode: 'test',
      bank_id: 'bci',
      holder_type: 'individual',
      status: 'active',
      credentials_encrypted: app.services.secrets.seal('{}', linkId),
      created_at: now,
      updated_at: now,
    });
    const insertToken = async () => {
      const token = generateExchangeToken();
      const id = `et_${randomBytes(8).toString('hex')}`;
      await app.db.knex('exchange_tokens').insert({
        id,
        org_id: tenant.orgId,
        mode: 'test',
        token_hash: sha256Hex(token),
        link_id: linkId,
        expires_at: app.clock.now() + 300_000,
        created_at: app.clock.now(),
      });
      return { id, token };
    };
    const consumed = await insertToken();
    await keyRejected(t, app, consumed.token, forbidden, 'valid exchange token');
    await app.db.knex('exchange_tokens').where({ id: consumed.id }).update({ consumed_at: app.clock.now() });
    await keyRejected(t, app, consumed.token, unauthenticated, 'consumed');

    const expiring = await insertToken();
    await keyRejected(t, app, expiring.token, forbidden, 'second token');
    app.clock.advance(300_000);
    await keyRejected(t, app, expiring.token, unauthenticated, 'expired');
  });

  t.test('every response carries X-Request-Id; a valid caller id is echoed', async (t) => {
    const tenant = await createTenant(app);
    const ok = await app.request('GET', PATH, { key: tenant.keys.sk_test.secret });
    t.equal(ok.status, 200);
    t.match(ok.headers.get('x-request-id'), REQUEST_ID, 'on success');
    const other = await app.request('GET', PATH, { key: tenant.keys.sk_test.secret });
    t.not(other.headers.get('x-request-id'), ok.headers.get('x-request-id'), 'a new id per request');

    const refused = await app.request('GET', PATH);
    t.match(refused.headers.get('x-request-id'), REQUEST_ID, 'on a 401');
    t.equal(
      refused.body.error.request_id,
      refused.headers.get('x-request-id'),
      'the error body quotes the same id',
    );

    const mine = 'client-trace.0001_abc';
    const echoed = await app.request('GET', PATH, {
      key: tenant.keys.sk_test.secret,
      headers: { 'x-request-id': mine },
    });
    t.equal(echoed.status, 200);
    t.equal(echoed.headers.get('x-request-id'), mine, 'a caller id is echoed');
    const echoedError = await app.request('GET', PATH, { headers: { 'x-request-id': mine } });
    t.equal(echoedError.body.error.request_id, mine, 'and quoted in an error body');

    for (const bad of ['short', 'has spaces in it', 'x'.repeat(65), 'inject\\r\\nline']) {
      const response = await app.request('GET', PATH, {
        key: tenant.keys.sk_test.secret,
        headers: { 'x-request-id': bad },
      });
      t.match(response.headers.get('x-request-id'), REQUEST_ID, `an unusable caller id is replaced: ${bad}`);
    }
  });
});
