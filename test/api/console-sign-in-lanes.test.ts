import t from 'tap';
import { pino } from 'pino';
import { setPasswordWithToken } from '../../src/console/users.js';
import { ATTEMPT_BUDGETS, ATTEMPT_WINDOW_MS } from '../../src/console/sign-in-attempts.js';
import { KNOWN_DEVICE_COOKIE } from '../../src/console/known-device.js';
import { MAX_WAITING } from '../../src/console/passwords.js';
import {
  consolePage as page,
  cookieFrom,
  invite,
  preSessionToken,
  type ConsolePage,
} from '../helpers/console.js';
import { createTenant, forEachEngine, setTimeLimit, startTestApp, type TestApp } from '../helpers/harness.js';

/*
 * Issue 44, item 1: nobody locks the console. A browser its user has signed in with before is never refused
 * by a budget strangers can spend: not the address's (20 failures from one address, or from the one proxy
 * every browser comes through, closed sign-in to everyone for 15 minutes), not the shared password-hash
 * queue (60 wrong sign-ins at once from 60 addresses gave the owner a 503). Behind a reverse proxy listed in
 * `api.trustProxy` the client address is the right-most untrusted address of X-Forwarded-For; with none
 * listed, the header is ignored. Real HTTP, each loopback address (127.0.0.x) a client of its own.
 */

const PASSWORD = 'correct horse battery staple';
/** The reverse proxy's own address in the proxy tests. */
const PROXY = '127.0.0.9';

async function users(app: TestApp) {
  const tenant = await createTenant(app);
  const make = async (email: string) => {
    const { token } = await invite(app, tenant.orgId, email);
    await app.db.transaction((trx) => setPasswordWithToken(trx, token, PASSWORD, app.clock.now()));
    return email;
  };
  return { owner: await make('owner@lender.cl'), other: await make('other@lender.cl') };
}

const signIn = (
  app: TestApp,
  email: string,
  options: { from: string; cookie?: string; password?: string; forwardedFor?: string },
) =>
  page(app, 'POST', '/console/login', {
    from: options.from,
    cookie: options.cookie,
    headers: options.forwardedFor ? { 'x-forwarded-for': options.forwardedFor } : {},
    form: { email, password: options.password ?? PASSWORD },
  });

/**
 * A stranger's wrong sign-ins sent at the same moment, each for an email nobody has, each with its own
 * X-Forwarded-For when `forwardedFor` gives one: their statuses, counted.
 */
async function strangerFails(
  app: TestApp,
  count: number,
  from: string,
  forwardedFor?: (i: number) => string,
): Promise<Record<number, number>> {
  const forms = await Promise.all(Array.from({ length: count }, () => preSessionToken(app.url, { from })));
  const answers = await Promise.all(
    forms.map((form, i) =>
      page(app, 'POST', '/console/login', {
        from,
        cookie: form.cookie,
        headers: forwardedFor ? { 'x-forwarded-for': forwardedFor(i) } : {},
        form: {
          _csrf: form.token,
          email: `stranger${i}-${Math.random().toString(36).slice(2)}@example.com`,
          password: 'not the password at all',
        },
      }),
    ),
  );
  return tally(answers);
}

function tally(answers: ConsolePage[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const answer of answers) counts[answer.status] = (counts[answer.status] ?? 0) + 1;
  return counts;
}

/** One more than the address's budget: 20 checked and refused 401, then 429 for the rest. */
const OVER_ADDRESS = { 401: ATTEMPT_BUDGETS.address, 429: 1 };

/** An audit row's details: JSON text on SQLite, parsed already where the column is JSON. */
const detailsOf = (details: unknown) => (typeof details === 'string' ? JSON.parse(details) : details);
const knownDevice = (answer: ConsolePage) => cookieFrom(answer, KNOWN_DEVICE_COOKIE);
const nextWindow = (app: TestApp) => app.clock.advance(ATTEMPT_WINDOW_MS + 1000);

// About 80 password hashes per engine (0.3 s each on an idle machine, two or three at once); ten times
// as long on a loaded one.
setTimeLimit(t, 900_000);

