import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { sha256Hex } from '../../src/secrets/secret-box.js';
import { openCredentials } from '../../src/links/links.js';
import {
  appWithTenants,
  createTenant,
  eventTypes,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  startTestApp,
  tableCounts,
  type TestApp,
} from '../helpers/harness.js';
import {
  connectThroughWidget,
  OPENER,
  openWidget,
  refreshAwaitingMfa,
  widgetApi,
  widgetToken,
} from '../helpers/widget.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
let rutSeq = 0;
/** A different valid RUT each time, so every sandbox link has its own holder. */
function nextRut(): string {
  rutSeq += 1;
  const body = String(20_000_000 + rutSeq * 7919);
  let sum = 0;
  let factor = 2;
  for (let i = body.length - 1; i >= 0; i--) {
    sum += Number(body[i]) * factor;
    factor = factor === 7 ? 2 : factor + 1;
  }
  const rest = 11 - (sum % 11);
  return `${body}-${rest === 11 ? '0' : rest === 10 ? 'K' : rest}`;
}

async function serverLink(
  app: TestApp,
  sk: string,
  password = 'sandbox',
  extra: Record<string, unknown> = {},
) {
  const created = await app.request('POST', '/v1/links', {
    key: sk,
    body: linkBody({ credentials: { rut: nextRut(), password }, ...extra }),
  });
  if (created.status !== 200) throw new Error(created.text);
  await runSyncs(app);
  return created.body.id as string;
}

/** The RUT a link was made with, as a person reconnecting it would type it. */
async function holderRut(app: TestApp, linkId: string): Promise<string> {
  const row = await app.db.knex('links').where({ id: linkId }).first();
  return openCredentials(row, app.services.secrets).rut;
}

/** A link that expired: `sandbox-expiring` syncs once, then three scheduled syncs are rejected. */
async function expiredLink(app: TestApp, sk: string): Promise<string> {
  const id = await serverLink(app, sk, 'sandbox-expiring');
  for (let i = 0; i < 3; i++) {
    app.clock.advance(4 * HOUR + MINUTE);
    await schedulerTick(app);
  }
  const link = await app.request('GET', `/v1/links/${id}`, { key: sk });
  if (link.body.status !== 'expired') throw new Error(`expected expired: ${link.text}`);
  return id;
}

forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine);
  const pk = tenant.keys.pk_test.secret;

  t.test('a secret or a publishable key creates a token, shown once and stored as a hash', async (t) => {
    const created = await app.request('POST', '/v1/widget_tokens', { key: sk, body: {} });
    t.equal(created.status, 200);
    t.match(created.body, {
      object: 'widget_token',
      id: /^wt_[0-9a-f]{8}$/,
      token: /^wt_[0-9a-f]{8}_sec_[0-9A-Za-z]{32}$/,
      intent: 'connect',
      product: 'movements',
      institution_id: null,
      link_id: null,
      connection_limit: null,
      mode: 'test',
    });
    t.ok(created.body.token.startsWith(`${created.body.id}_sec_`), 'the public part names the row');
    t.equal(Date.parse(created.body.expires_at), app.clock.now() + 10 * MINUTE, '10 minutes');
    t.equal(created.body.widget_url, `${app.config.api.baseUrl}/widget?token=${created.body.token}`);
    t.ok(created.headers.get('x-ratelimit-limit'), 'charged to the widget_tokens group');
    const row = await app.db.knex('widget_tokens').where({ id: created.body.id }).first();
    t.equal(row.token_hash, sha256Hex(created.body.token));
    t.equal(row.consumed_at, null);
    t.notOk(JSON.stringify(row).includes(created.body.token), 'the plaintext is not stored');

    const withPk = await app.request('POST', '/v1/widget_tokens', {
      key: pk,
      body: {
        institution_id: 'bci',
        username_prefill: '123456785',
        external_user_id: 'user-1',
        connection_limit: 2,
        product: 'income',
      },
    });
    t.equal(withPk.status, 200, 'a publishable key may create widget tokens');
    t.match(withPk.body, {
      institution_id: 'bci',
      username_prefill: '12.345.678-5',
      external_user_id: 'user-1',
      connection_limit: 2,
      product: 'income',
    });
    const live = await app.request('POST', '/v1/widget_tokens', {
      key: tenant.keys.pk_live.secret,
      body: {},
    });
    t.equal(live.body.mode, 'live', "the key's mode is the token's");
    const unavailable = await app.request('POST', '/v1/widget_tokens', {
      key: tenant.keys.pk_live.secret,
      body: { institution_id: 'bci' },
    });
    t.equal(unavailable.status, 400);
    t.equal(unavailable.body.error.code, 'institution_unavailable', 'no live connector for bci here');
    const unregistered = await app.request('POST', '/v1/widget_tokens', {
      key: tenant.keys.pk_test.secret,
      body: { institution_id: 'bancoabierto' },
    });
    t.equal(unregistered.status, 400);
    t.equal(
      unregistered.body.error.code,
      'institution_unavailable',
      'a consent bank the appliance is not registered with',
    );
  });

  t.test('bad input: the envelope with a param, and nothing written', async (t) => {
    const active = await serverLink(app, sk);
    const expired = await expiredLink(app, sk);
    const othersExpired = await expiredLink(app, other.keys.sk_test.secret);
    const before = await tableCounts(app.db);
    for (const [body, status, code, param, key] of [
      [{ intent: 'disconnect' }, 400, 'parameter_invalid', 'intent'],
      [{ intent: 'reconnect' }, 400, 'parameter_missing', 'link_id'],
      [{ intent: 'reconnect', link_id: active }, 409, 'link_not_expired', undefined],
      [{ intent: 'reconnect', link_id: 'link_0000000000000000' }, 404, 'resource_missing', undefined],
      [{ intent: 'reconnect', link_id: othersExpired }, 404, 'resource_missing', undefined],
      [{ intent: 'reconnect', link_id: expired }, 403, 'wrong_mode', undefined, tenant.keys.sk_live.secret],
      [
        { intent: 'reconnect', link_id: expired, connection_limit: 1 },
        400,
        'parameter_invalid',
        'connection_limit',
      ],
      [
        { intent: 'reconnect', link_id: expired, institution_id: 'itau' },
        400,
        'parameter_invalid',
        'institution_id',
      ],
      [{ link_id: expired }, 400, 'parameter_invalid', 'link_id'],
      [{ link_id: 'link_x' }, 400, 'parameter_invalid', 'link_id'],
      [{ institution_id: 'bancofalso' }, 400, 'parameter_invalid', 'institution_id'],
      [{ institution_id: 'bancochile', product: 'backfill' }, 400, 'parameter_invalid', 'institution_id'],
      [{ product: 'loans' }, 400, 'parameter_invalid', 'product'],
      [{ connection_limit: 0, external_user_id: 'u' }, 400, 'parameter_invalid', 'connection_limit'],
      [{ connection_limit: 1.5, external_user_id: 'u' }, 400, 'parameter_invalid', 'connection_limit'],
      [{ connection_limit: 2 }, 400, 'parameter_missing', 'external_user_id'],
      [{ username_prefill: '12.345.678-9' }, 400, 'parameter_invalid', 'username_prefill'],
      [{ external_user_id: '' }, 400, 'parameter_invalid', 'external_user_id'],
      [{ colour: 'red' }, 400, 'parameter_invalid', 'colour'],
    ] as const) {
      const response = await app.request('POST', '/v1/widget_tokens', { key: key ?? sk, body });
      t.equal(response.status, status, JSON.stringify(body));
      t.equal(response.body.error.code, code, JSON.stringify(body));
      if (param) t.equal(response.body.error.param, param, JSON.stringify(body));
      t.ok(response.body.error.message.length > 20, 'a message a person can act on');
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
    const reconnect = await app.request('POST', '/v1/widget_tokens', {
      key: sk,
      body: { intent: 'reconnect', link_id: expired },
    });
    t.equal(reconnect.status, 200, 'an expired link of the same organisation and mode');
    t.match(reconnect.body, { intent: 'reconnect', link_id: expired, institution_id: 'bancochile' });
  });

  t.test(
    'a publishable key cannot open a reconnect: no widget to learn who holds a link (issue 43, item 5)',
    async (t) => {
      const expired = await expiredLink(app, sk);
      const before = await tableCounts(app.db);
      const answers = [];
      for (const link_id of [expired, 'link_0000000000000000', undefined]) {
        const response = await app.request('POST', '/v1/widget_tokens', {
          key: pk,
          body: { intent: 'reconnect', ...(link_id ? { link_id } : {}) },
        });
        t.equal(response.status, 403, String(link_id));
        t.equal(response.body.error.code, 'insufficient_scope');
        t.equal(response.body.error.param, 'intent');
        answers.push(response.body.error.message);
      }
      t.equal(new Set(answers).size, 1, 'the same answer whether the link exists or not');
      t.match(answers[0], /secret key/);
      t.same(await tableCounts(app.db), before, 'nothing was written');
    },
  );

  t.test('a widget token opens the widget once, and only within 10 minutes', async (t) => {
    const token = await widgetToken(app, sk);
    const head = await fetch(`${app.url}/widget?token=${token}&origin=${encodeURIComponent(OPENER)}`, {
      method: 'HEAD',
    });
    t.equal(head.status, 200, 'a HEAD (a link checker) does not spend the token');
    const opened = await openWidget(app, token);
    t.equal(opened.status, 200);
    t.match(opened.headers.get('content-type'), /^text\/html/);
    t.equal(opened.headers.get('cache-control'), 'no-store');
    t.match(opened.headers.get('content-security-policy'), `frame-ancestors ${OPENER}`);
    t.match(opened.headers.get('content-security-policy'), "script-src 'self'");
    t.match(opened.bootstrap, {
      session: /^wss_[0-9A-Za-z]{40}$/,
      kind: 'connect',
      opener_origin: OPENER,
      error: null,
    });
    t.equal(opened.bootstrap.banks.length, 11, 'every sandbox bank offers movements');
    t.notMatch(
      opened.html,
      /<(script|link|img)[^>]+(src|href)="https?:/,
      'scripts and styles come from this server',
    );
    const row = await app.db
      .knex('widget_tokens')
      .where({ token_hash: sha256Hex(token) })
      .first();
    t.equal(row.consumed_at, app.clock.now(), 'consumed_at is set when the widget opens');

    const again = await openWidget(app, token);
    t.equal(again.status, 410);
    t.match(again.html, 'This link was already used');
    t.match(again.html, 'Go back to the app and start again');
    t.equal(again.bootstrap.session, null, 'no session for a second open');
    t.match(again.bootstrap.error, { code: 'token_consumed', retry: false });

    const early = await widgetToken(app, sk);
    const late = await widgetToken(app, sk);
    app.clock.advance(10 * MINUTE - 1);
    t.equal((await openWidget(app, early)).status, 200, 'just before 10 minutes');
    app.clock.advance(1);
    const expired = await openWidget(app, late);
    t.equal(expired.status, 410);
    t.match(expired.html, 'This link has expired');
    t.match(expired.bootstrap.error, { code: 'token_expired' });
    t.equal(
      (
        await app.db
          .knex('widget_tokens')
          .where({ token_hash: sha256Hex(late) })
          .first()
      ).consumed_at,
      null,
      'an expired token is not consumed',
    );

    const unknown = await openWidget(app, `wt_00000000_sec_${'A'.repeat(32)}`);
    t.equal(unknown.status, 404);
    t.match(unknown.html, 'This link is not valid');
    t.equal((await openWidget(app, 'wt_nope')).status, 400);
  });

  t.test("the opener's origin is checked before the token is used", async (t) => {
    const token = await widgetToken(app, sk);
    for (const origin of ['null', 'http://127.0.0.1:9/path', 'javascript:alert(1)', 'ftp://x.example']) {
      const refused = await openWidget(app, token, origin);
      t.equal(refused.status, 400, `origin ${JSON.stringify(origin)}`);
      t.match(refused.html, 'This page cannot be opened here');
      t.match(refused.headers.get('content-security-policy'), "frame-ancestors 'none'");
    }
    // widget_url as returned (no origin) and no redirect_uri: a person opened it as a plain link. The page
    // says what to do instead of a 400, and the token stays unspent for the app to open properly.
    const plain = await openWidget(app, token, '');
    t.equal(plain.status, 200, 'no origin, no redirect_uri');
    t.match(plain.html, 'Open this from the app');
    t.match(plain.html, 'redirect_uri');
    t.equal(plain.bootstrap.session, null, 'no session');
    t.match(plain.headers.get('content-security-policy'), "frame-ancestors 'none'");
    t.equal((await openWidget(app, token)).status, 200, 'the token was not spent by the refusals');
  });

  t.test('allowedOrigins limits who may open the widget', async (t) => {
    const restricted = await startTestApp(t, engine, {
      config: { widget: { allowedOrigins: ['https://app.example.com'] } },
    });
    const owner = await createTenant(restricted);
    const token = await widgetToken(restricted, owner.keys.sk_test.secret);
    const refused = await openWidget(restricted, token, 'https://evil.example.com');
    t.equal(refused.status, 400);
    t.match(refused.html, 'This page cannot be opened here');
    const opened = await openWidget(restricted, token, 'https://app.example.com');
    t.equal(opened.status, 200);
    t.match(opened.headers.get('content-security-policy'), 'frame-ancestors https://app.example.com');
  });

  t.test("the operator's name, colour and logo, from the config", async (t) => {
    const branded = await startTestApp(t, engine, {
      config: { widget: { name: 'Acme Pay', primaryColour: '#FFCC00', logoUrl: 'brand/logo.svg' } },
    });
    mkdirSync(join(branded.config.home, 'brand'), { recursive: true });
    writeFileSync(
      join(branded.config.home, 'brand', 'logo.svg'),
      '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/></svg>',
    );
    const owner = await createTenant(branded);
    const opened = await openWidget(branded, await widgetToken(branded, owner.keys.sk_test.secret));
    t.match(opened.html, '<title>Connect your bank · Acme Pay</title>');
    t.match(opened.html, '<span class="brand-name">Acme Pay</span>');
    const logoSrc = /<img class="brand-logo" src="([^"]+)"/.exec(opened.html)?.[1];
    t.match(logoSrc, /^\/widget\/assets\/logo\?v=/, 'a logo file in the data directory is served by the API');
    const logo = await fetch(`${branded.url}${logoSrc}`);
    t.equal(logo.headers.get('content-type'), 'image/svg+xml');
    t.match(logo.headers.get('content-security-policy'), "default-src 'none'", 'an SVG logo runs no script');
    t.match(await logo.text(), '<rect');
    const themeHref = /href="(\/widget\/assets\/theme\.css\?v=[^"]+)"/.exec(opened.html)![1]!;
    const theme = await (await fetch(`${branded.url}${themeHref}`)).text();
    t.match(theme, '--brand: #ffcc00;');
    t.match(theme, '--brand-ink: #111827;', 'dark text on a light colour keeps its contrast');
    const script = await fetch(`${branded.url}/widget/embed.js`);
    t.match(script.headers.get('content-type'), /^text\/javascript/);
    t.match(await script.text(), 'window.SvcWidget = { open: open');
  });

  t.test('the widget API needs its session, which ends after 30 minutes', async (t) => {
    const opened = await openWidget(app, await widgetToken(app, sk));
    const missing = await app.request('GET', '/widget/api/status');
    t.equal(missing.status, 401);
    t.equal(missing.body.error.code, 'widget_session_invalid');
    const forged = await widgetApi(app, `wss_${'A'.repeat(40)}`, 'GET', 'status');
    t.equal(forged.status, 401);
    const idle = await widgetApi(app, opened.bootstrap.session, 'GET', 'status');
    t.same(idle.body, { state: 'idle' });
    t.equal(idle.headers.get('cache-control'), 'no-store');
    app.clock.advance(30 * MINUTE);
    const ended = await widgetApi(app, opened.bootstrap.session, 'GET', 'status');
    t.equal(ended.status, 401);
    t.match(ended.body.error.message, /open the widget again/);
  });

  t.test(
    'a connect: credentials, the first sync, success; the link is announced at the exchange',
    async (t) => {
      const token = await widgetToken(app, sk, { external_user_id: 'user-connect' });
      const { bootstrap } = await openWidget(app, token);
      const session = bootstrap.session;
      const badRut = await widgetApi(app, session, 'POST', 'credentials', {
        bank_id: 'santander',
        rut: '12.345.678-9',
        password: 'sandbox',
      });
      t.equal(badRut.status, 400);
      t.equal(badRut.body.error.param, 'credentials.rut');
      const started = await widgetApi(app, session, 'POST', 'credentials', {
        bank_id: 'santander',
        rut: '12.345.678-5',
        password: 'sandbox',
      });
      t.equal(started.status, 200);
      t.same(started.body, { state: 'in_progress', step: 'queued' });
      const busy = await widgetApi(app, session, 'POST', 'credentials', {
        bank_id: 'santander',
        rut: '12.345.678-5',
        password: 'sandbox',
      });
      t.equal(busy.body.error.code, 'connection_in_progress');
      const sessionRow = await app.db
        .knex('widget_sessions')
        .where({ session_hash: sha256Hex(session) })
        .first();
      const link = await app.db.knex('links').where({ id: sessionRow.link_id }).first();
      t.match(link, { bank_id: 'santander', external_user_id: 'user-connect', consent_version: 'widget-1' });
      t.notOk((await eventTypes(app, link.id)).includes('link.created'), 'not announced yet');
      t.equal((await widgetApi(app, session, 'POST', 'finish')).body.error.code, 'not_connected');

      await runSyncs(app);
      const done = await widgetApi(app, session, 'GET', 'status');
      t.match(done.body, { state: 'succeeded', accounts_count: Number });
      t.ok(done.body.holder_name);
      const finished = await widgetApi(app, session, 'POST', 'finish');
      t.match(finished.body, { type: 'success', intent: 'connect', exchange_token: /^et_[0-9A-Za-z]{40}$/ });
      t.equal((await widgetApi(app, session, 'POST', 'finish')).body.error.code, 'already_finished');
      t.same((await widgetApi(app, session, 'GET', 'status')).body, { state: 'finished' });

      const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
        key: sk,
      });
      t.equal(exchanged.status, 200);
      t.match(exchanged.body, {
        object: 'link',
        id: link.id,
        status: 'active',
        holder_name: done.body.holder_name,
      });
      const types = await eventTypes(app, link.id);
      t.equal(types.at(-1), 'link.created', 'link.created follows the exchange');
      t.equal(types.filter((type) => type === 'link.created').length, 1);
      const event = await app.db.knex('events').where({ link_id: link.id, type: 'link.created' }).first();
      t.match(JSON.parse(event.data), {
        object: 'link',
        id: link.id,
        bank_id: 'santander',
        status: 'active',
      });
      t.ok(JSON.parse(event.data).holder_name, 'with the holder name of the first sync');
    },
  );

  t.test('refused credentials: an error that says what to do, the link discarded, another try', async (t) => {
    const before = Number((await app.db.knex('links').count({ n: '*' }))[0]!.n);
    const { bootstrap } = await openWidget(app, await widgetToken(app, sk, { institution_id: 'itau' }));
    t.equal(bootstrap.bank_id, 'itau', 'the preselected bank');
    const wrongBank = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      bank_id: 'bci',
      rut: nextRut(),
      password: 'sandbox',
    });
    t.equal(wrongBank.body.error.param, 'bank_id');
    await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      rut: nextRut(),
      password: 'sandbox-rejected',
    });
    await runSyncs(app);
    const failed = await widgetApi(app, bootstrap.session, 'GET', 'status');
    t.match(failed.body, {
      state: 'failed',
      error: { code: 'rejected_credentials', retry: true, title: /did not accept/, message: /try again/ },
    });
    t.equal(
      Number((await app.db.knex('links').count({ n: '*' }))[0]!.n),
      before,
      'the failed link was never handed over, and is gone',
    );
    t.same(
      (await widgetApi(app, bootstrap.session, 'GET', 'status')).body,
      failed.body,
      'the failure is remembered',
    );
    await widgetApi(app, bootstrap.session, 'POST', 'credentials', { rut: nextRut(), password: 'sandbox' });
    await runSyncs(app);
    t.equal((await widgetApi(app, bootstrap.session, 'GET', 'status')).body.state, 'succeeded');

    const down = await openWidget(app, await widgetToken(app, sk));
    await widgetApi(app, down.bootstrap.session, 'POST', 'credentials', {
      bank_id: 'bice',
      rut: nextRut(),
      password: 'sandbox-unavailable',
    });
    await runSyncs(app);
    t.match((await widgetApi(app, down.bootstrap.session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'bank_unavailable', title: 'Banco BICE is not responding', retry: true },
    });
  });

  t.test('five attempts per widget, then it stops accepting', async (t) => {
    const { bootstrap } = await openWidget(app, await widgetToken(app, sk));
    for (let i = 0; i < 5; i++) {
      const response = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
        bank_id: 'bancochile',
        rut: nextRut(),
        password: 'sandbox-rejected',
      });
      t.equal(response.status, 200);
      await runSyncs(app);
      await widgetApi(app, bootstrap.session, 'GET', 'status');
    }
    const sixth = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      bank_id: 'bancochile',
      rut: nextRut(),
      password: 'sandbox',
    });
    t.equal(sixth.status, 429);
    t.equal(sixth.body.error.code, 'too_many_attempts');
  });

  /** `count` credential submissions sent at once in one widget session, each with a new RUT. */
  const submitAtOnce = (session: string, count: number, password: string) =>
    Promise.all(
      Array.from({ length: count }, () =>
        widgetApi(app, session, 'POST', 'credentials', { bank_id: 'bancochile', rut: nextRut(), password }),
      ),
    );

  t.test('twenty submissions at once in one widget make one link and count one attempt', async (t) => {
    const { bootstrap } = await openWidget(app, await widgetToken(app, sk));
    const before = await tableCounts(app.db);
    const answers = await submitAtOnce(bootstrap.session, 20, 'sandbox');
    const statuses = answers.map((answer) => answer.status);
    t.equal(statuses.filter((status) => status === 200).length, 1, 'one submission is taken');
    t.same(
      [...new Set(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.body.error.code}`))],
      ['409 connection_in_progress'],
      'every other one is refused: a connection is in progress',
    );
    const after = await tableCounts(app.db);
    t.equal(after.links! - before.links!, 1, 'one link');
    t.equal(after.refresh_intents! - before.refresh_intents!, 1, 'one refresh intent');
    const session = await app.db
      .knex('widget_sessions')
      .where({ session_hash: sha256Hex(bootstrap.session) })
      .first();
    t.equal(session.attempts, 1, 'one attempt counted');
  });

  t.test('the attempt cap holds when the submissions come at once', async (t) => {
    const { bootstrap } = await openWidget(app, await widgetToken(app, sk));
    let taken = 0;
    // Refused credentials free the session for another try once the failure is seen; keep sending in
    // parallel bursts until the widget stops accepting.
    for (let round = 0; round < 10; round++) {
      const answers = await submitAtOnce(bootstrap.session, 6, 'sandbox-rejected');
      taken += answers.filter((answer) => answer.status === 200).length;
      await runSyncs(app);
      await widgetApi(app, bootstrap.session, 'GET', 'status');
    }
    t.equal(taken, 5, 'five submissions were taken in all');
    const session = await app.db
      .knex('widget_sessions')
      .where({ session_hash: sha256Hex(bootstrap.session) })
      .first();
    t.equal(session.attempts, 5);
  });

  t.test('connection_limit caps the links of one external_user_id', async (t) => {
    await serverLink(app, sk, 'sandbox', { external_user_id: 'user-cap' });
    await serverLink(app, sk, 'sandbox', { external_user_id: 'user-cap' });
    const capped = await openWidget(
      app,
      await widgetToken(app, pk, { external_user_id: 'user-cap', connection_limit: 2 }),
    );
    t.equal(capped.status, 200);
    t.match(capped.bootstrap.error, {
      code: 'connection_limit_reached',
      title: 'You cannot connect more banks',
    });
    const before = await tableCounts(app.db);
    const refused = await widgetApi(app, capped.bootstrap.session, 'POST', 'credentials', {
      bank_id: 'bancochile',
      rut: nextRut(),
      password: 'sandbox',
    });
    t.equal(refused.status, 409);
    t.equal(refused.body.error.code, 'connection_limit_reached');
    t.match(refused.body.error.message, /already have 2 connected banks/);
    t.same(await tableCounts(app.db), before, 'no link was created');

    await connectThroughWidget(app, sk, {
      rut: nextRut(),
      token: { external_user_id: 'user-cap', connection_limit: 3 },
    });
    const links = await app.request('GET', '/v1/links?external_user_id=user-cap', { key: sk });
    t.equal(links.body.length, 3, 'a third link within a limit of 3');
    const full = await openWidget(
      app,
      await widgetToken(app, sk, { external_user_id: 'user-cap', connection_limit: 3 }),
    );
    t.equal(full.bootstrap.error.code, 'connection_limit_reached');
    const otherUser = await openWidget(
      app,
      await widgetToken(app, sk, { external_user_id: 'user-free', connection_limit: 1 }),
    );
    t.equal(otherUser.bootstrap.error, null, 'the limit counts one external_user_id');
  });

  t.test('a bank that asks for a code during the connect asks this widget', async (t) => {
    const { bootstrap } = await openWidget(app, await widgetToken(app, sk));
    await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      bank_id: 'security',
      rut: nextRut(),
      password: 'sandbox-mfa',
    });
    await runSyncs(app);
    const waiting = await widgetApi(app, bootstrap.session, 'GET', 'status');
    t.match(waiting.body, { state: 'requires_mfa', expires_at: String });
    const answered = await widgetApi(app, bootstrap.session, 'POST', 'mfa', { code: '123456' });
    t.same(answered.body, { state: 'in_progress', step: 'verifying' });
    await runSyncs(app);
    t.equal((await widgetApi(app, bootstrap.session, 'GET', 'status')).body.state, 'succeeded');
    const finished = await widgetApi(app, bootstrap.session, 'POST', 'finish');
    t.match(finished.body.exchange_token, /^et_/);
  });

  t.test('an MFA token (ri_…_sec_…) opens the code step once, until expires_at', async (t) => {
    const link = await serverLink(app, sk, 'sandbox-mfa');
    const waiting = await refreshAwaitingMfa(app, sk, link);
    const opened = await openWidget(app, waiting.requires_mfa.widget_token);
    t.equal(opened.status, 200);
    t.match(opened.bootstrap, { kind: 'mfa', bank_id: 'bancochile', status: { state: 'requires_mfa' } });
    const again = await openWidget(app, waiting.requires_mfa.widget_token);
    t.equal(again.status, 410);
    t.match(again.html, 'This link was already used');

    const wrong = await widgetApi(app, opened.bootstrap.session, 'POST', 'credentials', {
      rut: nextRut(),
      password: 'sandbox',
    });
    t.equal(wrong.body.error.code, 'wrong_step');
    t.equal((await widgetApi(app, opened.bootstrap.session, 'POST', 'mfa', { code: '' })).status, 400);
    await widgetApi(app, opened.bootstrap.session, 'POST', 'mfa', { code: '123456' });
    await runSyncs(app);
    t.equal((await widgetApi(app, opened.bootstrap.session, 'GET', 'status')).body.state, 'succeeded');
    const finished = await widgetApi(app, opened.bootstrap.session, 'POST', 'finish');
    t.same(
      finished.body,
      { type: 'success', intent: 'mfa', refresh_intent_id: waiting.id },
      'no exchange token',
    );
    t.equal(
      (await app.request('GET', `/v1/refresh_intents/${waiting.id}`, { key: sk })).body.status,
      'succeeded',
    );

    app.clock.advance(61 * MINUTE);
    const lateToken = (await refreshAwaitingMfa(app, sk, link)).requires_mfa.widget_token;
    app.clock.advance(5 * MINUTE);
    const expired = await openWidget(app, lateToken);
    t.equal(expired.status, 410);
    t.match(expired.html, 'This link has expired');
    app.clock.advance(1000);
    await runHousekeeping(app.services); // fails the unanswered wait, which frees the link

    const token = (await refreshAwaitingMfa(app, sk, link, { refresh_type: 'historical' })).requires_mfa
      .widget_token;
    const session = (await openWidget(app, token)).bootstrap.session;
    // refresh.mfaAttempts (3): two wrong codes leave the wait open, the third ends it.
    for (const wrong of [1, 2]) {
      await widgetApi(app, session, 'POST', 'mfa', { code: '000000' });
      await runSyncs(app);
      t.match(
        (await widgetApi(app, session, 'GET', 'status')).body,
        { state: 'requires_mfa', wrong_codes: wrong, attempts_left: 3 - wrong },
        `wrong code ${wrong}: another try`,
      );
    }
    await widgetApi(app, session, 'POST', 'mfa', { code: '000000' });
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'mfa_invalid', title: 'The code was not correct', retry: false },
    });
  });

  t.test('housekeeping removes ended sessions once their token can no longer open the widget', async (t) => {
    const sessionsOf = async (...tokens: string[]) =>
      (
        await app.db.knex('widget_sessions').whereIn('token_hash', tokens.map(sha256Hex)).count({ n: '*' })
      )[0]!.n;
    const connectToken = await widgetToken(app, sk);
    t.equal((await openWidget(app, connectToken)).status, 200);

    const link = await serverLink(app, sk, 'sandbox-mfa');
    const intent = await refreshAwaitingMfa(app, sk, link);
    const mfaToken = intent.requires_mfa.widget_token;
    t.equal((await openWidget(app, mfaToken)).status, 200);
    // An intent whose wait outlasts its session's retention: its token must stay refused.
    await app.db
      .knex('refresh_intents')
      .where({ id: intent.id })
      .update({ mfa_expires_at: app.clock.now() + 3 * DAY });

    app.clock.advance(DAY + HOUR);
    await runHousekeeping(app.services);
    t.equal(Number(await sessionsOf(connectToken)), 0, "the widget token's ended session is removed");
    t.equal(Number(await sessionsOf(mfaToken)), 1, 'the session of an MFA token still waited on stays');
    const connectAgain = await openWidget(app, connectToken);
    t.equal(connectAgain.status, 410, 'the widget token still cannot be used again');
    t.match(connectAgain.html, 'This link was already used');
    t.match((await openWidget(app, mfaToken)).html, 'This link was already used', 'nor the MFA token');

    app.clock.advance(2 * DAY);
    await runHousekeeping(app.services); // the wait ends, then its session goes
    t.equal(Number(await sessionsOf(mfaToken)), 0, 'once the wait is over, that session is removed too');
    const mfaAgain = await openWidget(app, mfaToken);
    t.equal(mfaAgain.status, 404, 'and the MFA token, whose intent no longer waits, opens nothing');
    t.match(mfaAgain.html, 'This link is not valid');
    t.equal(Number(await sessionsOf(mfaToken)), 0, 'no session was started');
  });

  t.test('reconnect: new credentials make an expired link active again', async (t) => {
    const linkId = await expiredLink(app, sk);
    const original = await app.db.knex('links').where({ id: linkId }).first();
    const first = await widgetToken(app, sk, { intent: 'reconnect', link_id: linkId });
    const spare = await widgetToken(app, sk, { intent: 'reconnect', link_id: linkId });
    const { bootstrap } = await openWidget(app, first);
    t.match(bootstrap, { kind: 'reconnect', bank_id: 'bancochile', holder_type: 'individual' });

    const rut = await holderRut(app, linkId);
    await widgetApi(app, bootstrap.session, 'POST', 'credentials', { rut, password: 'sandbox-rejected' });
    t.equal(
      (await app.db.knex('links').where({ id: linkId }).first()).status,
      'active',
      'active while it tries',
    );
    await runSyncs(app);
    t.match((await widgetApi(app, bootstrap.session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'rejected_credentials', retry: true },
    });
    const reverted = await app.db.knex('links').where({ id: linkId }).first();
    t.match(
      reverted,
      { status: 'expired', expired_at: original.expired_at },
      'refused credentials leave it expired',
    );

    await widgetApi(app, bootstrap.session, 'POST', 'credentials', { rut, password: 'sandbox' });
    const queued = await app.db
      .knex('refresh_intents')
      .where({ link_id: linkId })
      .orderBy('created_at', 'desc')
      .first();
    t.equal(queued.refresh_type, 'full', 'a full refresh is queued');
    const midway = await app.db.knex('links').where({ id: linkId }).first();
    t.match(midway, { status: 'active', expired_at: null, consecutive_failures: 0 });
    t.not(midway.credentials_encrypted, original.credentials_encrypted, 'new sealed credentials');
    await runSyncs(app);
    t.equal((await widgetApi(app, bootstrap.session, 'GET', 'status')).body.state, 'succeeded');
    const finished = await widgetApi(app, bootstrap.session, 'POST', 'finish');
    t.match(finished.body, { intent: 'reconnect', exchange_token: /^et_/ });
    const link = (await app.request('GET', `/v1/links/${linkId}`, { key: sk })).body;
    t.match(link, { status: 'active', expired_at: null, last_error_code: null });
    const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key: sk,
    });
    t.equal(exchanged.body.id, linkId, 'the exchange of a reconnect returns the same link');
    t.equal(
      (await eventTypes(app, linkId)).filter((type) => type === 'link.created').length,
      1,
      'and announces nothing new',
    );

    const stale = await openWidget(app, spare);
    t.equal(stale.status, 409, 'a second reconnect token for a link that works again');
    t.match(stale.html, 'This connection already works');
  });

  t.test("reconnect refuses another person's login and leaves the link as it was", async (t) => {
    const linkId = await expiredLink(app, sk);
    const before = await app.db.knex('links').where({ id: linkId }).first();
    const accountsBefore = await app.db.knex('accounts').where({ link_id: linkId }).orderBy('id');
    const counts = await tableCounts(app.db);
    const { bootstrap } = await openWidget(
      app,
      await widgetToken(app, sk, { intent: 'reconnect', link_id: linkId }),
    );
    const other = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      rut: nextRut(),
      password: 'sandbox',
    });
    t.equal(other.status, 200, 'the widget answers with the state of its connection');
    t.match(other.body, { state: 'failed', error: { code: 'holder_mismatch', retry: true } });
    t.match(other.body.error.message, /same RUT/, 'and says what to do');
    await runSyncs(app);
    t.same(await app.db.knex('links').where({ id: linkId }).first(), before, 'the link is exactly as it was');
    t.same(
      await app.db.knex('accounts').where({ link_id: linkId }).orderBy('id'),
      accountsBefore,
      'its accounts too',
    );
    const after = await tableCounts(app.db);
    t.same(
      {
        links: after.links,
        accounts: after.accounts,
        refresh_intents: after.refresh_intents,
        events: after.events,
      },
      {
        links: counts.links,
        accounts: counts.accounts,
        refresh_intents: counts.refresh_intents,
        events: counts.events,
      },
      'no link, account, refresh or event was made',
    );
    const session = await app.db
      .knex('widget_sessions')
      .where({ session_hash: sha256Hex(bootstrap.session) })
      .first();
    t.equal(session.attempts, 1, 'the refusal counts as an attempt, so the widget is no oracle for the RUT');

    const same = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      rut: await holderRut(app, linkId),
      password: 'sandbox',
    });
    t.equal(same.status, 200);
    await runSyncs(app);
    t.equal(
      (await widgetApi(app, bootstrap.session, 'GET', 'status')).body.state,
      'succeeded',
      'the holder reconnects',
    );
  });

  t.test("reconnect of a business link refuses another company's RUT", async (t) => {
    const rut = nextRut();
    const company = nextRut();
    const created = await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({
        holder_type: 'business',
        credentials: { rut, rut_empresa: company, password: 'sandbox-expiring' },
      }),
    });
    t.equal(created.status, 200, created.text);
    const linkId = created.body.id as string;
    await runSyncs(app);
    for (let i = 0; i < 3; i++) {
      app.clock.advance(4 * HOUR + MINUTE);
      await schedulerTick(app);
    }
    t.equal((await app.request('GET', `/v1/links/${linkId}`, { key: sk })).body.status, 'expired');
    const { bootstrap } = await openWidget(
      app,
      await widgetToken(app, sk, { intent: 'reconnect', link_id: linkId }),
    );
    const otherCompany = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      rut,
      rut_empresa: nextRut(),
      password: 'sandbox',
    });
    t.match(
      otherCompany.body,
      { state: 'failed', error: { code: 'holder_mismatch' } },
      'same person, other company',
    );
    t.equal((await app.db.knex('links').where({ id: linkId }).first()).status, 'expired', 'still expired');
    const sameCompany = await widgetApi(app, bootstrap.session, 'POST', 'credentials', {
      rut,
      rut_empresa: company,
      password: 'sandbox',
    });
    t.match(sameCompany.body, { state: 'in_progress' }, 'the same person and company reconnect');
  });

  t.test(
    'widget_tokens allows a burst of 10 shared by the secret and publishable keys of a mode',
    async (t) => {
      const fresh = await createTenant(app);
      const keys = [fresh.keys.sk_test.secret, fresh.keys.pk_test.secret];
      const remaining: number[] = [];
      for (let i = 0; i < 10; i++) {
        const response = await app.request('POST', '/v1/widget_tokens', { key: keys[i % 2]!, body: {} });
        t.equal(response.status, 200, `request ${i + 1}`);
        t.equal(response.headers.get('x-ratelimit-limit'), '30');
        remaining.push(Number(response.headers.get('x-ratelimit-remaining')));
      }
      t.same(remaining, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0], 'one bucket for both keys');
      const refused = await app.request('POST', '/v1/widget_tokens', {
        key: fresh.keys.pk_test.secret,
        body: {},
      });
      t.equal(refused.status, 429);
      t.match(refused.body, { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } });
      t.ok(Number(refused.headers.get('retry-after')) >= 1);
      const live = await app.request('POST', '/v1/widget_tokens', {
        key: fresh.keys.pk_live.secret,
        body: {},
      });
      t.equal(live.status, 200, 'the live keys have a bucket of their own');
    },
  );
});
