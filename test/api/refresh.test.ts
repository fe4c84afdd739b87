import t from 'tap';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import {
  appWithTenants,
  createTenant,
  eventTypes,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  spiedSandbox,
  tableCounts,
} from '../helpers/harness.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
forEachEngine(t, async (t, engine) => {
  const bank = spiedSandbox();
  const { app, tenant, other, sk } = await appWithTenants(t, engine, { connectors: bank.connectors });
  let rutSeq = 1;
  const newLink = async (password = 'sandbox', overrides: Record<string, unknown> = {}) => {
    const rut = `${rutSeq}${rutSeq}.${rutSeq}${rutSeq}${rutSeq}.${rutSeq}${rutSeq}${rutSeq}-${rutSeq}`;
    rutSeq = rutSeq === 9 ? 1 : rutSeq + 1;
    const created = await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ credentials: { rut, password }, ...overrides }),
    });
    if (created.status !== 200) throw new Error(created.text);
    await runSyncs(app);
    return created.body.id as string;
  };
  const refresh = (linkId: string, refreshType?: string, key = sk) =>
    app.request('POST', '/v1/refresh_intents', {
      key,
      body: { link_id: linkId, ...(refreshType ? { refresh_type: refreshType } : {}) },
    });

  t.test('an on-demand refresh goes created → succeeded with a summary and its events', async (t) => {
    const link = await newLink();
    const created = await refresh(link);
    t.equal(created.status, 200);
    t.match(created.body, {
      object: 'refresh_intent',
      link_id: link,
      status: 'created',
      refresh_type: 'only_last',
      summary: null,
      completed_at: null,
      mode: 'test',
    });
    t.equal((await app.request('GET', `/v1/links/${link}`, { key: sk })).body.refresh_status, 'queued');
    await runSyncs(app);
    const done = (await app.request('GET', `/v1/refresh_intents/${created.body.id}`, { key: sk })).body;
    t.match(done, { status: 'succeeded', error_code: null });
    t.ok(done.completed_at);
    t.ok(done.summary.accounts_updated >= 2);
    t.ok(Number.isInteger(done.summary.new_movements_count));
    t.same((await eventTypes(app, link)).slice(-3), [
      'refresh_intent.created',
      'refresh_intent.succeeded',
      'link.refreshed',
    ]);
  });

  t.test('cooldowns per link and type, with Retry-After; one refresh at a time', async (t) => {
    const link = await newLink();
    const first = await refresh(link);
    const busy = await refresh(link, 'historical');
    t.equal(busy.status, 409);
    t.match(busy.body, { error: { type: 'invalid_request_error', code: 'refresh_in_progress' } });
    await runSyncs(app);
    const before = await tableCounts(app.db);
    const again = await refresh(link);
    t.equal(again.status, 409);
    t.match(again.body, { error: { code: 'refresh_cooldown' } });
    t.equal(again.headers.get('retry-after'), '300', '5 minutes from the first request');
    t.same(await tableCounts(app.db), before, 'nothing was written');
    t.equal((await refresh(link, 'historical')).status, 200, 'historical has its own cooldown');
    await runSyncs(app);
    app.clock.advance(4 * MINUTE);
    t.equal((await refresh(link)).headers.get('retry-after'), '60');
    app.clock.advance(MINUTE);
    t.equal((await refresh(link)).status, 200, 'after 5 minutes');
    await runSyncs(app);
    const historical = await refresh(link, 'historical');
    t.equal(historical.status, 409);
    t.equal(historical.headers.get('retry-after'), String(55 * 60), 'historical waits 60 minutes');
    app.clock.advance(55 * MINUTE);
    t.equal((await refresh(link, 'historical')).status, 200);
    await runSyncs(app);
    void first;
  });

  t.test('paused links refresh; expired ones say to reconnect', async (t) => {
    const paused = await newLink();
    await app.request('POST', `/v1/links/${paused}/pause`, { key: sk });
    t.equal((await refresh(paused)).status, 200);
    await runSyncs(app);
    const expiring = await newLink('sandbox-expiring');
    for (let i = 0; i < 3; i++) {
      app.clock.advance(4 * HOUR + MINUTE);
      await schedulerTick(app);
    }
    const expired = await refresh(expiring);
    t.equal(expired.status, 409);
    t.match(expired.body, { error: { code: 'link_expired' } });
    t.match(expired.body.error.message, /reconnect/);
  });

  t.test('bad input', async (t) => {
    const link = await newLink();
    for (const [body, status, code, param] of [
      [{}, 400, 'parameter_missing', 'link_id'],
      [{ link_id: link, refresh_type: 'full' }, 400, 'parameter_invalid', 'refresh_type'],
      [{ link_id: 'link_nope' }, 400, 'parameter_invalid', 'link_id'],
      [{ link_id: 'link_0000000000000000' }, 404, 'resource_missing', undefined],
    ] as const) {
      const response = await app.request('POST', '/v1/refresh_intents', { key: sk, body });
      t.equal(response.status, status, JSON.stringify(body));
      t.equal(response.body.error.code, code);
      if (param) t.equal(response.body.error.param, param);
    }
    t.equal((await refresh(link, undefined, other.keys.sk_test.secret)).status, 404);
    t.equal((await refresh(link, undefined, tenant.keys.sk_live.secret)).body.error.code, 'wrong_mode');
    t.equal(
      (await refresh(link, undefined, tenant.keys.pk_test.secret)).body.error.code,
      'insufficient_scope',
    );
  });

  t.test('MFA: the intent waits, the code resumes it without a second login', async (t) => {
    const link = await newLink('sandbox-mfa');
    const intent = (await refresh(link)).body;
    bank.reset();
    await runSyncs(app);
    const waiting = (await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body;
    t.equal(waiting.status, 'requires_mfa');
    t.match(waiting.requires_mfa.widget_token, new RegExp(`^${intent.id}_sec_[0-9A-Za-z]{32}$`));
    t.ok(Date.parse(waiting.requires_mfa.expires_at) > app.clock.now());
    t.equal((await app.request('GET', `/v1/links/${link}`, { key: sk })).body.refresh_status, 'requires_mfa');
    const event = await app.db
      .knex('events')
      .where({ link_id: link, type: 'refresh_intent.requires_mfa' })
      .first();
    t.same(JSON.parse(event.data).requires_mfa, waiting.requires_mfa, 'the event carries the token');
    t.equal(
      (await refresh(link, 'historical')).body.error.code,
      'refresh_in_progress',
      'a waiting refresh occupies the link',
    );
    t.equal(bank.calls.login, 1);

    const answered = await app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, {
      key: sk,
      body: { code: '123456' },
    });
    t.equal(answered.status, 200);
    await runSyncs(app);
    t.equal(bank.calls.login, 1, 'no second login');
    t.equal(bank.calls.submitMfa, 1);
    const done = (await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body;
    t.match(done, { status: 'succeeded', requires_mfa: null });
    const row = await app.db.knex('refresh_intents').where({ id: intent.id }).first();
    t.equal(row.mfa_code_encrypted, null, 'the code is not kept');
    t.equal(
      (
        await app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, {
          key: sk,
          body: { code: '123456' },
        })
      ).body.error.code,
      'intent_not_waiting_for_mfa',
    );
  });

  t.test('MFA: a waiting token that no longer opens reads as blank, not as a server error', async (t) => {
    const link = await newLink('sandbox-mfa');
    const intent = (await refresh(link)).body;
    await runSyncs(app);
    const row = await app.db.knex('refresh_intents').where({ id: intent.id }).first();
    const sealed: string = row.mfa_token_encrypted;
    const flipped = sealed.slice(0, -2) + (sealed.at(-2) === 'A' ? 'B' : 'A') + sealed.at(-1);
    await app.db.knex('refresh_intents').where({ id: intent.id }).update({ mfa_token_encrypted: flipped });
    const read = await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk });
    t.equal(read.status, 200);
    t.equal(read.body.status, 'requires_mfa');
    t.equal(read.body.requires_mfa.widget_token, '', 'no garbage token is handed out');
  });

  t.test('MFA: a code is taken once; a second one while it is checked is refused', async (t) => {
    const link = await newLink('sandbox-mfa');
    const intent = (await refresh(link)).body;
    await runSyncs(app);
    const code = (value: string) =>
      app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, { key: sk, body: { code: value } });
    t.equal((await code('123456')).status, 200, 'the first code is taken');
    const second = await code('000000');
    t.equal(second.status, 409, 'a second code is refused');
    t.equal(second.body.error.code, 'mfa_code_in_progress');
    await runSyncs(app);
    t.match(
      (await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body,
      { status: 'succeeded' },
      'the first (right) code was the one verified, not the second (wrong) one',
    );
  });

  t.test('MFA: a wrong code asks again; the third fails the intent with mfa_invalid', async (t) => {
    const link = await newLink('sandbox-mfa');
    const intent = (await refresh(link)).body;
    await runSyncs(app);
    const waiting = (await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body;
    for (let wrong = 1; wrong < 3; wrong++) {
      const sent = await app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, {
        key: sk,
        body: { code: '000000' },
      });
      t.equal(sent.status, 200);
      await runSyncs(app);
      t.match(
        (await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body,
        { status: 'requires_mfa', requires_mfa: waiting.requires_mfa },
        `wrong code ${wrong}: the same wait (token and expires_at) takes another code`,
      );
    }
    await app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, { key: sk, body: { code: '000000' } });
    await runSyncs(app);
    t.match((await app.request('GET', `/v1/refresh_intents/${intent.id}`, { key: sk })).body, {
      status: 'failed',
      error_code: 'mfa_invalid',
    });
    t.equal(
      (await app.request('GET', `/v1/links/${link}`, { key: sk })).body.status,
      'active',
      'a wrong code does not expire the link',
    );
  });

  t.test('MFA: a code after expires_at, or no code at all, fails the intent with mfa_expired', async (t) => {
    const link = await newLink('sandbox-mfa');
    const late = (await refresh(link)).body;
    await runSyncs(app);
    app.clock.advance(6 * MINUTE);
    const response = await app.request('POST', `/v1/refresh_intents/${late.id}/mfa`, {
      key: sk,
      body: { code: '123456' },
    });
    t.equal(response.status, 409);
    t.equal(response.body.error.code, 'mfa_expired');
    t.match(
      (await app.request('GET', `/v1/refresh_intents/${late.id}`, { key: sk })).body,
      { status: 'failed', error_code: 'mfa_expired' },
      'the failure was kept',
    );

    app.clock.advance(HOUR);
    const silent = (await refresh(link, 'historical')).body;
    await runSyncs(app);
    app.clock.advance(6 * MINUTE);
    await runHousekeeping(app.services);
    t.match((await app.request('GET', `/v1/refresh_intents/${silent.id}`, { key: sk })).body, {
      status: 'failed',
      error_code: 'mfa_expired',
    });
    const types = await eventTypes(app, link);
    t.equal(types.at(-1), 'refresh_intent.failed');
    t.equal((await app.request('GET', `/v1/links/${link}`, { key: sk })).body.refresh_status, 'idle');
  });

  t.test('backfill: statements for business links of bci; a covered period downloads nothing', async (t) => {
    const business = {
      bank_id: 'bci',
      holder_type: 'business',
      credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.543.210-3' },
    };
    const created = await app.request('POST', '/v1/links', { key: sk, body: linkBody(business) });
    const link = created.body.id;
    await runSyncs(app);
    const oldest = async () =>
      Number((await app.db.knex('movements').where({ link_id: link }).min({ at: 'posted_at' }).first())?.at);
    const before = await oldest();

    const first = await app.request('POST', `/v1/links/${link}/backfill`, { key: sk, body: { months: 3 } });
    t.equal(first.status, 200);
    t.match(first.body, { object: 'refresh_intent', refresh_type: 'backfill', status: 'created' });
    bank.reset();
    await runSyncs(app);
    t.ok((bank.calls.statements ?? 0) > 0, 'statements downloaded');
    t.match((await app.request('GET', `/v1/refresh_intents/${first.body.id}`, { key: sk })).body, {
      status: 'succeeded',
    });
    const afterFirst = await oldest();
    t.ok(afterFirst < before - 60 * 24 * HOUR, 'movements older than 90 days arrived');
    t.ok(
      (await eventTypes(app, link)).slice(-2).includes('link.refreshed'),
      'the same events as any refresh',
    );

    bank.reset();
    const repeat = await app.request('POST', `/v1/links/${link}/backfill`, { key: sk, body: { months: 3 } });
    await runSyncs(app);
    t.same(bank.calls, {}, 'a repeat for a covered period makes no call to the bank');
    t.match((await app.request('GET', `/v1/refresh_intents/${repeat.body.id}`, { key: sk })).body, {
      status: 'succeeded',
      summary: { new_movements_count: 0 },
    });

    bank.reset();
    await app.request('POST', `/v1/links/${link}/backfill`, { key: sk, body: { months: 6 } });
    await runSyncs(app);
    t.ok((bank.calls.statements ?? 0) > 0, 'a longer period downloads the extension');
    t.ok((await oldest()) < afterFirst - 60 * 24 * HOUR);

    bank.reset();
    await app.request('POST', `/v1/links/${link}/backfill`, { key: sk, body: { months: 6, force: true } });
    const perAccount = async () =>
      Object.fromEntries(
        (
          await app.db
            .knex('movements')
            .where({ link_id: link })
            .groupBy('account_id')
            .select('account_id')
            .count({ n: '*' })
        ).map((row: { account_id?: string; n?: string | number }) => [row.account_id, Number(row.n)]),
      );
    const counts = await perAccount();
    await runSyncs(app);
    t.ok((bank.calls.statements ?? 0) > 0, 'force downloads again');
    const after = await perAccount();
    t.same(after, counts, 'and finds nothing new: every account already had its whole period');

    const individual = await newLink();
    const refused = await app.request('POST', `/v1/links/${individual}/backfill`, {
      key: sk,
      body: { months: 3 },
    });
    t.equal(refused.status, 400);
    t.equal(refused.body.error.code, 'backfill_unavailable');
    for (const months of [0, 25, 'six']) {
      t.equal(
        (await app.request('POST', `/v1/links/${link}/backfill`, { key: sk, body: { months } })).body.error
          .param,
        'months',
      );
    }
  });

  t.test('sync_write allows a burst of 5', async (t) => {
    const fresh = await createTenant(app);
    const links = [];
    for (let i = 0; i < 6; i++) links.push(await newLink());
    const statuses = [];
    for (const link of links)
      statuses.push((await refresh(link, undefined, fresh.keys.sk_test.secret)).status);
    t.same(
      statuses.slice(0, 5).every((s) => s === 404),
      true,
      'the first five pass the limiter (another organisation: 404)',
    );
    t.equal(statuses[5], 429);
  });
});