forEachEngine(t, async (t, engine) => {
  await t.test(
    'from one address: 21 failures, then the owner’s known browser signs in at once',
    async (t) => {
      const app = await startTestApp(t, engine);
      const { owner, other } = await users(app);
      const first = await signIn(app, owner, { from: '127.0.0.2' });
      t.equal(first.status, 303, 'the owner signs in once from their browser');
      const device = knownDevice(first)!;
      t.ok(device, 'which is known from then on');

      // Each with an X-Forwarded-For of its own: api.trustProxy is empty (the default), so it is ignored.
      t.same(app.config.api.trustProxy, [], 'no proxy is trusted by default');
      const failures = await strangerFails(
        app,
        ATTEMPT_BUDGETS.address + 1,
        '127.0.0.2',
        (i) => `198.51.100.${i + 1}`,
      );
      t.same(failures, OVER_ADDRESS, 'the address’s budget is spent: a new X-Forwarded-For buys none');

      const known = await signIn(app, owner, { from: '127.0.0.2', cookie: device });
      t.equal(known.status, 303, 'the owner’s known browser on the same address signs in: 303, not 429');
      t.equal(known.headers.get('retry-after'), null);

      const stranger = await signIn(app, other, { from: '127.0.0.2' });
      t.equal(stranger.status, 429, 'another user from a browser they never used still waits on the address');
      t.ok(Number(stranger.headers.get('retry-after')) > 0);
      const claimed = await signIn(app, other, { from: '127.0.0.2', forwardedFor: '192.0.2.77' });
      t.equal(claimed.status, 429, 'claiming another address in X-Forwarded-For changes nothing');

      const ownersCookieForOther = await signIn(app, other, { from: '127.0.0.2', cookie: device });
      t.equal(
        ownersCookieForOther.status,
        429,
        'the owner’s browser cookie opens no lane for another user’s email',
      );

      const forged = await signIn(app, owner, {
        from: '127.0.0.2',
        cookie: `${device.slice(0, device.lastIndexOf('.'))}.${'A'.repeat(43)}`,
      });
      t.equal(forged.status, 429, 'nor does a cookie whose signature does not match');

      const rows = await app.db.knex('audit_log').where({ action: 'console.signed_in' });
      t.same(
        rows
          .map((row) => detailsOf(row.details))
          .sort((a, b) => Number(a.known_browser) - Number(b.known_browser)),
        [
          { address: '127.0.0.2', known_browser: false },
          { address: '127.0.0.2', known_browser: true },
        ],
        'the audit rows say where each sign-in came from and whether the browser was known',
      );
    },
  );

  await t.test('the known lane has a budget of its own that the owner’s browser spends alone', async (t) => {
    const app = await startTestApp(t, engine);
    const { owner } = await users(app);
    const device = knownDevice(await signIn(app, owner, { from: '127.0.0.3' }))!;
    // Someone with the owner's browser (a stolen cookie) may guess, but only within the browser's budget,
    // from any number of addresses.
    const guesses: number[] = [];
    for (let i = 0; i <= ATTEMPT_BUDGETS.device; i++)
      guesses.push(
        (await signIn(app, owner, { from: `127.0.2.${i + 1}`, cookie: device, password: 'wrong guess!!' }))
          .status,
      );
    t.same(
      guesses,
      [...Array(ATTEMPT_BUDGETS.device).fill(401), 429],
      'the browser’s budget holds across addresses',
    );
    nextWindow(app);
    t.equal((await signIn(app, owner, { from: '127.0.0.3', cookie: device })).status, 303);
  });

  await t.test('behind a trusted proxy: each browser is its own address, the known lane holds', async (t) => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const app = await startTestApp(t, engine, {
      config: { api: { trustProxy: [PROXY, '10.0.0.0/8'] } },
      logger,
    });
    const { owner, other } = await users(app);
    const viaProxy = (email: string, client: string, options: { cookie?: string; password?: string } = {}) =>
      signIn(app, email, { from: PROXY, forwardedFor: client, ...options });

    const first = await viaProxy(owner, '198.51.100.7');
    t.equal(first.status, 303);
    const device = knownDevice(first)!;

    // The stranger sends their own X-Forwarded-For; the proxy appends the address it saw (as nginx's
    // $proxy_add_x_forwarded_for and Caddy do).
    const failures = await strangerFails(
      app,
      ATTEMPT_BUDGETS.address + 1,
      PROXY,
      (i) => `192.0.2.${i + 1}, 203.0.113.5`,
    );
    t.same(failures, OVER_ADDRESS, 'the stranger spends their own address’s budget');

    const known = await viaProxy(owner, '203.0.113.5', { cookie: device });
    t.equal(known.status, 303, 'the owner’s known browser signs in, even from the stranger’s address');
    const elsewhere = await viaProxy(other, '198.51.100.8');
    t.equal(
      elsewhere.status,
      303,
      'another user from another address is not slowed down: the proxy is not one address',
    );
    const besideStranger = await viaProxy(other, '203.0.113.5');
    t.equal(besideStranger.status, 429, 'another user from the stranger’s own address waits on it');
    const spoofed = await viaProxy(other, '198.51.100.8, 203.0.113.5');
    t.equal(spoofed.status, 429, 'a client-written address left of the proxy’s is not believed');
    const chained = await viaProxy(other, '203.0.113.5, 10.1.2.3');
    t.equal(chained.status, 429, 'through two trusted proxies, the right-most untrusted address counts');

    const direct = await signIn(app, other, { from: '127.0.0.10', forwardedFor: '203.0.113.5' });
    t.equal(
      direct.status,
      303,
      'a connection from an unlisted address is counted as itself, whatever it claims',
    );

    const access = lines
      .map((line) => JSON.parse(line) as { msg: string; route: string; method: string; client?: string })
      .filter((line) => line.msg === 'request' && line.method === 'POST' && line.route === '/console');
    t.ok(
      access.some((line) => line.client === '203.0.113.5'),
      'the access log names the client behind the proxy',
    );
    t.ok(
      access.every((line) => line.client !== PROXY),
      'and never the proxy for a forwarded request',
    );
    t.equal(access.at(-1)?.client, '127.0.0.10', 'and an unlisted connection’s own address, not its header');
    const failed = await app.db.knex('audit_log').where({ action: 'console.signed_in' });
    t.ok(
      failed.some((row) => detailsOf(row.details).address === '198.51.100.8'),
      'the audit rows name the client behind the proxy',
    );
  });

  await t.test(
    '60 wrong sign-ins at once from 60 addresses do not give the known browser a 503',
    async (t) => {
      const app = await startTestApp(t, engine);
      const { owner } = await users(app);
      const device = knownDevice(await signIn(app, owner, { from: '127.0.0.12' }))!;
      // Every stranger's form first, so that the 60 sign-ins leave at the same moment.
      const strangers = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const from = `127.0.1.${i + 1}`;
          return { from, form: await preSessionToken(app.url, { from }) };
        }),
      );
      const ownersForm = await preSessionToken(app.url, { from: '127.0.0.12', cookie: device });
      // The owner goes when the first stranger is refused 503: the strangers' queue is full at that moment
      // (2 hashing, MAX_WAITING waiting), as it was when the owner got a 503 from the one shared queue.
      let queueFull!: () => void;
      const full = new Promise<void>((resolve) => (queueFull = resolve));
      const flood = Promise.all(
        strangers.map(({ from, form }, i) =>
          page(app, 'POST', '/console/login', {
            from,
            cookie: form.cookie,
            form: {
              _csrf: form.token,
              email: `random${i}-${Math.random()}@example.com`,
              password: 'guess guess!!',
            },
          }).then((answer) => {
            if (answer.status === 503) queueFull();
            return answer;
          }),
        ),
      );
      await Promise.race([full, flood]);
      const owners = await page(app, 'POST', '/console/login', {
        from: '127.0.0.12',
        cookie: `${device}; ${ownersForm.cookie}`,
        form: { _csrf: ownersForm.token, email: owner, password: PASSWORD },
      });
      const answers = await flood;
      const counts = tally(answers);
      t.ok(
        (counts[503] ?? 0) >= 60 - 2 - MAX_WAITING - 1,
        `the flood filled the strangers' queue (${JSON.stringify(counts)})`,
      );
      t.equal(owners.status, 303, 'the owner’s known browser signed in during it: 303, not 503');
    },
  );
});
