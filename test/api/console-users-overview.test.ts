import t from 'tap';
import type { ConsoleRole } from '../../src/console/users.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  RAISED_LIMITS,
  runSyncs,
  schedulerTick,
  startTestApp,
  tableCounts,
  type TestApp,
} from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';
import { preSessionToken, signIn, signedIn } from '../helpers/console.js';

/*
 * The console's overview and its user management, over real HTTP on both engines (issue 18). The overview's
 * figures are the numbers a person reads on the page, checked against links made active, paused, expired
 * and failing by real syncs, and deliveries failing against a real receiver. Console users are managed by
 * operators only (everyone else gets 404 and nothing is written); an invitation's link works, is shown in
 * the invite's answer and nowhere else; a disable ends the user's sessions at once; bad input is a 400 on the
 * page with the database unchanged; every change is in the audit log with the operator.
 */

const PASSWORD = 'a long and quiet password';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** A console user made as the CLI makes one, with a password set, signed in: its id and its client. */
async function consoleUser(app: TestApp, role: ConsoleRole, orgId: string | null, email: string) {
  const client = await signedIn(app, role, orgId, email);
  return { id: client.userId, client };
}

/** The number shown beside a label on the overview (its `<dt>`), as a person reads it. */
function figure(html: string, label: string): number {
  const escaped = label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`<dt>${escaped}</dt><dd>(?:<a [^>]*>|<span>)(\\d+)<`).exec(html);
  if (!match) throw new Error(`no figure "${label}" on the page`);
  return Number(match[1]);
}

/** The link as a browser here opens it: the test's base URL names port 0, the server listens elsewhere. */
function reachable(app: TestApp, link: string): string {
  return app.url + link.slice(link.indexOf('/console/'));
}

/** Every table a write could touch, and the users' states. */
async function everyCount(app: TestApp) {
  const counts = await tableCounts(app.db);
  const users = await app.db.knex('console_users').orderBy('id').select('id', 'status', 'session_epoch');
  return { counts, users };
}

