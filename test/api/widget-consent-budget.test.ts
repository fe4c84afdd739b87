import t from 'tap';
import { ManualClock } from '../../src/clock/clock.js';
import { pauseBank } from '../../src/banks/budget/store.js';
import {
  createTenant,
  forEachEngine,
  RAISED_LIMITS,
  setTimeLimit,
  startTestApp,
  type TestApp,
} from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * Widget consent starts and the bank's budget (issue 43, item 4; docs/open-finance.md, "Bank limits"), over
 * real HTTP against the simulated bank the API serves (mTLS on loopback). Each start is a PAR at the bank, and
 * a publishable key is public: starts are bounded per key (its organisation and mode) and per bank, and take
 * the bank's permit like any call, so a paused bank or a spent minute sends the bank nothing. What reaches the
 * bank is counted where it matters: by the bank.
 */
setTimeLimit(t, 240_000);

const BANK = 'bancoabierto';
// 60 a minute as the draft's; starts may take a quarter (15 a minute), at most 5 (half a second's 10) at once.
const BUDGET = { perSecond: 10, perMinute: 60, arrivalMarginMs: 0, consentStartShare: 0.25 };
const BANK_BURST = 5;
// One organisation's keys: 4 starts at once, then 3 a minute.
const PER_KEY = { perMinute: 3, burst: 4 };

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    consentBank: true,
    config: { banks: { budget: BUDGET }, widget: { consentStarts: PER_KEY } },
  });
  const clock = app.clock as ManualClock;
  const bank = app.consentBank!;
  const tenants = [
    await createTenant(app, { rateLimits: RAISED_LIMITS }),
    await createTenant(app, { rateLimits: RAISED_LIMITS }),
    await createTenant(app, { rateLimits: RAISED_LIMITS }),
  ];
  /** Every call the bank's mTLS face answered (PAR, token, resources, Grant Management, discovery). */
  const bankCalls = () => Object.values(bank.calls()).reduce((sum, n) => sum + n, 0);
  /** `count` widgets of a tenant opened with its publishable key, in `language`. */
  const widgets = async (tenant: (typeof tenants)[number], count: number, language = 'en') => {
    const sessions: string[] = [];
    for (let i = 0; i < count; i++) {
      const token = await widgetToken(app, tenant.keys.pk_test.secret, { locale: language });
      const opened = await openWidget(app, token, undefined, language);
      sessions.push(opened.bootstrap.session as string);
    }
    return sessions;
  };
  const startAll = (sessions: string[]) =>
    Promise.all(sessions.map((session) => widgetApi(app, session, 'POST', 'consent', { bank_id: BANK })));
  /** A new minute for the budget and time for every bucket to fill again. */
  const later = () => clock.advance(5 * 60_000);

  // The client's discovery, once: what follows counts starts only.
  const [warm] = await widgets(tenants[2]!, 1);
  t.equal((await startAll([warm!]))[0]!.status, 200, 'a start reaches the bank');
  later();

  t.test("a burst of starts from two organisations: at most the bank's bound reach it", async (t) => {
    const sessions = [...(await widgets(tenants[0]!, 4)), ...(await widgets(tenants[1]!, 4))];
    const before = bank.calls().other;
    const answers = await startAll(sessions);
    const started = answers.filter((a) => a.status === 200).length;
    const pars = bank.calls().other - before;
    t.equal(started, BANK_BURST, `${BANK_BURST} of 8 starts went through (each within its key's bound)`);
    t.equal(pars, BANK_BURST, `the bank received ${pars} PARs, one a start that went through`);
    const refused = answers.filter((a) => a.status !== 200);
    t.ok(
      refused.every((a) => a.status === 429 && a.body.error.code === 'bank_busy'),
      'the others: bank_busy',
    );
    t.match(refused[0]!.body.error.message, /so nothing was sent to it\. Try again in \d+ seconds\./);
    t.ok(Number(refused[0]!.headers.get('retry-after')) >= 1, 'with Retry-After');
  });

  t.test('a burst of 12 starts from one publishable key: at most its bound reach the bank', async (t) => {
    later();
    const sessions = await widgets(tenants[0]!, 12, 'es');
    const before = bank.calls().other;
    const answers = await startAll(sessions);
    const pars = bank.calls().other - before;
    t.equal(answers.filter((a) => a.status === 200).length, PER_KEY.burst, `${PER_KEY.burst} went through`);
    t.equal(pars, PER_KEY.burst, `the bank received ${pars} PARs of 12 starts`);
    const refused = answers.filter((a) => a.status !== 200);
    t.equal(refused.length, 12 - PER_KEY.burst);
    t.ok(refused.every((a) => a.status === 429 && a.body.error.code === 'starts_limited'));
    t.match(
      refused[0]!.body.error.message,
      /no se envió nada al banco\. Vuelve a intentarlo en \d+ segundos\./,
      'in the person’s language, with when to try again',
    );
    const opened = await openWidget(
      app,
      await widgetToken(app, tenants[0]!.keys.pk_test.secret),
      undefined,
      'es',
    );
    t.match(
      opened.bootstrap.messages['problem.starts_limited.message'],
      /Vuelve a intentarlo \{when\}/,
      "the widget's page words it from its catalogue, with the time the API's Retry-After gives",
    );
  });

  t.test('a paused bank: no start sends it anything, and the widget says until when', async (t) => {
    later();
    const [session] = await widgets(tenants[1]!, 1);
    await pauseBank(app.db, { bankId: BANK, mode: 'test' }, clock.now() + 45_000, 'HTTP 429', clock.now());
    const before = bankCalls();
    const [answer] = await startAll([session!]);
    t.equal(answer!.status, 429, answer!.text);
    t.equal(answer!.body.error.code, 'bank_busy');
    t.match(answer!.body.error.message, /Try again in 45 seconds\./);
    t.equal(answer!.headers.get('retry-after'), '45');
    t.equal(bankCalls() - before, 0, 'zero calls reached the bank: no PAR');
    const row = await app.db
      .knex('widget_sessions')
      .where({ id: await sessionId(app, session!) })
      .first();
    t.equal(row.attempts, 0, "the refused start did not cost the person one of the window's attempts");
  });

  t.test("the bank's minute spent by syncs: starts wait for the next minute", async (t) => {
    later();
    const [session] = await widgets(tenants[1]!, 1);
    const now = clock.now();
    const minute = now - (now % 60_000);
    await app.db
      .knex('bank_call_budgets')
      .where({ bank_id: BANK, mode: 'test' })
      .update({ minute_start: minute, minute_count: BUDGET.perMinute, second_start: 0, second_count: 0 });
    const before = bankCalls();
    const [answer] = await startAll([session!]);
    t.equal(answer!.status, 429, answer!.text);
    t.equal(answer!.body.error.code, 'bank_busy');
    t.equal(Number(answer!.headers.get('retry-after')), Math.ceil((minute + 60_000 - now) / 1000));
    t.equal(bankCalls() - before, 0, 'zero calls reached the bank');
  });
});

/** The session row's id from the secret the widget holds (the table keeps its hash). */
async function sessionId(app: TestApp, secret: string): Promise<string> {
  const { authenticateSession } = await import('../../src/widget/sessions.js');
  const row = await authenticateSession(app.db.knex, secret, app.clock.now());
  return row!.id;
}
