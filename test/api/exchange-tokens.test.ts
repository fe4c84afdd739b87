import t from 'tap';
import { generateExchangeToken } from '../../src/auth/tokens.js';
import { sha256Hex } from '../../src/secrets/secret-box.js';
import { appWithTenants, eventTypes, forEachEngine, tableCounts } from '../helpers/harness.js';
import { connectThroughWidget } from '../helpers/widget.js';

const MINUTE = 60_000;
forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine);
  const exchange = (token: string, key = sk) => app.request('POST', `/v1/exchange_tokens/${token}`, { key });
  const linkOf = async (token: string) => {
    const row = await app.db
      .knex('exchange_tokens')
      .where({ token_hash: sha256Hex(token) })
      .first();
    return row.link_id as string;
  };

  t.test('an exchange returns the link once, and link.created follows it', async (t) => {
    const { exchangeToken } = await connectThroughWidget(app, sk, { token: { external_user_id: 'user-9' } });
    const linkId = await linkOf(exchangeToken);
    t.notOk(
      (await eventTypes(app, linkId)).includes('link.created'),
      'nothing announced before the exchange',
    );
    const row = await app.db.knex('exchange_tokens').where({ link_id: linkId }).first();
    t.equal(row.expires_at, app.clock.now() + 5 * MINUTE, 'a 5-minute lifetime');
    t.equal(row.intent, 'connect');

    const first = await exchange(exchangeToken);
    t.equal(first.status, 200);
    t.match(first.body, {
      object: 'link',
      id: linkId,
      bank_id: 'bancochile',
      status: 'active',
      external_user_id: 'user-9',
      mode: 'test',
    });
    t.ok(first.body.last_synced_at, 'the first sync already ran');
    const types = await eventTypes(app, linkId);
    t.equal(types.at(-1), 'link.created');
    const event = await app.db.knex('events').where({ link_id: linkId, type: 'link.created' }).first();
    t.same(JSON.parse(event.data), {
      object: 'link',
      id: linkId,
      bank_id: 'bancochile',
      status: 'active',
      holder_name: first.body.holder_name,
      created_at: first.body.created_at,
    });

    const before = await tableCounts(app.db);
    const again = await exchange(exchangeToken);
    t.equal(again.status, 409);
    t.match(again.body.error, { type: 'invalid_request_error', code: 'exchange_token_consumed' });
    t.match(again.body.error.message, /already exchanged/);
    t.same(await tableCounts(app.db), before, 'a reuse writes nothing (no second link.created)');
  });

  t.test('an exchange token lives 5 minutes', async (t) => {
    const early = await connectThroughWidget(app, sk);
    const late = await connectThroughWidget(app, sk);
    app.clock.advance(5 * MINUTE - 1);
    t.equal((await exchange(early.exchangeToken)).status, 200, 'just before 5 minutes');
    app.clock.advance(1);
    const expired = await exchange(late.exchangeToken);
    t.equal(expired.status, 409);
    t.equal(expired.body.error.code, 'exchange_token_expired');
    t.match(expired.body.error.message, /expired at .* \(5 minutes after the widget issued it\)/);
    t.notOk(
      (await eventTypes(app, await linkOf(late.exchangeToken))).includes('link.created'),
      'an expired token announces nothing',
    );
  });

  t.test('who may exchange: a secret key of the same organisation and mode', async (t) => {
    const { exchangeToken } = await connectThroughWidget(app, sk);
    const before = await tableCounts(app.db);
    const foreign = await exchange(exchangeToken, other.keys.sk_test.secret);
    t.equal(foreign.status, 404, "another organisation's key sees nothing");
    t.equal(foreign.body.error.code, 'resource_missing');
    const wrongMode = await exchange(exchangeToken, tenant.keys.sk_live.secret);
    t.equal(wrongMode.status, 403);
    t.equal(wrongMode.body.error.code, 'wrong_mode');
    const publishable = await exchange(exchangeToken, tenant.keys.pk_test.secret);
    t.equal(publishable.status, 403);
    t.equal(publishable.body.error.code, 'insufficient_scope');
    const itself = await exchange(exchangeToken, exchangeToken);
    t.equal(itself.status, 403, 'the exchange token is no credential for its own exchange');
    const unknown = await exchange(generateExchangeToken());
    t.equal(unknown.status, 404);
    const malformed = await exchange('et_short');
    t.equal(malformed.status, 400);
    t.equal(malformed.body.error.param, 'tokenId');
    t.same(await tableCounts(app.db), before, 'none of these consumed the token');
    t.equal((await exchange(exchangeToken)).status, 200, 'which still works for its owner');
  });

  t.test('50 concurrent exchanges of one token: exactly one succeeds', async (t) => {
    const { exchangeToken } = await connectThroughWidget(app, sk);
    const responses = await Promise.all(Array.from({ length: 50 }, () => exchange(exchangeToken)));
    const statuses = responses.map((response) => response.status);
    t.equal(statuses.filter((status) => status === 200).length, 1, 'one 200');
    t.equal(statuses.filter((status) => status === 409).length, 49, '49 conflicts');
    t.ok(
      responses.filter((r) => r.status === 409).every((r) => r.body.error.code === 'exchange_token_consumed'),
      'each loser is told the token was used',
    );
    const linkId = await linkOf(exchangeToken);
    t.equal((await eventTypes(app, linkId)).filter((type) => type === 'link.created').length, 1);
  });

  t.test('deleting the link takes its exchange tokens with it', async (t) => {
    const { exchangeToken } = await connectThroughWidget(app, sk);
    const linkId = await linkOf(exchangeToken);
    await app.request('DELETE', `/v1/links/${linkId}`, { key: sk });
    t.equal((await exchange(exchangeToken)).status, 404);
  });
});
