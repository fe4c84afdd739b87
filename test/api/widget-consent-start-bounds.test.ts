import t from 'tap';
import type { ManualClock } from '../../src/clock/clock.js';
import { createApiKey } from '../../src/keys/keys.js';
import { authenticateSession } from '../../src/widget/sessions.js';
import { createTenant, forEachEngine, setTimeLimit, startTestApp, type TestApp } from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * A widget's consent starts bounded per widget session and per key (issue 43, item 4; widget/consent/consent-starts.ts;
 * docs/open-finance.md, "Bank limits"), over real HTTP against the simulated bank the API serves (mTLS on
 * loopback). A publishable key is public, and every start is a PAR at the bank: the key's bound holds across
 * as many sessions as its widget tokens open, and the session's holds within one. A refused start is worded
 * in the person's language with when to try again, and the bank sees nothing of it: counted at the bank.
 */
setTimeLimit(t, 240_000);

const BANK = 'bancoabierto';
/** One key: 3 at once, then 2 a minute (a token every 30 s). */
const PER_KEY = { perMinute: 2, burst: 3 };
/** One session: 2 at once, then 1 a minute. */
const PER_SESSION = { perMinute: 1, burst: 2 };

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    consentBank: true,
    config: { widget: { consentStartsPerKey: PER_KEY, consentStartsPerSession: PER_SESSION } },
  });
  const clock = app.clock as ManualClock;
  const bank = app.consentBank!;
  /** PARs the bank received, and every call it answered. */
  const pars = () => bank.callLog().filter((call) => call.path === '/par').length;
  const calls = () => bank.callLog().length;
  const open = async (key: string, language: string) => {
    const token = await widgetToken(app, key, { locale: language });
    return (await openWidget(app, token, undefined, language)).bootstrap.session as string;
  };
  const start = (session: string) => widgetApi(app, session, 'POST', 'consent', { bank_id: BANK });

  // The client's discovery, once, and full buckets after: what follows counts starts only.
  const warm = await createTenant(app);
  t.equal((await start(await open(warm.keys.pk_test.secret, 'en'))).status, 200, 'a start reaches the bank');
  clock.advance(5 * 60_000);

  t.test('one publishable key across sessions: the 4th start is refused, the bank sees no PAR', async (t) => {
    const tenant = await createTenant(app);
    const pk = tenant.keys.pk_test.secret;
    // Four people, each in a widget of their own, from the one public key.
    const sessions = [];
    for (let i = 0; i < PER_KEY.burst + 1; i++) sessions.push(await open(pk, 'es'));
    const before = pars();
    for (const session of sessions.slice(0, PER_KEY.burst))
      t.equal((await start(session)).status, 200, 'within the key’s bound');
    t.equal(pars() - before, PER_KEY.burst, `${PER_KEY.burst} PARs`);

    const callsBefore = calls();
    const refused = await start(sessions[PER_KEY.burst]!);
    t.equal(refused.status, 429, refused.text);
    t.match(refused.body.error, { type: 'rate_limit_error', code: 'starts_limited' });
    t.equal(refused.headers.get('retry-after'), '30', 'a token every 30 s');
    t.equal(
      refused.body.error.message,
      'Se iniciaron demasiadas conexiones bancarias desde esta app en el último minuto, así que no se envió nada al banco. Vuelve a intentarlo en 30 segundos.',
      'in the person’s language, with when to try again',
    );
    t.equal(calls() - callsBefore, 0, 'the bank saw nothing of it: no PAR');
    t.equal(await attemptsOf(app, sessions[PER_KEY.burst]!), 0, 'the window’s attempt given back');
    const status = await widgetApi(app, sessions[PER_KEY.burst]!, 'GET', 'status');
    t.match(status.body, { state: 'idle' }, 'the widget stays on its consent screen');

    // The same organisation's other publishable key is bounded on its own.
    const other = await app.db.transaction((trx) =>
      createApiKey(trx, {
        brand: app.config.brand,
        orgId: tenant.orgId,
        mode: 'test',
        type: 'publishable',
        actor: 'test',
        now: clock.now(),
      }),
    );
    t.equal(
      (await start(await open(other.secret, 'es'))).status,
      200,
      'another key of the organisation starts',
    );

    clock.advance(30_000);
    const again = await start(sessions[PER_KEY.burst]!);
    t.equal(again.status, 200, 'after the 30 s it said, the same window starts');
  });

  t.test('one widget session: the 3rd start in a minute is refused, the bank sees no PAR', async (t) => {
    clock.advance(5 * 60_000);
    const tenant = await createTenant(app);
    const session = await open(tenant.keys.pk_test.secret, 'en');
    const before = pars();
    for (let i = 0; i < PER_SESSION.burst; i++) t.equal((await start(session)).status, 200);
    t.equal(pars() - before, PER_SESSION.burst, `${PER_SESSION.burst} PARs`);

    const callsBefore = calls();
    const refused = await start(session);
    t.equal(refused.status, 429, refused.text);
    t.match(refused.body.error, { type: 'rate_limit_error', code: 'session_starts_limited' });
    t.equal(refused.headers.get('retry-after'), '60');
    t.equal(
      refused.body.error.message,
      'You started several connections from this window in the last minute, so nothing was sent to the bank. Try again in 60 seconds.',
    );
    t.equal(calls() - callsBefore, 0, 'the bank saw nothing of it');
    t.equal(await attemptsOf(app, session), PER_SESSION.burst, 'only the starts that went cost attempts');

    // Another window of the same key is not held by this one's bound.
    t.equal((await start(await open(tenant.keys.pk_test.secret, 'en'))).status, 200, 'another window starts');

    clock.advance(60_000);
    t.equal((await start(session)).status, 200, 'a minute later, this window starts again');
    const opened = await openWidget(app, await widgetToken(app, tenant.keys.pk_test.secret), undefined, 'es');
    t.match(
      opened.bootstrap.messages['problem.session_starts_limited.message'],
      /Vuelve a intentarlo \{when\}/,
      "the widget's page words it from its catalogue, with the time the API's Retry-After gives",
    );
  });
});

/** The attempts the session has spent (the table keeps its secret's hash). */
async function attemptsOf(app: TestApp, secret: string): Promise<number> {
  const row = await authenticateSession(app.db.knex, secret, app.clock.now());
  return row!.attempts;
}
