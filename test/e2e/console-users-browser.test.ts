import t from 'tap';
import { inviteConsoleUser, setPasswordWithToken } from '../../src/console/users.js';
import { consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { createTenant, forEachEngine, linkBody, runSyncs, startTestApp } from '../helpers/harness.js';

/*
 * "An operator invites an admin", in headless Chromium on both engines (issue 18): an operator signs in,
 * opens Users, invites ana@… as the admin of an organisation and copies the link shown once; a second
 * browser opens it, chooses a password and lands on the organisation's overview with its figures. Every
 * page is checked with axe-core (no serious or critical violation), saved at desktop and phone widths in
 * test-output/screenshots/console/ (users-*.png), and has no sideways scroll on a phone.
 */

const PASSWORD = 'a long and quiet password';

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  // Something to count: a healthy link and one whose bank is down.
  for (const password of ['sandbox', 'sandbox-unavailable']) {
    const created = await app.request('POST', '/v1/links', {
      key: tenant.keys.sk_test.secret,
      body: linkBody({}, password),
    });
    t.equal(created.status, 200, created.text);
  }
  await runSyncs(app);
  // The operator, as `svc console users create --role operator` makes one, with a password chosen.
  await app.db.transaction(async (trx) => {
    const { token } = await inviteConsoleUser(trx, {
      email: 'ops@example.com',
      role: 'operator',
      orgId: null,
      actor: 'cli:test',
      now: app.clock.now(),
    });
    await setPasswordWithToken(trx, token, PASSWORD, app.clock.now());
  });

  const look = consoleLook(t, engine, 'users-');

  const operatorBrowser = await launchChromium(t);
  await operatorBrowser.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
  const page = await operatorBrowser.newPage();
  let link = '';

  await t.test('the operator signs in and opens Users', async (t) => {
    await page.goto(`${app.url}/console/login`);
    await page.getByLabel('Email').fill('ops@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/console/orgs');
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await page.waitForURL('**/console/users');
    t.equal(await page.locator('h1').innerText(), 'Console users');
    t.match(await page.locator('table').innerText(), 'ops@example.com');
    await look(page, 'list');
  });

  await t.test('a mistake is explained on the page', async (t) => {
    await page.getByLabel('Email').fill('ana@lender.cl');
    await page.getByLabel('Role').selectOption('admin');
    await page.getByRole('button', { name: 'Invite' }).click();
    t.match(await page.getByRole('alert').innerText(), 'An admin needs their organisation.');
    t.equal(await page.getByLabel('Email').inputValue(), 'ana@lender.cl', 'what was typed stays');
    await look(page, 'invite-refused');
  });

  await t.test('the operator invites ana@ as the admin of an organisation and copies the link', async (t) => {
    await page.getByLabel('Role').selectOption('admin');
    await page.getByLabel('Organisation', { exact: true }).selectOption(tenant.orgId);
    await page.getByRole('button', { name: 'Invite' }).click();
    const shown = page.locator('.secret-once');
    t.match(await shown.innerText(), 'ana@lender.cl invited as admin');
    link = (await page.locator('#secret-value').innerText()).trim();
    t.match(link, /\/console\/accept\/cut_[A-Za-z0-9_-]+$/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    const copied = (await page.evaluate('navigator.clipboard.readText()')) as string;
    t.equal(copied.trim(), link, 'the Copy button puts the link on the clipboard');
    t.match(await page.locator('table').innerText(), /ana@lender\.cl\s+admin\s+Tenant [0-9a-f]+\s+invited/);
    await look(page, 'invited');
    await page.reload();
    t.notMatch(await page.content(), link, 'a reload does not show the link again');
  });

  await t.test('ana opens the link in her own browser and lands on the overview', async (t) => {
    const anaBrowser = await launchChromium(t);
    const ana = await anaBrowser.newPage();
    // The test's configured base URL names port 0 (the server takes any free port): same path, real port.
    await ana.goto(app.url + link.slice(link.indexOf('/console/')));
    t.match(await ana.locator('main').innerText(), 'ana@lender.cl');
    await look(ana, 'accept');
    await ana.getByLabel('New password').fill(PASSWORD);
    await ana.getByLabel('Repeat the password').fill(PASSWORD);
    await ana.getByRole('button', { name: 'Save and sign in' }).click();
    await ana.waitForURL(`**/console/o/${tenant.orgId}/test`);
    const main = await ana.locator('main').innerText();
    t.match(main, 'Signed in as ana@lender.cl (admin)');
    t.match(main, /Active\s+2\b/, 'both links are active');
    t.match(main, /Active links whose last sync failed\s+1\b/, 'one failing');
    t.match(main, /Failed syncs in the last 24 hours\s+1\b/);
    t.match(main, /Secret keys in use\s+1\b/);
    t.equal(await ana.getByRole('link', { name: 'Users', exact: true }).count(), 0, 'no Users for an admin');
    await ana.getByRole('link', { name: '2', exact: true }).click();
    await ana.waitForURL(`**/console/o/${tenant.orgId}/test/links?status=active`);
    t.equal(await ana.locator('tbody tr').count(), 2, 'the figure links to the links it counts');
    await ana.goBack();
    await look(ana, 'overview');
  });

  await t.test('the operator sees her active, then disables her after confirming', async (t) => {
    await page.goto(`${app.url}/console/users`);
    await page.getByRole('link', { name: 'ana@lender.cl' }).click();
    t.match(await page.locator('.facts').innerText(), /active/);
    await look(page, 'user');
    await page.getByRole('button', { name: 'Disable' }).click();
    t.match(page.url(), /\/console\/users\/cu_/, 'the browser does not send it without the box ticked');
    await page.getByLabel('I understand they cannot sign in any more and their sessions end now').check();
    await page.getByRole('button', { name: 'Disable' }).click();
    t.match(await page.getByRole('status').innerText(), 'ana@lender.cl disabled');
    await look(page, 'disabled');
  });
});