forEachEngine(t, async (t, engine) => {
  // Two attempts a minute apart: a delivery to a failing receiver retries once, then fails for good.
  const app = await startTestApp(t, engine, {
    config: { dispatcher: { retryScheduleSeconds: [0, 60] }, webhooks: { allowPrivateAddresses: true } },
  });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const other = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  // The data first: its clock runs a day and more ahead, past any session signed before it.
  const newLink = async (password: string) => {
    const created = await app.request('POST', '/v1/links', { key: sk, body: linkBody({}, password) });
    t.equal(created.status, 200, created.text);
    return created.body.id as string;
  };
  // An expired link: synced once, then three scheduled syncs rejected (a day and more ago).
  const expired = await newLink('sandbox-expiring');
  await runSyncs(app);
  for (let i = 0; i < 3; i++) {
    app.clock.advance(4 * HOUR + MINUTE);
    await schedulerTick(app);
  }
  t.equal((await app.db.knex('links').where({ id: expired }).first()).status, 'expired');
  // Its rejected syncs are more than a day old now: "recent" failures are the day's.
  app.clock.advance(25 * HOUR);
  const healthy = await newLink('sandbox');
  const paused = await newLink('sandbox');
  const failing = await newLink('sandbox-unavailable');
  await runSyncs(app);
  t.equal((await app.request('POST', `/v1/links/${paused}/pause`, { key: sk })).status, 200);
  t.equal((await app.db.knex('links').where({ id: failing }).first()).last_error_code, 'bank_unavailable');
  t.ok(healthy);

  // A receiver that always fails: one delivery fails for good, a later one is retrying.
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(503);
    response.end('down');
  });
  const hook = await app.request('POST', '/v1/webhook_endpoints', {
    key: sk,
    body: { url: receiver.url, enabled_events: ['link.refreshed'] },
  });
  t.equal(hook.status, 200, hook.text);
  const fire = () =>
    app.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type: 'link.refreshed', link_id: healthy },
    });
  t.equal((await fire()).status, 200);
  const dispatcher = new Dispatcher(app.services);
  await dispatcher.dispatchDue();
  app.clock.advance(MINUTE + 1000);
  await dispatcher.dispatchDue();
  t.equal((await fire()).status, 200);
  await dispatcher.dispatchDue();
  const statuses = (await app.db.knex('webhook_deliveries').orderBy('created_at').select('status')).map(
    (row: { status: string }) => row.status,
  );
  t.same(statuses, ['failed', 'pending'], 'one failed delivery and one retrying');

  const operator = await consoleUser(app, 'operator', null, 'ops@example.com');
  const admin = await consoleUser(app, 'admin', tenant.orgId, 'admin@lender.cl');
  const support = await consoleUser(app, 'support', null, 'help@example.com');

  await t.test('the overview shows the figures of the data', async (t) => {
    for (const client of [operator.client, admin.client]) {
      const page = await client('GET', `/console/o/${tenant.orgId}/test`);
      t.equal(page.status, 200);
      const html = page.text;
      t.equal(figure(html, 'Active'), 3, 'three active links (the paused one too)');
      t.match(html, '(1 paused)');
      t.equal(figure(html, 'Expired (to be reconnected)'), 1);
      t.match(html, `href="/console/o/${tenant.orgId}/test/links?status=active"`, 'active links to the list');
      t.match(html, `href="/console/o/${tenant.orgId}/test/links?status=expired"`);
      t.equal(figure(html, 'Active links whose last sync failed'), 1);
      t.equal(figure(html, 'Failed syncs in the last 24 hours'), 1, 'only the day’s failed sync');
      t.equal(figure(html, 'Retrying (pending after a failed attempt)'), 1);
      t.equal(figure(html, 'Failed for good in the last 24 hours'), 1);
      t.match(html, /1 degraded, 0 down/, 'one bank degraded by the failing sync');
      t.match(html, /<td[^>]*>Banco de Chile<\/td><td[^>]*>degraded<\/td>/);
      t.equal(figure(html, 'Secret keys in use'), 1);
      t.equal(figure(html, 'Publishable keys in use'), 1);
      t.equal(figure(html, 'Keys with limits of their own'), 2, 'the tenant’s raised limits');
      t.match(
        html,
        /<td[^>]*><code>read<\/code><\/td><td[^>]*>100<\/td><td[^>]*>20<\/td>/,
        'the default limits',
      );
      t.match(html, 'Signed in as');
    }
    const live = (await operator.client('GET', `/console/o/${tenant.orgId}/live`)).text;
    for (const label of ['Active', 'Expired (to be reconnected)', 'Failed syncs in the last 24 hours'])
      t.equal(figure(live, label), 0, `live: ${label} 0`);
    t.match(live, /0 degraded, 0 down/, 'test-mode syncs say nothing of live health');
    const otherOrg = (await operator.client('GET', `/console/o/${other.orgId}/test`)).text;
    t.equal(figure(otherOrg, 'Active'), 0, "another organisation's overview counts its own");
    t.equal(figure(otherOrg, 'Keys with limits of their own'), 0);
    t.equal(
      (await admin.client('GET', `/console/o/${other.orgId}/test`)).status,
      404,
      "an admin has no overview of another's",
    );
  });

  await t.test('only operators reach console users: everyone else gets 404, nothing written', async (t) => {
    const operatorPage = await operator.client('GET', '/console/users');
    t.equal(operatorPage.status, 200);
    t.match(operatorPage.text, '<a href="/console/users">Users</a>', 'the nav links Users for an operator');
    for (const email of ['ops@example.com', 'admin@lender.cl', 'help@example.com'])
      t.match(operatorPage.text, email);
    const before = await everyCount(app);
    for (const client of [admin.client, support.client]) {
      for (const [method, path, form] of [
        ['GET', '/console/users', {}],
        ['GET', `/console/users/${operator.id}`, {}],
        ['POST', '/console/users', { email: 'eve@example.com', role: 'operator' }],
        ['POST', `/console/users/${operator.id}/disable`, { confirm: 'yes' }],
        ['POST', `/console/users/${operator.id}/reset`, { confirm: 'yes' }],
      ] as const) {
        const response = await client(method, path, form);
        t.equal(response.status, 404, `${method} ${path}`);
        t.notMatch(response.text, 'ops@example.com', 'names no other user');
      }
      const home = await client('GET', `/console/o/${tenant.orgId}/test`);
      t.notMatch(home.text, 'href="/console/users"', 'no Users link in the nav');
    }
    t.same(await everyCount(app), before, 'nothing was written');
  });

  await t.test('bad input is a 400 on the page, and nothing is written', async (t) => {
    const before = await everyCount(app);
    const cases: [Record<string, string>, number, string][] = [
      [{ email: 'not-an-email', role: 'admin', org: tenant.orgId }, 400, 'Enter a valid email address'],
      [{ email: `${'a'.repeat(250)}@x.cl`, role: 'admin', org: tenant.orgId }, 400, 'at most 254'],
      [{ email: '', role: 'admin', org: tenant.orgId }, 400, 'Enter a valid email address'],
      [{ email: 'eve@example.com', role: 'root' }, 400, 'Choose a role'],
      [
        { email: 'eve@example.com', role: 'operator', org: tenant.orgId },
        400,
        'leave the organisation empty',
      ],
      [{ email: 'eve@example.com', role: 'admin' }, 400, 'An admin needs their organisation'],
      [{ email: 'eve@example.com', role: 'admin', org: 'org_0000000000000000' }, 400, 'no such organisation'],
      [{ email: 'eve@example.com', role: 'support', org: "org_'<x>" }, 400, 'no such organisation'],
      [
        { email: 'ADMIN@lender.cl', role: 'support', org: tenant.orgId },
        409,
        'A user with this email exists',
      ],
    ];
    for (const [form, status, message] of cases) {
      const response = await operator.client('POST', '/console/users', form);
      t.equal(response.status, status, JSON.stringify(form));
      t.match(response.text, message);
      t.match(response.text, 'role="alert"', 'the problem is announced');
      t.notMatch(response.text, '<x>', 'what was sent is escaped');
    }
    const kept = await operator.client('POST', '/console/users', { email: 'eve@example.com', role: 'admin' });
    t.match(kept.text, 'value="eve@example.com"', 'the form keeps what was typed');
    for (const [path, form, message] of [
      [`/console/users/${admin.id}/disable`, {}, 'Tick the box'],
      [`/console/users/${admin.id}/reset`, {}, 'Tick the box'],
      [`/console/users/${operator.id}/disable`, { confirm: 'yes' }, 'You cannot reset or disable yourself'],
    ] as const) {
      const response = await operator.client('POST', path, form);
      t.equal(response.status, 400, path);
      t.match(response.text, message);
    }
    t.equal((await operator.client('GET', '/console/users/cu_0000000000000000')).status, 404);
    t.equal((await operator.client('GET', '/console/users/admin@lender.cl')).status, 404, 'by id only');
    t.same(await everyCount(app), before, 'nothing was written');
  });

  await t.test('an operator invites an admin; the link works and is shown only once', async (t) => {
    const invited = await operator.client('POST', '/console/users', {
      email: 'Ana@Lender.cl',
      role: 'admin',
      org: tenant.orgId,
    });
    t.equal(invited.status, 200);
    const link = /<code id="secret-value">([^<]+)<\/code>/.exec(invited.text)?.[1] ?? '';
    t.match(link, new RegExp(`^${app.config.api.baseUrl.replace(/\/+$/, '')}/console/accept/cut_`));
    t.match(invited.text, 'ana@lender.cl invited as admin');
    const token = link.slice(link.lastIndexOf('/') + 1);
    const user = await app.db.knex('console_users').where({ email: 'ana@lender.cl' }).first();
    t.match(user, { role: 'admin', org_id: tenant.orgId, status: 'invited' });

    // The token is in that answer and nowhere else: not in the list, the user's page or any stored row.
    for (const path of ['/console/users', `/console/users/${user.id}`]) {
      const page = await operator.client('GET', path);
      t.equal(page.status, 200);
      t.notMatch(page.text, token, `${path} does not show the token`);
    }
    const audit = await app.db
      .knex('audit_log')
      .where({ action: 'console_user.invited', target_id: user.id });
    t.equal(audit.length, 1);
    t.equal(audit[0].actor, `console:${operator.id}`, 'audited with the operator');
    t.notMatch(JSON.stringify(audit), token, 'not in the audit log');
    t.notMatch(JSON.stringify(await app.db.knex('console_tokens')), token, 'only its hash is stored');

    const accept = await fetch(`${app.url}/console/accept/${token}`);
    t.equal(accept.status, 200, 'the link opens the accept page');
    t.match(await accept.text(), 'ana@lender.cl');
    const form = await preSessionToken(app.url);
    const chosen = await fetch(`${app.url}/console/accept/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookie },
      body: new URLSearchParams({ _csrf: form.token, password: PASSWORD, confirm: PASSWORD }).toString(),
      redirect: 'manual',
    });
    t.equal(chosen.status, 303, 'a password chosen signs them in');
    const ana = await signIn(app, 'ana@lender.cl');
    const home = await ana('GET', `/console/o/${tenant.orgId}/test`);
    t.equal(home.status, 200);
    t.match(home.text, 'Active links whose last sync failed', 'the new admin sees the overview');
    t.equal((await ana('GET', '/console/users')).status, 404, 'and not the users');
  });

  await t.test('reset shows a new link once; disable ends the sessions at once', async (t) => {
    const user = await app.db.knex('console_users').where({ email: 'ana@lender.cl' }).first();
    const ana = await signIn(app, 'ana@lender.cl');
    t.equal((await ana('GET', `/console/o/${tenant.orgId}/test`)).status, 200);

    const reset = await operator.client('POST', `/console/users/${user.id}/reset`, { confirm: 'yes' });
    t.equal(reset.status, 200);
    const link = /<code id="secret-value">([^<]+)<\/code>/.exec(reset.text)?.[1] ?? '';
    t.match(link, /\/console\/accept\/cut_/, 'a reset link, shown once');
    t.notMatch((await operator.client('GET', `/console/users/${user.id}`)).text, link, 'not again');
    const refused = await ana('GET', `/console/o/${tenant.orgId}/test`);
    t.equal(refused.status, 303, 'the reset ended her session');
    t.match(refused.location ?? '', '/console/login');
    t.equal((await fetch(reachable(app, link))).status, 200);

    const again = await signIn(app, 'ana@lender.cl');
    t.equal((await again('GET', `/console/o/${tenant.orgId}/test`)).status, 200);
    const disabled = await operator.client('POST', `/console/users/${user.id}/disable`, { confirm: 'yes' });
    t.equal(disabled.status, 200);
    t.match(disabled.text, 'ana@lender.cl disabled');
    t.equal((await again('GET', `/console/o/${tenant.orgId}/test`)).status, 303, 'signed out at once');
    t.equal((await again('POST', '/console/logout')).status, 401, 'a POST is refused too');
    t.equal((await app.db.knex('console_users').where({ id: user.id }).first()).status, 'disabled');
    t.equal((await fetch(reachable(app, link))).status, 404, 'the unused reset link died with the account');
    const list = await operator.client('GET', '/console/users');
    t.match(
      list.text,
      /ana@lender\.cl<\/a><\/td><td[^>]*>admin<\/td><td[^>]*>Tenant [0-9a-f]+<\/td><td[^>]*>disabled<\/td>/,
    );

    const actions = (
      await app.db
        .knex('audit_log')
        .where({ target_id: user.id, actor: `console:${operator.id}` })
        .select('action')
    )
      .map((row: { action: string }) => row.action)
      .sort();
    t.same(actions, ['console_user.disabled', 'console_user.invited', 'console_user.reset']);
  });
});
