import t from 'tap';
import {
  inviteConsoleUser,
  disableConsoleUser,
  resetConsoleUser,
  LOCK_AFTER_FAILURES,
} from '../../src/console/users.js';
import { consolePage as page, csrfOf, sessionFrom } from '../helpers/console.js';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * The console's sign-in and session over real HTTP (issue 18): an invitation link sets the password and
 * signs in; the session is a signed JWT in an HttpOnly, Secure, SameSite=Strict cookie that /v1 never
 * accepts, as the console never accepts an API key; a forged, `alg: none` or expired token, or one from
 * before a reset or a disable, is refused; a change without its CSRF token is refused; bad passwords slow
 * down, then lock the account; an address that keeps failing is throttled. No password reaches the audit log.
 */

const PASSWORD = 'correct horse battery staple';

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  const invite = (email: string) =>
    app.db.transaction((trx) =>
      inviteConsoleUser(trx, {
        email,
        role: 'admin',
        orgId: tenant.orgId,
        actor: 'cli:test',
        now: app.clock.now(),
      }),
    );

  const { user, token } = await invite('Ana@Lender.cl');
  const home = `/console/o/${tenant.orgId}/test`;
  t.equal(user.email, 'ana@lender.cl', 'emails are kept in lower case');

  let cookie = '';
  await t.test('an invitation link sets the password and signs in', async (t) => {
    const form = await page(app, 'GET', `/console/accept/${token}`);
    t.equal(form.status, 200);
    t.match(form.text, 'ana@lender.cl');
    t.equal(form.headers.get('referrer-policy'), 'no-referrer', 'the token in the URL is not sent on');
    const mismatch = await page(app, 'POST', `/console/accept/${token}`, {
      form: { password: PASSWORD, confirm: `${PASSWORD}!` },
    });
    t.equal(mismatch.status, 400);
    t.match(mismatch.text, 'do not match');
    const short = await page(app, 'POST', `/console/accept/${token}`, {
      form: { password: 'short', confirm: 'short' },
    });
    t.equal(short.status, 400);
    t.match(short.text, 'at least 12 characters');
    const accepted = await page(app, 'POST', `/console/accept/${token}`, {
      form: { password: PASSWORD, confirm: PASSWORD },
    });
    t.equal(accepted.status, 303);
    t.equal(accepted.headers.get('location'), '/console');
    const set = accepted.headers.getSetCookie().find((c) => c.startsWith('svc_console='))!;
    t.match(set, /; HttpOnly/);
    t.match(set, /; Secure/);
    t.match(set, /; SameSite=Strict/);
    t.match(set, /; Path=\/console/);
    cookie = sessionFrom(accepted)!;
    const again = await page(app, 'POST', `/console/accept/${token}`, {
      form: { password: PASSWORD, confirm: PASSWORD },
    });
    t.equal(again.status, 404, 'an invitation works once');
    const landing = await page(app, 'GET', '/console', { cookie });
    t.equal(landing.status, 303);
    t.equal(landing.headers.get('location'), home, "an admin lands on their organisation's test mode");
    const overview = await page(app, 'GET', home, { cookie });
    t.equal(overview.status, 200);
    t.match(overview.text, 'Signed in as ana@lender.cl (admin)');
  });

  await t.test('the console and the API never take each other’s credentials', async (t) => {
    const jwt = cookie.slice('svc_console='.length);
    for (const [name, headers] of [
      ['bearer', { authorization: `Bearer ${jwt}` }],
      ['cookie', { cookie }],
    ] as const) {
      const response = await fetch(`${app.url}/v1/links`, { headers });
      t.equal(response.status, 401, `the console's session as a ${name} on /v1`);
      t.equal(((await response.json()) as { error: { type: string } }).error.type, 'authentication_error');
    }
    const withKey = await page(app, 'GET', '/console', {
      headers: { authorization: `Bearer ${tenant.keys.sk_test.secret}` },
    });
    t.equal(withKey.status, 401, 'an API key on the console');
    t.match(withKey.text, 'does not accept API keys');
    const anonymous = await page(app, 'GET', '/console');
    t.equal(anonymous.status, 303, 'no session: to the sign-in page');
    t.equal(anonymous.headers.get('location'), '/console/login');
  });

  await t.test('forged, algorithm-swapped and expired sessions are refused', async (t) => {
    const jwt = cookie.slice('svc_console='.length);
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forgedPayload = Buffer.from(JSON.stringify({ ...claims, sub: 'cu_0000000000000000' })).toString(
      'base64url',
    );
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT', kid: 'mk_test' })).toString(
      'base64url',
    );
    const flipped = signature.slice(0, -2) + (signature.endsWith('AA') ? 'BB' : 'AA');
    for (const [name, forged] of <[string, string][]>[
      ['another subject under the same signature', `${header}.${forgedPayload}.${signature}`],
      ['alg none', `${none}.${payload}.`],
      ['a changed signature', `${header}.${payload}.${flipped}`],
      ['garbage', 'not.a.jwt'],
    ]) {
      const response = await page(app, 'GET', home, { cookie: `svc_console=${forged}` });
      t.equal(response.status, 303, name);
      t.equal(response.headers.get('location'), '/console/login', name);
    }
    app.clock.advance(16 * 60_000);
    const expired = await page(app, 'GET', home, { cookie });
    t.equal(expired.status, 303, 'a session past its 15 minutes');
    const signedIn = await page(app, 'POST', '/console/login', {
      form: { email: 'ana@lender.cl', password: PASSWORD },
    });
    t.equal(signedIn.status, 303);
    cookie = sessionFrom(signedIn)!;
    app.clock.advance(10 * 60_000);
    const renewed = await page(app, 'GET', home, { cookie });
    t.equal(renewed.status, 200);
    t.ok(sessionFrom(renewed), 'past half its life, a session in use is renewed');
    cookie = sessionFrom(renewed)!;
  });

  await t.test('a change needs its CSRF token', async (t) => {
    const overview = await page(app, 'GET', home, { cookie });
    const csrf = csrfOf(overview.text);
    t.ok(csrf.length > 16, 'the page carries a CSRF token');
    const without = await page(app, 'POST', '/console/logout', { cookie, form: {} });
    t.equal(without.status, 403);
    const wrong = await page(app, 'POST', '/console/logout', { cookie, form: { _csrf: `${csrf}x` } });
    t.equal(wrong.status, 403);
    t.equal((await page(app, 'GET', home, { cookie })).status, 200, 'the session still works');
    const out = await page(app, 'POST', '/console/logout', { cookie, form: { _csrf: csrf } });
    t.equal(out.status, 303);
    t.equal(out.headers.get('location'), '/console/login');
  });

  await t.test('bad passwords slow down, then lock the account', async (t) => {
    const durations: number[] = [];
    for (let i = 1; i < LOCK_AFTER_FAILURES; i++) {
      const started = Date.now();
      const response = await page(app, 'POST', '/console/login', {
        form: { email: 'ana@lender.cl', password: 'wrong password!' },
      });
      durations.push(Date.now() - started);
      t.equal(response.status, 401);
      t.match(response.text, 'The email or the password is wrong.');
    }
    t.ok(
      durations.at(-1)! >= 2_000,
      `the fourth failure in a row waits at least 2 s (${durations.join(', ')} ms)`,
    );
    const locking = await page(app, 'POST', '/console/login', {
      form: { email: 'ana@lender.cl', password: 'wrong password!' },
    });
    t.equal(locking.status, 423);
    t.match(locking.text, 'locked until');
    const right = await page(app, 'POST', '/console/login', {
      form: { email: 'ana@lender.cl', password: PASSWORD },
    });
    t.equal(right.status, 423, 'the right password does not open a locked account');
    t.equal(sessionFrom(right), null);
    const unknown = await page(app, 'POST', '/console/login', {
      form: { email: 'nobody@lender.cl', password: PASSWORD },
    });
    t.equal(unknown.status, 401, 'an unknown email answers as a wrong password does');
    app.clock.advance(16 * 60_000);
    const later = await page(app, 'POST', '/console/login', {
      form: { email: 'ana@lender.cl', password: PASSWORD },
    });
    t.equal(later.status, 303, 'the lock ends after 15 minutes');
    cookie = sessionFrom(later)!;
  });

  await t.test('a reset or a disable ends every session', async (t) => {
    t.equal((await page(app, 'GET', home, { cookie })).status, 200);
    const reset = await app.db.transaction((trx) =>
      resetConsoleUser(trx, user.id, { actor: 'cli:test', now: app.clock.now(), removeTotp: false }),
    );
    t.equal(reset.purpose, 'reset');
    t.equal((await page(app, 'GET', home, { cookie })).status, 303, 'the old session ended');
    const set = await page(app, 'POST', `/console/accept/${reset.token}`, {
      form: { password: `${PASSWORD} 2`, confirm: `${PASSWORD} 2` },
    });
    t.equal(set.status, 303);
    cookie = sessionFrom(set)!;
    t.equal((await page(app, 'GET', home, { cookie })).status, 200);
    await app.db.transaction((trx) => disableConsoleUser(trx, 'ana@lender.cl', 'cli:test', app.clock.now()));
    t.equal((await page(app, 'GET', home, { cookie })).status, 303, 'a disabled user’s session ended');
    const signIn = await page(app, 'POST', '/console/login', {
      form: { email: 'ana@lender.cl', password: `${PASSWORD} 2` },
    });
    t.equal(signIn.status, 401, 'a disabled user cannot sign in');
  });

  await t.test('an address that keeps failing is throttled', async (t) => {
    let status = 0;
    for (let i = 0; i < 30 && status !== 429; i++) {
      status = (
        await page(app, 'POST', '/console/login', {
          form: { email: `guess${i}@lender.cl`, password: 'guess guess guess' },
        })
      ).status;
    }
    t.equal(status, 429);
  });

  await t.test('the pages speak Spanish or English', async (t) => {
    const spanish = await page(app, 'GET', '/console/login', {
      headers: { 'accept-language': 'es-CL,es;q=0.9' },
    });
    t.match(spanish.text, '<html lang="es-CL">');
    t.match(spanish.text, 'Iniciar sesión');
    t.match(spanish.text, 'Correo electrónico');
    const english = await page(app, 'GET', '/console/login', { headers: { 'accept-language': 'en-GB' } });
    t.match(english.text, '<html lang="en">');
    t.match(english.text, 'Sign in');
    const chosen = await page(app, 'GET', '/console/login?lang=es', { headers: { 'accept-language': 'en' } });
    t.match(chosen.text, 'Iniciar sesión', '?lang= wins over the browser');
  });

  await t.test('the audit log has the sign-ins and no password', async (t) => {
    const rows: { action: string; actor: string; details: string | null }[] = await app.db
      .knex('audit_log')
      .select();
    const actions = rows.map((row) => row.action);
    for (const action of [
      'console_user.invited',
      'console_user.invitation_accepted',
      'console.signed_in',
      'console.signed_out',
      'console.sign_in_failed',
      'console.locked_out',
      'console_user.reset',
      'console_user.password_reset',
      'console_user.disabled',
    ])
      t.ok(actions.includes(action), action);
    const everything = JSON.stringify(rows);
    t.notMatch(everything, PASSWORD);
    t.notMatch(everything, token);
  });
});
