import t from 'tap';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { PASSWORD, invite } from '../helpers/console.js';
import { acceptInBrowser, consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { createTenant, forEachEngine, linkBody, startTestApp } from '../helpers/harness.js';
import { independentlyVerified, ok, startReceiver } from '../helpers/receiver.js';
import { whileDispatching } from '../helpers/webhook-events.js';

/*
 * The console's webhooks section in headless Chromium, on both engines (issue 18): an admin creates an
 * endpoint pointing at a real receiver on loopback that fails (500), fires a sandbox event in test mode and
 * sees the failure, finds the failed delivery with its attempt (status, duration, the receiver's answer),
 * fixes the receiver, redelivers and sees the success; rolls the secret; the live mode has no sandbox. Every
 * page is checked with axe-core (no serious or critical violation) and saved at desktop and phone widths
 * in test-output/screenshots/console/, with no sideways scroll on a phone.
 */

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  // One attempt per delivery: a failing receiver's delivery is `failed` at once, not retried in a minute.
  const app = await startTestApp(t, engine, { config: { dispatcher: { retryScheduleSeconds: [0] } } });
  const tenant = await createTenant(app);
  const link = await app.request('POST', '/v1/links', {
    key: tenant.keys.sk_test.secret,
    body: linkBody({ external_user_id: 'customer-17' }),
  });
  t.equal(link.status, 200, link.text);
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(500, { 'content-type': 'text/plain' });
    response.end('<b>receiver is broken</b>');
  });
  const context = await launchChromium(t);
  const page = await context.newPage();

  const look = consoleLook(t, engine);

  /** Does `action` while sending what falls due, as a running dispatcher would (the page waits for it). */
  const dispatching = (action: () => Promise<unknown>) => whileDispatching(app, action);

  await t.test('the admin signs in and opens the webhooks', async (t) => {
    const admin = await invite(app, tenant.orgId);
    await acceptInBrowser(page, app, admin.token, `**/console/o/${tenant.orgId}/test`);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.waitForURL('**/test/webhooks');
    t.match(await page.locator('main').innerText(), 'No endpoints in this mode.');
    await look(page, 'webhooks-empty');
  });

  let secret = '';
  await t.test('the admin creates an endpoint; its secret is shown once', async (t) => {
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel('Description (optional)').fill('payroll receiver');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    t.match(page.url(), /\/webhooks$/, 'without an event type ticked, the form comes back');
    t.match(await page.getByRole('alert').innerText(), 'Tick at least one event type.');
    t.equal(await page.getByLabel('URL').inputValue(), receiver.url, 'what was typed is kept');
    await look(page, 'webhooks-refused');
    await page.getByLabel('link.refreshed').check();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    secret = (await page.locator('#secret-value').innerText()).trim();
    t.match(secret, /^whsec_[A-Za-z0-9]{40}$/);
    t.ok(await page.getByRole('button', { name: 'Copy', exact: true }).isVisible(), 'a copy button');
    t.match(await page.locator('table').innerText(), receiver.url);
    await look(page, 'webhook-created');
    await page.goto(page.url());
    t.notMatch(await page.content(), secret, 'a reload does not show the secret again');
  });

  await t.test('a sandbox event to the failing receiver shows the failure', async (t) => {
    await page.getByLabel('Event type').selectOption('link.refreshed');
    await page.getByLabel('Test link').selectOption(link.body.id);
    await dispatching(async () => {
      await page.getByRole('button', { name: 'Fire', exact: true }).click();
      await page.waitForURL('**/webhooks/fire');
    });
    t.match(await page.getByRole('status').innerText(), /Event link\.refreshed evt_[0-9a-f]{16} fired/);
    const outcome = await page
      .getByRole('region', { name: "Each endpoint's first attempt" })
      .locator('tbody tr')
      .allInnerTexts();
    t.equal(outcome.length, 1, 'one endpoint subscribed');
    t.match(outcome[0], /we_[0-9a-f]{16}\s+failed\s+HTTP 500\s+1\s/);
    t.equal(receiver.received.length, 1, 'the receiver got it');
    t.equal(
      independentlyVerified(
        receiver.received[0]!.body,
        receiver.received[0]!.headers['svc-signature'],
        secret,
      ),
      1,
      'signed with the secret the console showed',
    );
    await look(page, 'webhook-fired');
  });

  let failedId = '';
  await t.test('the admin finds the failed delivery and reads its attempt', async (t) => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('link', { name: 'See all deliveries' }).click();
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL('**/deliveries?*status=failed*');
    const rows = page.locator('tbody tr');
    t.equal(await rows.count(), 1, 'one failed delivery');
    await look(page, 'webhook-deliveries');
    await rows.getByRole('link', { name: /^wd_/ }).click();
    failedId = page.url().split('/').at(-1)!;
    t.match(failedId, /^wd_[0-9a-f]{16}$/);
    const attempts = await page.locator('tbody tr').allInnerTexts();
    t.equal(attempts.length, 1, 'one attempt');
    t.match(attempts[0], /^1\s+Jun 15, 2026, 11:00:00\sAM\s+\d+ ms\s+500\s+/);
    t.match(attempts[0], '<b>receiver is broken</b>', "the receiver's answer, as text");
    t.equal(await page.locator('main b').count(), 0, 'never as markup');
    await look(page, 'webhook-delivery-failed');
  });

  await t.test('the receiver is fixed; a redelivery succeeds', async (t) => {
    receiver.setHandler(ok);
    await page.getByRole('button', { name: 'Redeliver' }).click();
    t.match(await page.getByRole('status').innerText(), /New delivery wd_[0-9a-f]{16} queued/);
    await look(page, 'webhook-redelivered');
    await new Dispatcher(app.services).dispatchDue();
    await page.getByRole('link', { name: /^Open wd_/ }).click();
    const facts = await page.locator('.facts').innerText();
    t.match(facts, /Status\s+succeeded/);
    t.match(facts, /Last answer\s+HTTP 200/);
    t.match(await page.locator('tbody tr').first().innerText(), /\s200\s/);
    t.equal(receiver.received.length, 2, 'the receiver got it again');
    t.equal(receiver.received[1]!.event.id, receiver.received[0]!.event.id, 'the same event');
    await look(page, 'webhook-delivery-succeeded');
    const audit = await app.db
      .knex('audit_log')
      .where({ action: 'webhook_delivery.redeliver', target_id: failedId })
      .first();
    t.match(audit.actor, /^console:cu_/, 'audited with the console user');
  });

  await t.test('the endpoint: its health, and a secret rolled with a grace period', async (t) => {
    await page.getByRole('link', { name: /^we_/ }).first().click();
    t.match(await page.locator('.facts').innerText(), /State\s+enabled/);
    await look(page, 'webhook-endpoint');
    await page.getByLabel('The old secret keeps signing for').selectOption('1');
    await page.getByRole('button', { name: 'Roll the secret' }).click();
    const rolled = (await page.locator('#secret-value').innerText()).trim();
    t.match(rolled, /^whsec_/);
    t.not(rolled, secret);
    t.match(
      await page.getByRole('status').first().innerText(),
      /keeps signing beside it until Jun 15, 2026, 12:00\sPM/,
    );
    await look(page, 'webhook-rolled');
  });

  await t.test('live mode has its own endpoints and no sandbox', async (t) => {
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/live/webhooks`);
    const main = await page.locator('main').innerText();
    t.match(main, 'No endpoints in this mode.');
    t.notMatch(main, receiver.url, 'no test endpoint');
    t.equal(await page.getByRole('button', { name: 'Fire', exact: true }).count(), 0, 'no fire form');
    await look(page, 'webhooks-live');
  });

  await t.test('in Spanish, from the browser’s language', async (t) => {
    const spanish = await launchChromium(t, { width: 1280, height: 800 }, 'es-CL');
    const page = await spanish.newPage();
    await page.goto(`${app.url}/console/login`);
    await page.getByLabel('Correo electrónico').fill('ana@lender.cl');
    await page.getByLabel('Contraseña').fill(PASSWORD);
    await page.getByRole('button', { name: 'Entrar' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    const main = await page.locator('main').innerText();
    t.match(main, 'Crear un endpoint');
    t.match(main, 'Disparar un evento de prueba');
    await look(page, 'webhooks-es');
    await page.getByRole('link', { name: 'Ver todas las entregas' }).click();
    t.match(await page.locator('tbody').innerText(), /exitosa/, 'states in Spanish in the list');
    await page.getByRole('link', { name: /^wd_/ }).first().click();
    t.match(await page.locator('main').innerText(), 'Volver a entregar');
    // Either delivery may come first (same minute): its state, whichever, is in Spanish.
    t.match(
      await page.locator('.facts').innerText(),
      /Estado\s+(exitosa|fallida|pendiente)\s/,
      'and on the delivery',
    );
    await look(page, 'webhook-delivery-es');
  });
});
