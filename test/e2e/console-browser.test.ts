import t from 'tap';
import { inviteConsoleUser } from '../../src/console/users.js';
import { consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { createTenant, forEachEngine, linkBody, runSyncs, startTestApp } from '../helpers/harness.js';

/*
 * The console in headless Chromium, on both engines (issue 18): an admin opens the invitation link the CLI
 * printed, chooses a password and lands on their organisation; issues a secret key, which is shown once and
 * works on the API at once; the test/live switch shows only the mode's own keys; support (signed in beside)
 * reads the keys and cannot issue one. Every page is checked with axe-core (no serious or critical
 * violation) and saved at desktop and phone widths in test-output/screenshots/console/.
 */

const PASSWORD = 'a long and quiet password';

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  const invite = (email: string, role: 'admin' | 'support') =>
    app.db.transaction((trx) =>
      inviteConsoleUser(trx, { email, role, orgId: tenant.orgId, actor: 'cli:test', now: app.clock.now() }),
    );
  const context = await launchChromium(t);

  const look = consoleLook(t, engine);

  const admin = await invite('ana@lender.cl', 'admin');
  /** The id of the key whose secret this is, as the database has it (the page lists ids). */
  const keyIdOf = async (secretKey: string) =>
    (
      await app.db
        .knex('api_keys')
        .where({ last4: secretKey.slice(-4) })
        .first('id')
    ).id as string;
  const page = await context.newPage();

  await t.test('the admin accepts the invitation and lands on their organisation', async (t) => {
    await page.goto(`${app.url}/console/accept/${admin.token}`);
    await look(page, 'accept');
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Save and sign in' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
    t.match(await page.locator('main').innerText(), 'Signed in as ana@lender.cl (admin)');
    t.equal(await page.locator('.mode-switch [aria-current="true"]').innerText(), 'Test');
    await look(page, 'overview');
  });

  let secret = '';
  await t.test('the admin issues a key; it is shown once and works on the API', async (t) => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.waitForURL('**/keys');
    await look(page, 'keys');
    await page.getByLabel('Name (optional, to recognise it by)').fill('payroll server');
    await page.getByRole('button', { name: 'Issue key' }).click();
    secret = (await page.locator('#secret-value').innerText()).trim();
    t.match(secret, /^svc_sk_test_/);
    t.ok(
      await page.getByRole('button', { name: 'Copy', exact: true }).isVisible(),
      'a copy button, with JavaScript on',
    );
    await look(page, 'key-issued');
    const response = await fetch(`${app.url}/v1/links`, { headers: { authorization: `Bearer ${secret}` } });
    t.equal(response.status, 200, 'the new key works on /v1 at once');
    await page.reload();
    t.notMatch(await page.content(), secret, 'a reload does not show the key again');
    t.match(await page.locator('table').innerText(), 'payroll server');
  });

  await t.test('the admin rotates the key with a grace period, then revokes the new one', async (t) => {
    await page
      .getByRole('link', { name: /^key_/ })
      .filter({ hasText: await keyIdOf(secret) })
      .click();
    await look(page, 'key-detail');
    await page.getByLabel('The old key keeps working for').selectOption('1');
    await page.getByRole('button', { name: 'Rotate' }).click();
    const successor = (await page.locator('#secret-value').innerText()).trim();
    t.not(successor, secret);
    const status = async (key: string) =>
      (await fetch(`${app.url}/v1/links`, { headers: { authorization: `Bearer ${key}` } })).status;
    t.equal(await status(successor), 200, 'the successor works');
    t.equal(await status(secret), 200, 'the old key works during its grace period');
    await page.getByRole('link', { name: await keyIdOf(successor) }).click();
    await page.getByRole('button', { name: 'Revoke' }).click();
    t.match(page.url(), /\/keys\/key_/, 'the browser does not send a revoke without the confirmation ticked');
    await page.getByLabel('I understand it stops working now').check();
    await page.getByRole('button', { name: 'Revoke' }).click();
    t.match(await page.getByRole('status').innerText(), 'revoked');
    t.equal(await status(successor), 401, 'the revoked key stops at once');
  });

  await t.test('the events and the audit log', async (t) => {
    await page.getByRole('link', { name: 'Events' }).click();
    await page.waitForURL('**/events');
    await look(page, 'events');
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.waitForURL('**/audit');
    // Actions are chosen and read as sentences, who by their email, details as labelled lines (not JSON).
    await page.getByLabel('Action', { exact: true }).selectOption({ label: 'Revoked an API key' });
    await page.getByRole('button', { name: 'Filter' }).click();
    const rows = await page.locator('tbody tr').allInnerTexts();
    t.equal(rows.length, 1, 'one revocation');
    t.match(rows[0], /ana@lender\.cl\s+Revoked an API key/, 'by the console user, named by email');
    await page.getByLabel('Action', { exact: true }).selectOption({ label: 'Created an API key' });
    await page.getByRole('button', { name: 'Filter' }).click();
    const created = await page.locator('tbody').innerText();
    t.notMatch(created, /[{}"]|api_key\.created|rate_limits/, 'no JSON, no code for the action or a field');
    t.match(created, /Mode\s+test\s+Type\s+secret/, 'each detail beside its label');
    await look(page, 'audit');
  });

  await t.test('the live switch shows only live keys', async (t) => {
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test/keys`);
    await page.getByRole('link', { name: 'Live' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/live/keys`);
    t.ok(await page.locator('.live-banner').isVisible(), 'live mode is marked');
    const live = await page.locator('main').innerText();
    t.notMatch(live, 'payroll server', 'no test key on the live page');
    t.match(live, tenant.keys.sk_live.id, "the tenant's live key is there");
    t.notMatch(live, tenant.keys.sk_test.id);
    await look(page, 'keys-live');
  });

  await t.test('support reads the keys and cannot issue one', async (t) => {
    const support = await invite('help@lender.cl', 'support');
    const other = await launchChromium(t);
    const supportPage = await other.newPage();
    await supportPage.goto(`${app.url}/console/accept/${support.token}`);
    await supportPage.getByLabel('New password').fill(PASSWORD);
    await supportPage.getByLabel('Repeat the password').fill(PASSWORD);
    await supportPage.getByRole('button', { name: 'Save and sign in' }).click();
    await supportPage.goto(`${app.url}/console/o/${tenant.orgId}/test/keys`);
    t.match(await supportPage.locator('table').innerText(), 'payroll server');
    t.equal(
      await supportPage.getByRole('button', { name: 'Issue key' }).count(),
      0,
      'no issue form for support',
    );
    t.equal(
      await supportPage.getByRole('button', { name: 'Revoke' }).count(),
      0,
      'no revoke button for support',
    );
  });

  await t.test('support finds a link by external_user_id, reads why it is stale and pauses it', async (t) => {
    const created = await app.request('POST', '/v1/links', {
      key: tenant.keys.sk_test.secret,
      body: linkBody({ external_user_id: 'customer-4711' }, 'sandbox-unavailable'),
    });
    t.equal(created.status, 200, created.text);
    await runSyncs(app);
    const other = await launchChromium(t);
    const supportPage = await other.newPage();
    await supportPage.goto(`${app.url}/console/login`);
    await supportPage.getByLabel('Email').fill('help@lender.cl');
    await supportPage.getByLabel('Password').fill(PASSWORD);
    await supportPage.getByRole('button', { name: 'Sign in' }).click();
    await supportPage.getByRole('link', { name: 'Links' }).click();
    await supportPage.getByLabel('Find by id, RUT, external_user_id or holder name').fill('customer-4711');
    await supportPage.getByRole('button', { name: 'Find' }).click();
    await look(supportPage, 'links-found');
    const rows = supportPage.locator('tbody tr');
    t.equal(await rows.count(), 1, 'one link found');
    await rows.getByRole('link').click();
    await look(supportPage, 'link-detail');
    const diagnosis = await supportPage.locator('.diagnosis').innerText();
    t.ok(diagnosis.length > 10, `a diagnosis: ${diagnosis}`);
    await supportPage.getByRole('button', { name: 'Pause' }).click();
    t.match(await supportPage.getByRole('status').innerText(), 'Link paused');
    t.equal(await supportPage.getByRole('button', { name: 'Resume' }).count(), 1);
    t.match(await supportPage.locator('.diagnosis').innerText(), /Paused since .*Use Resume/, 'and says so');
    t.equal(
      await supportPage.getByRole('button', { name: 'Delete the link' }).count(),
      0,
      'support cannot delete',
    );
    const link = await app.db.knex('links').where({ id: created.body.id }).first();
    t.ok(link.paused, 'the link is paused in the database');
    const audit = await app.db
      .knex('audit_log')
      .where({ action: 'link.pause', target_id: created.body.id })
      .first();
    t.match(audit.actor, /^console:cu_/, 'the pause is in the audit log with the support user');
  });

  await t.test('signing in again after signing out', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/console/login');
    await look(page, 'sign-in');
    await page.getByLabel('Email').fill('ana@lender.cl');
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    t.match(await page.getByRole('alert').innerText(), 'The email or the password is wrong.');
    await look(page, 'sign-in-wrong');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
  });

  await t.test('in Spanish, from the browser’s language', async (t) => {
    const spanish = await launchChromium(t, { width: 1280, height: 800 }, 'es-CL');
    const page = await spanish.newPage();
    await page.goto(`${app.url}/console/login`);
    t.equal(await page.locator('h1').innerText(), 'Iniciar sesión');
    await page.getByLabel('Correo electrónico').fill('ana@lender.cl');
    await page.getByLabel('Contraseña').fill(PASSWORD);
    await page.getByRole('button', { name: 'Entrar' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
    await page.getByRole('link', { name: 'Claves de API' }).click();
    await page.waitForURL('**/keys');
    t.match(await page.locator('main').innerText(), 'Emitir una clave');
    await look(page, 'keys-es');
  });
});
