import t from 'tap';
import {
  appWithTenant,
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  startTestApp,
  tableCounts,
} from '../helpers/harness.js';
import { OPENER, openWidget, refreshAwaitingMfa, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * The widget's language (`locale` on the token, else Accept-Language, else `widget.locale`) and the hosted
 * flow (`redirect_uri` and `state`: widget_url opened as a plain page returns to the app with the exchange
 * token), over real HTTP on both engines.
 */

const CALLBACK = 'https://app.example.com/bank/callback';
const PREFIX = 'https://app.example.com/hooks/';
const LOOPBACK = 'http://127.0.0.1:4000/cb';

forEachEngine(t, async (t, engine) => {
  const { app, tenant, sk } = await appWithTenant(t, engine, {
    config: { widget: { allowedRedirectUris: [CALLBACK, PREFIX, LOOPBACK] } },
  });
  const pk = tenant.keys.pk_test.secret;

  t.test('locale: the token, else the browser, else the operator; Spanish by default', async (t) => {
    const created = await app.request('POST', '/v1/widget_tokens', { key: pk, body: { locale: 'en' } });
    t.equal(created.status, 200);
    t.match(created.body, { locale: 'en', redirect_uri: null, state: null });
    const english = await openWidget(app, created.body.token, OPENER, 'es-CL,es;q=0.9');
    t.match(english.html, '<html lang="en">', 'the token wins over the browser');
    t.match(english.html, '<title>Connect your bank');
    t.equal(english.bootstrap.locale, 'en');
    t.equal(english.bootstrap.messages['picker.title'], 'Select your bank');
    t.equal(english.headers.get('content-language'), 'en');

    const spanish = await openWidget(app, await widgetToken(app, sk, { locale: 'es' }), OPENER, 'en-US');
    t.match(spanish.html, '<html lang="es-CL">');
    t.match(spanish.html, '<title>Conecta tu banco');
    t.match(spanish.html, 'La app nunca ve tu clave');
    t.match(spanish.html, 'aria-label="Cerrar esta ventana"');
    t.equal(spanish.bootstrap.messages['picker.title'], 'Elige tu banco');
    t.match(spanish.bootstrap.consent, /^Al conectar, autorizas a Bank Connect/);

    const browser = await openWidget(app, await widgetToken(app, sk), OPENER, 'fr-FR, en;q=0.8, es;q=0.5');
    t.equal(browser.bootstrap.locale, 'en', "the browser's first language the widget speaks");
    const none = await openWidget(app, await widgetToken(app, sk), OPENER, null);
    t.equal(none.bootstrap.locale, 'es', "no Accept-Language: the operator's default, es");
    const foreign = await openWidget(app, await widgetToken(app, sk), OPENER, 'de-DE');
    t.equal(foreign.bootstrap.locale, 'es', 'a language the widget does not speak: the default');

    const operator = await startTestApp(t, engine, { config: { widget: { locale: 'en' } } });
    const owner = await createTenant(operator);
    const operatorDefault = await openWidget(
      operator,
      await widgetToken(operator, owner.keys.sk_test.secret),
      OPENER,
      null,
    );
    t.equal(operatorDefault.bootstrap.locale, 'en', 'widget.locale: en');

    // An error page before any session speaks the browser's language.
    const used = await openWidget(app, created.body.token, OPENER, 'es-CL');
    t.equal(used.status, 410);
    t.match(used.html, 'Este enlace ya fue usado');
    t.match(used.html, 'Vuelve a la app y comienza de nuevo');
  });

  t.test('the session keeps its language: errors and the consent hash of the text shown', async (t) => {
    const token = await widgetToken(app, sk, { locale: 'es' });
    const session = (await openWidget(app, token, OPENER, 'en')).bootstrap.session;
    await widgetApi(app, session, 'POST', 'credentials', {
      bank_id: 'bci',
      rut: '12.345.678-5',
      password: 'sandbox-rejected',
    });
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'rejected_credentials', title: 'Tu banco no aceptó estos datos', retry: true },
    });
  });

  t.test('bad locale, redirect_uri or state: the envelope with a param, and nothing written', async (t) => {
    const before = await tableCounts(app.db);
    const cases: [Record<string, unknown>, string, RegExp, string?][] = [
      [{ locale: 'fr' }, 'locale', /es|en/],
      [{ locale: 'ES' }, 'locale', /es|en/],
      [{ locale: '' }, 'locale', /es|en/],
      [{ redirect_uri: 'not a url' }, 'redirect_uri', /absolute URL/],
      [{ redirect_uri: `${CALLBACK}?then=1` }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: `${CALLBACK}/more` }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: 'https://app.example.com/hooks' }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: 'https://app.example.com/hooks/../admin' }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: 'https://app.example.com.evil.example/hooks/x' }, 'redirect_uri', /allowed/],
      [{ redirect_uri: 'https://evil.example/?u=https://app.example.com/hooks/' }, 'redirect_uri', /allowed/],
      [{ redirect_uri: 'http://app.example.com/hooks/x' }, 'redirect_uri', /https/],
      [{ redirect_uri: `${PREFIX}x#fragment` }, 'redirect_uri', /fragment/],
      [{ redirect_uri: 'https://user:pw@app.example.com/hooks/x' }, 'redirect_uri', /credentials/],
      [{ redirect_uri: 'javascript:alert(1)//' }, 'redirect_uri', /https/],
      // Under the allowed prefix as parsed, outside it once a server decodes the path.
      [{ redirect_uri: `${PREFIX}..%2Fadmin` }, 'redirect_uri', /encoded separator/],
      [{ redirect_uri: `${PREFIX}..%2fadmin` }, 'redirect_uri', /encoded separator/],
      [{ redirect_uri: `${PREFIX}..%5Cadmin` }, 'redirect_uri', /encoded separator/],
      [{ redirect_uri: `${PREFIX}x%252F..%252Fadmin` }, 'redirect_uri', /encoded separator/],
      [{ redirect_uri: `${PREFIX}%2E%2E/admin` }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: `${PREFIX}%252e%252e/admin` }, 'redirect_uri', /dot segment/],
      [{ redirect_uri: `${PREFIX}.%2e` }, 'redirect_uri', /allowedRedirectUris/],
      [{ redirect_uri: `${PREFIX}/evil.example/x` }, 'redirect_uri', /doubled slash/],
      [{ redirect_uri: `${PREFIX}a//b` }, 'redirect_uri', /doubled slash/],
      [{ redirect_uri: `${PREFIX}a%ZZ` }, 'redirect_uri', /percent/],
      // Under the 2,048 characters the schema allows as sent, past the column once percent-encoded.
      [
        { redirect_uri: `${PREFIX}x?q=${'é'.repeat(1000)}` },
        'redirect_uri',
        /2048 characters once percent-encoded/,
      ],
      [{ redirect_uri: LOOPBACK }, 'redirect_uri', /https in live mode/, tenant.keys.sk_live.secret],
      [{ state: 'abc' }, 'state', /redirect_uri/],
      [{ redirect_uri: CALLBACK, state: 'x'.repeat(501) }, 'state', /500|long|characters/],
    ];
    for (const [body, param, message, key] of cases) {
      const response = await app.request('POST', '/v1/widget_tokens', { key: key ?? sk, body });
      t.equal(response.status, 400, JSON.stringify(body));
      t.equal(response.body.error.code, 'parameter_invalid', JSON.stringify(body));
      t.equal(response.body.error.param, param, JSON.stringify(body));
      t.match(response.body.error.message, message, JSON.stringify(body));
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');

    const closed = await startTestApp(t, engine);
    const owner = await createTenant(closed);
    const refused = await closed.request('POST', '/v1/widget_tokens', {
      key: owner.keys.sk_test.secret,
      body: { redirect_uri: CALLBACK },
    });
    t.equal(refused.status, 400, 'with no allowed list, no redirect_uri');
    t.match(refused.body.error, { param: 'redirect_uri', message: /widget\.allowedRedirectUris/ });

    for (const [uri, key] of [
      [CALLBACK, sk],
      [`${PREFIX}widget?user=42`, pk],
      [`${PREFIX}a/b`, sk],
      [LOOPBACK, sk],
      [CALLBACK, tenant.keys.sk_live.secret],
    ] as const) {
      const ok = await app.request('POST', '/v1/widget_tokens', {
        key,
        body: { redirect_uri: uri, state: 'st-1' },
      });
      t.equal(ok.status, 200, uri);
      t.match(ok.body, { redirect_uri: uri, state: 'st-1' });
    }

    // Stored and returned as the URL parser normalises it: what the widget redirects to is what was checked.
    for (const [sent, normalised] of <[string, string][]>[
      ['HTTPS://App.Example.COM:443/hooks/x?q=a b', `${PREFIX}x?q=a%20b`],
      [`${PREFIX}a/./b/../c`, `${PREFIX}a/c`],
      [`${PREFIX}a/%2e/b`, `${PREFIX}a/b`],
      [`${PREFIX}caf\u00e9`, `${PREFIX}caf%C3%A9`],
    ]) {
      const ok = await app.request('POST', '/v1/widget_tokens', { key: sk, body: { redirect_uri: sent } });
      t.equal(ok.status, 200, sent);
      t.equal(ok.body.redirect_uri, normalised, `${sent} is kept as ${normalised}`);
      const stored = await app.db.knex('widget_tokens').where({ id: ok.body.id }).first();
      t.equal(stored?.redirect_uri, normalised, 'and stored so');
    }
  });

  t.test('the hosted flow: widget_url as a plain page returns to redirect_uri', async (t) => {
    const created = await app.request('POST', '/v1/widget_tokens', {
      key: sk,
      body: { redirect_uri: `${PREFIX}done?user=42`, state: 'csrf-7', external_user_id: 'hosted-user' },
    });
    const url = new URL(created.body.widget_url);
    t.equal(url.searchParams.get('origin'), null, 'widget_url as returned has no origin');
    const opened = await openWidget(app, created.body.token, '');
    t.equal(opened.status, 200);
    t.equal(opened.bootstrap.hosted, true);
    t.equal(opened.bootstrap.opener_origin, null, 'nothing to post to');
    t.equal(opened.bootstrap.exit_url, `${PREFIX}done?user=42&error=exited&state=csrf-7`);
    t.match(opened.headers.get('content-security-policy'), "frame-ancestors 'none'");
    const session = opened.bootstrap.session as string;
    const submitted = await widgetApi(app, session, 'POST', 'credentials', {
      bank_id: 'santander',
      rut: '11.111.111-1',
      password: 'sandbox',
    });
    t.equal(submitted.status, 200);
    await runSyncs(app);
    t.equal((await widgetApi(app, session, 'GET', 'status')).body.state, 'succeeded');
    const finished = await widgetApi(app, session, 'POST', 'finish');
    t.equal(finished.status, 200);
    const back = new URL(finished.body.redirect_url);
    t.equal(`${back.origin}${back.pathname}`, `${PREFIX}done`);
    t.equal(back.searchParams.get('user'), '42', "the redirect_uri's own query is kept");
    t.equal(back.searchParams.get('state'), 'csrf-7');
    t.equal(back.searchParams.get('exchange_token'), finished.body.exchange_token);
    t.match(finished.body.exchange_token, /^et_/);
    const link = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key: sk,
    });
    t.equal(link.status, 200);
    t.match(link.body, { object: 'link', bank_id: 'santander', external_user_id: 'hosted-user' });

    // The same kind of token opened by embed.js (with an origin) uses postMessage: no redirect.
    const embedded = await openWidget(
      app,
      await widgetToken(app, sk, { redirect_uri: CALLBACK, state: 's' }),
      OPENER,
    );
    t.equal(embedded.bootstrap.hosted, false);
    t.equal(embedded.bootstrap.exit_url, null);
    const embeddedSession = embedded.bootstrap.session as string;
    await widgetApi(app, embeddedSession, 'POST', 'credentials', {
      bank_id: 'santander',
      rut: '22.222.222-2',
      password: 'sandbox',
    });
    await runSyncs(app);
    await widgetApi(app, embeddedSession, 'GET', 'status');
    const embeddedFinish = await widgetApi(app, embeddedSession, 'POST', 'finish');
    t.equal(embeddedFinish.body.redirect_url, undefined, 'the opener gets the token by postMessage');
  });

  t.test('a connect whose bank asks for a code: wrong codes, then the session ends', async (t) => {
    const session = (await openWidget(app, await widgetToken(app, sk, { locale: 'es' }))).bootstrap
      .session as string;
    await widgetApi(app, session, 'POST', 'credentials', {
      bank_id: 'itau',
      rut: '66.666.666-6',
      password: 'sandbox-mfa',
    });
    await runSyncs(app);
    for (let wrong = 1; wrong <= 3; wrong++) {
      t.match((await widgetApi(app, session, 'GET', 'status')).body, {
        state: 'requires_mfa',
        wrong_codes: wrong - 1,
        attempts_left: 4 - wrong,
      });
      t.equal((await widgetApi(app, session, 'POST', 'mfa', { code: '111111' })).status, 200);
      await runSyncs(app);
    }
    const failed = {
      state: 'failed',
      error: { code: 'mfa_invalid', title: 'El código no es correcto', retry: false },
    };
    t.match(
      (await widgetApi(app, session, 'GET', 'status')).body,
      failed,
      'after the third, a clear message',
    );
    const again = await widgetApi(app, session, 'POST', 'credentials', {
      bank_id: 'itau',
      rut: '66.666.666-6',
      password: 'sandbox',
    });
    t.equal(again.status, 409, 'the session has ended');
    t.equal(again.body.error.code, 'session_expired');
    t.match((await widgetApi(app, session, 'GET', 'status')).body, failed, 'and keeps saying why');
  });

  t.test('an MFA token opened as a plain page explains, and stays unspent', async (t) => {
    const created = await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ bank_id: 'bci', credentials: { rut: '55.555.555-5', password: 'sandbox-mfa' } }),
    });
    await runSyncs(app);
    const waiting = await refreshAwaitingMfa(app, sk, created.body.id);
    const plain = await openWidget(app, waiting.requires_mfa.widget_token, '', 'es');
    t.equal(plain.status, 200);
    t.match(plain.html, 'Abre esto desde la app');
    const opened = await openWidget(app, waiting.requires_mfa.widget_token);
    t.equal(opened.status, 200, 'still opens from the app');
    t.match(opened.bootstrap.status, { state: 'requires_mfa', wrong_codes: 0, attempts_left: 3 });

    // A wrong code, then the right one: the refresh succeeds.
    const session = opened.bootstrap.session as string;
    await widgetApi(app, session, 'POST', 'mfa', { code: '654321' });
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'requires_mfa',
      wrong_codes: 1,
      attempts_left: 2,
    });
    await widgetApi(app, session, 'POST', 'mfa', { code: '123456' });
    await runSyncs(app);
    t.equal((await widgetApi(app, session, 'GET', 'status')).body.state, 'succeeded');
    t.equal(
      (await app.request('GET', `/v1/refresh_intents/${waiting.id}`, { key: sk })).body.status,
      'succeeded',
    );
  });
});
