import t from 'tap';
import { CONSENT_WAIT_MS } from '../../src/widget/consent/consent-flow.js';
import { MAX_ATTEMPTS } from '../../src/widget/sessions.js';
import { sha } from '../helpers/consent-bank.js';
import { CHILE } from '../helpers/consent-countries.js';
import { consentTrips, consentTripCount as trips, linkCounts as counts } from '../helpers/consent-flow.js';
import { createTenant, forEachEngine, runSyncs, setTimeLimit, startTestApp } from '../helpers/harness.js';
import { widgetApi } from '../helpers/widget.js';

/*
 * The end user's path to a consent bank through the widget, over real HTTP against the simulated bank the
 * API serves (mTLS on loopback): the consent screen, the PAR, the bank's sign-in and consent pages, the
 * callback, the code exchange, the first sync, the exchange token and `link.created`, embedded (a popup) and
 * hosted (this window). Each way the callback can go wrong gets its problem, and nothing but the trip's
 * outcome is recorded.
 */
setTimeLimit(t, 300_000);

const APP_RETURN = 'https://app.example.com/bank/callback';

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    consentBank: true,
    config: { widget: { allowedRedirectUris: [APP_RETURN] } },
  });
  const tenant = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  const faults = app.consentBank!.faults;
  t.afterEach(() => faults.reset());
  const { open, start: startAt, atBank, callbackPage, redirectUri } = consentTrips(t, app, sk, CHILE);

  t.test(
    'hosted: a leaked callback URL completes nothing in another browser; the one that started the trip does',
    async (t) => {
      const opened = await open({ redirect_uri: APP_RETURN, state: 'leak' }, 'en', true);
      const session = opened.bootstrap.session as string;
      const started = await startAt(session);
      t.equal(started.status, 200);
      const setCookie = started.headers.get('set-cookie')!;
      t.match(
        setCookie,
        /^svc_consent_trip=[A-Za-z0-9_-]{32}; Path=\/widget\/consent\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/,
        "the trip cookie: HttpOnly, Lax so the bank's redirect carries it, on the callback path only (no Secure on http)",
      );
      const cookie = setCookie.split(';')[0]!;
      const { callback } = await atBank(started.body.authorization_url, { language: 'en' });
      const before = await counts(app);

      for (const [label, stranger, language] of [
        ['no cookie', undefined, 'en'],
        ["another trip's cookie", 'svc_consent_trip=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'es'],
        ['a cookie of the wrong shape', `${cookie}x`, 'en'],
        ['the cookie under another name', cookie.replace('svc_consent_trip', 'svc_consent_trap'), 'en'],
      ] as const) {
        const page = await callbackPage(callback, stranger, language);
        t.equal(page.status, 409, `${label}: refused`);
        t.equal(page.bootstrap.session, null, `${label}: no session handed over`);
        t.match(page.bootstrap.error, { code: 'consent_other_browser' });
        t.match(
          page.bootstrap.error.title,
          language === 'es'
            ? 'Termina en el navegador donde empezaste'
            : 'Finish in the browser where you started',
        );
        t.notMatch(page.html, /wss_/, `${label}: no session secret in the page`);
      }
      t.same(await counts(app), before, 'nothing was linked');
      t.equal(
        (await widgetApi(app, session, 'GET', 'status')).status,
        200,
        "the session is still its owner's",
      );

      const back = await callbackPage(callback, `other=1; ${cookie}`);
      t.equal(back.status, 200, 'the browser that started the trip completes it, the trip unspent');
      t.match(back.bootstrap, { hosted: true, status: { state: 'in_progress' } });
      t.match(back.bootstrap.session, /^wss_/);
      t.equal((await callbackPage(callback, cookie)).status, 409, 'and only once');
      await runSyncs(app); // its first sync, so the next test counts only its own
    },
  );

  t.test(
    'embedded: consent screen, the bank in a popup, the callback, the first sync, the exchange',
    async (t) => {
      const before = await counts(app);
      const opened = await open({}, 'es');
      const bank = opened.bootstrap.banks.find((b: { id: string }) => b.id === 'bancoabierto');
      t.match(
        bank,
        {
          connection: 'consent',
          holder_types: ['individual'],
          consent: {
            locale: 'es',
            title: /Vas a compartir con/,
            items: [
              { coverage: 'name', text: 'Tu nombre, como lo tiene registrado el banco' },
              { coverage: 'accounts' },
              { coverage: 'balances' },
              { coverage: 'movements' },
              { coverage: 'credit_cards' },
            ],
            duration: /Durante 12 meses, hasta el/,
            button: 'Continuar a Banco Abierto (simulado)',
            canContinue: true,
          },
        },
        'the widget lists the simulated bank with what will be shared, for how long, in Spanish',
      );
      t.match(
        opened.bootstrap.banks.find((b: { id: string }) => b.id === 'bancochile'),
        { connection: 'credentials', consent: null },
        'a credential bank stays a credential bank',
      );
      const session = opened.bootstrap.session as string;

      const started = await startAt(session);
      t.equal(started.status, 200, started.text);
      t.match(started.body, {
        authorization_url: String,
        expires_at: String,
        status: { state: 'awaiting_bank' },
      });
      const authorization = new URL(started.body.authorization_url);
      t.equal(
        authorization.origin + authorization.pathname,
        `${app.consentBank!.issuer}/auth`,
        "the bank's page",
      );
      t.ok(authorization.searchParams.get('request_uri'), 'pushed (PAR): only a request_uri travels');
      t.notOk(authorization.searchParams.has('code_challenge'), 'nothing else of the request is in the URL');
      t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'awaiting_bank' });

      const { callback, pages } = await atBank(started.body.authorization_url, {
        user: '11.111.111-1',
        language: 'es',
      });
      t.match(pages[0], /RUT/, "the bank's sign-in page");
      t.ok(callback.startsWith(redirectUri), 'the bank sends the browser to the widget callback');
      const url = new URL(callback);
      t.equal(url.searchParams.get('iss'), app.consentBank!.issuer, 'with its issuer (RFC 9207)');

      const returned = await callbackPage(callback);
      t.equal(returned.status, 200);
      t.match(returned.bootstrap, { returned_from_bank: true, session: null, error: null });
      t.notMatch(returned.html, url.searchParams.get('code')!, 'the page does not repeat the code');

      const status = await widgetApi(app, session, 'GET', 'status');
      t.match(status.body, { state: 'in_progress' }, 'the widget goes on as for a credential link');
      t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
      const succeeded = await widgetApi(app, session, 'GET', 'status');
      t.match(succeeded.body, { state: 'succeeded' });
      t.ok(succeeded.body.accounts_count >= 3, `accounts read (${succeeded.body.accounts_count})`);
      const after = await counts(app);
      t.equal(after.links, before.links + 1, 'one link');
      t.equal(after.grants, before.grants + 1, 'with its grant');
      t.equal(after.linkCreated, before.linkCreated, 'not announced before the exchange');

      const finished = await widgetApi(app, session, 'POST', 'finish');
      t.equal(finished.status, 200);
      const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
        key: sk,
      });
      t.equal(exchanged.status, 200, exchanged.text);
      const linkId = exchanged.body.id as string;
      t.match(exchanged.body, { object: 'link', bank_id: 'bancoabierto', status: 'active' });
      t.equal((await counts(app)).linkCreated, before.linkCreated + 1, '`link.created` at the exchange');
      const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
      t.ok(accounts.body.length >= 3, 'the accounts are readable');
      const checking = accounts.body.find((a: { type: string }) => a.type === 'checking');
      const movements = await app.request('GET', `/v1/accounts/${checking.id}/movements?per_page=5`, {
        key: sk,
      });
      t.equal(movements.body.length, 5, 'and the movements');

      const row = await app.db.knex('widget_consent_requests').where({ link_id: linkId }).first();
      t.match(row, { outcome: 'linked', bank_id: 'bancoabierto' }, 'the trip says how it ended');
      t.notMatch(JSON.stringify(row), url.searchParams.get('state')!, 'the state is kept only as its hash');

      await t.test(
        'a replayed callback is refused, even by a bank that would exchange the code twice',
        async (t) => {
          const again = await callbackPage(callback);
          t.equal(again.status, 409);
          t.match(again.bootstrap, { session: null, error: { code: 'consent_used' } });
          t.equal((await counts(app)).links, after.links, 'no second link');
        },
      );
    },
  );

  t.test('a token naming the consent bank (institution_id): the widget starts at its consent', async (t) => {
    const opened = await open({ institution_id: 'bancoabierto' });
    t.equal(opened.bootstrap.bank_id, 'bancoabierto', 'the widget opens on the named bank');
    const started = await startAt(opened.bootstrap.session as string, {});
    t.equal(started.status, 200, started.text);
    t.match(started.body, { status: { state: 'awaiting_bank' } }, 'no bank_id needed');
  });

  t.test('while the callback exchanges the code, the widget hears "in progress", never "idle"', async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    const started = await startAt(session);
    const { callback } = await atBank(started.body.authorization_url);
    // A slow token endpoint: the trip is claimed at once, the link made only after the exchange.
    faults.setFaults({ tokenDelayMs: 1_500 });
    let returned = false;
    const returning = callbackPage(callback).finally(() => (returned = true));
    let status = (await widgetApi(app, session, 'GET', 'status')).body;
    while (status.state === 'awaiting_bank' && !returned) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      status = (await widgetApi(app, session, 'GET', 'status')).body;
    }
    t.notOk(returned, 'seen while the callback was still exchanging the code');
    t.match(status, { state: 'in_progress', step: 'queued' }, 'the connection is under way');
    t.equal((await returning).status, 200);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'in_progress' });
    faults.reset();
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'succeeded' });
  });

  t.test('a replay at a bank that accepts replayed codes (99.999.999-9) makes no second link', async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    const started = await startAt(session);
    const { callback } = await atBank(started.body.authorization_url, {
      user: '99.999.999-9',
    });
    t.equal((await callbackPage(callback)).status, 200);
    const links = (await counts(app)).links;
    const replay = await callbackPage(callback);
    t.equal(replay.status, 409);
    t.match(replay.bootstrap.error, { code: 'consent_used', title: 'This authorisation was already used' });
    t.equal((await counts(app)).links, links, 'the code is not exchanged again');
  });

  t.test('hosted: the window goes to the bank and comes back to the widget, then to the app', async (t) => {
    const opened = await open({ redirect_uri: APP_RETURN, state: 'xyz' }, 'en', true);
    t.equal(opened.bootstrap.hosted, true);
    const session = opened.bootstrap.session as string;
    const started = await startAt(session);
    // The browser keeps the trip's cookie from the start and sends it back with the bank's redirect.
    const cookie = started.headers.get('set-cookie')!.split(';')[0]!;
    const { callback } = await atBank(started.body.authorization_url, { language: 'en' });
    const back = await callbackPage(callback, cookie);
    t.equal(back.status, 200);
    t.match(back.bootstrap, { hosted: true, kind: 'connect', status: { state: 'in_progress' } });
    const fresh = back.bootstrap.session as string;
    t.match(fresh, /^wss_/, 'the widget again, with a session secret of its own');
    t.not(fresh, session);
    t.equal(
      (await widgetApi(app, session, 'GET', 'status')).status,
      401,
      'the old secret left with its page',
    );
    await runSyncs(app);
    t.match((await widgetApi(app, fresh, 'GET', 'status')).body, { state: 'succeeded' });
    const finished = await widgetApi(app, fresh, 'POST', 'finish');
    const redirect = new URL(finished.body.redirect_url);
    t.equal(redirect.origin + redirect.pathname, APP_RETURN);
    t.equal(redirect.searchParams.get('state'), 'xyz');
    t.match(redirect.searchParams.get('exchange_token'), /^et_/);
  });

  t.test(
    'the bank refuses (33.333.333-3) or the user declines: a clear problem, nothing recorded',
    async (t) => {
      for (const [rut, decision] of [
        ['33.333.333-3', 'confirm'],
        ['11.111.111-1', 'abort'],
      ] as const) {
        const before = await counts(app);
        const opened = await open({}, 'es');
        const session = opened.bootstrap.session as string;
        const started = await startAt(session);
        const { callback } = await atBank(started.body.authorization_url, { user: rut, decision });
        t.equal(new URL(callback).searchParams.get('error'), 'access_denied');
        const page = await callbackPage(callback);
        t.match(page.bootstrap, {
          returned_from_bank: true,
          error: { code: 'consent_denied', title: 'No autorizaste a Banco Abierto (simulado)' },
        });
        const status = await widgetApi(app, session, 'GET', 'status');
        t.match(status.body, { state: 'failed', error: { code: 'consent_denied', retry: true } });
        t.same(await counts(app), before, `${rut} ${decision}: no link, no grant, no event`);
        const again = await startAt(session);
        t.equal(again.status, 200, 'the widget may try again');
      }
    },
  );

  t.test('tokens not bound to our certificate (88.888.888-8): refused, nothing recorded', async (t) => {
    const before = await counts(app);
    const opened = await open();
    const session = opened.bootstrap.session as string;
    const started = await startAt(session);
    const { callback } = await atBank(started.body.authorization_url, {
      user: '88.888.888-8',
    });
    const page = await callbackPage(callback);
    t.match(page.bootstrap, { returned_from_bank: true, error: { code: 'consent_invalid' } });
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'consent_invalid', retry: true },
    });
    t.same(await counts(app), before, 'no link, no grant, no event');
  });

  t.test('a late callback, a wrong state, a wrong issuer: refused, nothing recorded', async (t) => {
    const before = await counts(app);
    const opened = await open();
    const session = opened.bootstrap.session as string;
    const started = await startAt(session);
    const { callback } = await atBank(started.body.authorization_url);

    const wrongState = new URL(callback);
    wrongState.searchParams.set('state', 'A'.repeat(32));
    const unknown = await callbackPage(wrongState.href);
    t.equal(unknown.status, 400);
    t.match(unknown.bootstrap.error, { code: 'consent_unknown' });
    const noState = new URL(callback);
    noState.searchParams.delete('state');
    t.match((await callbackPage(noState.href)).bootstrap.error, { code: 'consent_unknown' });

    const wrongIssuer = new URL(callback);
    wrongIssuer.searchParams.set('iss', 'https://bank.attacker.example');
    const invalid = await callbackPage(wrongIssuer.href);
    t.match(invalid.bootstrap, { returned_from_bank: true, error: { code: 'consent_invalid' } });
    t.same(await counts(app), before, 'the wrong issuer made nothing');
    t.equal(
      (await callbackPage(callback)).status,
      409,
      'and spent the trip: the real callback is refused too',
    );

    const second = await startAt(session);
    const late = await atBank(second.body.authorization_url);
    (app.clock as { advance(ms: number): void }).advance(CONSENT_WAIT_MS + 1_000);
    const expired = await callbackPage(late.callback);
    t.match(expired.bootstrap.error, { code: 'consent_expired' });
    t.same(await counts(app), before, 'the late callback made nothing');
  });

  t.test('an expired request_uri: the bank says so; the widget can send the person again', async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    faults.setFaults({ requestUriTtlSeconds: 0 });
    const started = await startAt(session);
    const page = await fetch(started.body.authorization_url, { redirect: 'manual' });
    t.equal(page.status, 400, "the bank's own error page");
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'awaiting_bank' });
    faults.reset();
    const again = await startAt(session);
    const { callback } = await atBank(again.body.authorization_url);
    t.equal((await callbackPage(callback)).status, 200);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'in_progress' });
    await runSyncs(app);
  });

  t.test("starts sent at once reach the bank no more often than the session's attempts", async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    // The client open (its discovery done) before counting: from here each start's one bank call is its PAR.
    await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test');
    const from = app.consentBank!.callLog().length;
    const answers = await Promise.all(Array.from({ length: MAX_ATTEMPTS + 3 }, () => startAt(session)));
    const pars = app.consentBank!.callLog().slice(from).length;
    t.ok(pars <= MAX_ATTEMPTS, `${pars} calls reached the bank for ${answers.length} starts at once`);
    t.equal(answers.filter((answer) => answer.status === 200).length, pars, 'each a trip the widget can use');
    t.ok(
      answers
        .filter((answer) => answer.status !== 200)
        .every((answer) => answer.status === 429 && answer.body.error.code === 'too_many_attempts'),
      'the others: too_many_attempts, before the bank',
    );
  });

  t.test('the bank presents a certificate we do not trust: no trip starts, nothing changes', async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    await app.services.consentClients.close(); // a new TLS connection, which gets the foreign certificate
    faults.setFaults({ foreignServerCertificate: true });
    const before = await trips(app);
    const started = await startAt(session);
    t.equal(started.status, 502);
    t.match(started.body.error, { code: 'bank_unavailable', type: 'api_error' });
    t.equal(await trips(app), before, 'no trip recorded');
    const row = await app.db
      .knex('widget_sessions')
      .where({ session_hash: sha(session) })
      .first();
    t.equal(row.attempts, 0, 'the attempt is not counted');
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'idle' });
    faults.reset();
    await app.services.consentClients.close();
  });

  t.test('bad starts: the envelope with a param, nothing written', async (t) => {
    const opened = await open();
    const session = opened.bootstrap.session as string;
    const before = await trips(app);
    const cases: [Record<string, unknown>, number, string][] = [
      [{ bank_id: 'bancochile' }, 400, 'credentials_required'],
      [{ bank_id: 'bancoabierto', holder_type: 'business' }, 400, 'parameter_invalid'],
      [{ bank_id: 'nobank' }, 400, 'parameter_invalid'],
      [{}, 400, 'parameter_missing'],
      [{ bank_id: 'bancoabierto', extra: 1 }, 400, 'parameter_invalid'],
    ];
    for (const [body, status, code] of cases) {
      const response = await startAt(session, body);
      t.equal(response.status, status, JSON.stringify(body));
      t.equal(response.body.error?.code, code, JSON.stringify(body));
    }
    t.equal(await trips(app), before, 'no trip recorded');
    const credentials = await widgetApi(app, session, 'POST', 'credentials', {
      bank_id: 'bancoabierto',
      rut: '11.111.111-1',
      password: 'sandbox',
    });
    t.equal(credentials.status, 400);
    t.equal(
      credentials.body.error.code,
      'consent_required',
      'a password for a consent bank names the widget',
    );
  });
});
