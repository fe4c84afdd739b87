import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { DEFAULT_ORGANISATION_NAME, DEFAULT_SECRET_KEY_NAME } from '../../src/orgs/default-names.js';
import { seriousViolations } from '../helpers/axe.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import {
  CONSOLE_SHOTS,
  englishOnlyWords,
  sidewaysScroll,
  untranslatedWords,
} from '../helpers/console-browser.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  setTimeLimit,
  startTestApp,
} from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';
import { invite } from '../helpers/console.js';
import { whileDispatching } from '../helpers/webhook-events.js';

/*
 * Every console page on a phone and at a desk, in Spanish and in English (issue 29, item 6). An operator of
 * an appliance as `svc install` leaves it (its organisation still "Default organisation", a key still named
 * by the install) with a synced sandbox link, an endpoint whose receiver fails, a fired test event and its
 * delivery, opens each page at 390 and at 1280 px: none may scroll sideways, none may have a serious axe
 * violation, and in Spanish no word of the page may be English (the catalogue's English words and the
 * codes the API keeps in English: `savings`, `revoked`, a bank's code). Each page is saved, on SQLite, in
 * test-output/screenshots/console/phone/ as `{es|en}-{page}-{390|1280}.png`.
 */

const PASSWORD = 'a long and quiet password';
const SHOTS = join(CONSOLE_SHOTS, 'phone');
const WIDTHS = [390, 1280] as const;

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  setTimeLimit(t, 280_000);
  mkdirSync(SHOTS, { recursive: true });
  const app = await startTestApp(t, engine, { config: { dispatcher: { retryScheduleSeconds: [0] } } });
  const tenant = await createTenant(app);
  // As `svc install` names them: the words the software chose, which a Spanish page must not show in English.
  await app.db.knex('organisations').where({ id: tenant.orgId }).update({ name: DEFAULT_ORGANISATION_NAME });
  await app.db
    .knex('api_keys')
    .where({ id: tenant.keys.sk_test.id })
    .update({ name: DEFAULT_SECRET_KEY_NAME });
  const link = await app.request('POST', '/v1/links', {
    key: tenant.keys.sk_test.secret,
    body: linkBody({ external_user_id: 'customer-17' }),
  });
  t.equal(link.status, 200, link.text);
  await runSyncs(app);
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(500, { 'content-type': 'text/plain' });
    response.end('receiver is broken');
  });
  const endpoint = await app.request('POST', '/v1/webhook_endpoints', {
    key: tenant.keys.sk_test.secret,
    body: { url: receiver.url, enabled_events: ['link.refreshed', 'link.created', 'refresh_intent.failed'] },
  });
  t.equal(endpoint.status, 200, endpoint.text);
  const operator = await invite(app, null, 'ops@lender.cl', 'operator');
  const english = englishOnlyWords();
  const org = `/console/o/${tenant.orgId}/test`;

  /** Does `action` while sending what falls due, as a running dispatcher would (the fire page waits). */
  const dispatching = (action: () => Promise<unknown>) => whileDispatching(app, action);

  for (const locale of ['en', 'es'] as const) {
    await t.test(`every page in ${locale === 'es' ? 'Spanish' : 'English'}`, async (t) => {
      const context = await launchChromium(
        t,
        { width: 1280, height: 800 },
        locale === 'es' ? 'es-CL' : 'en-US',
      );
      const page = await context.newPage();

      /** The checks of one page, at both widths; the picture on SQLite. */
      const check = async (name: string) => {
        t.same(await seriousViolations(page), [], `${locale} ${name}: no serious accessibility violation`);
        if (locale === 'es')
          t.same(
            await untranslatedWords(page, english, [app.config.widget.name]),
            [],
            `es ${name}: no English word on the page`,
          );
        for (const width of WIDTHS) {
          await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
          const overflow = await sidewaysScroll(page);
          t.ok(overflow <= 0, `${locale} ${name} at ${width} px does not scroll sideways (${overflow} px)`);
          if (engine === 'sqlite')
            await page.screenshot({ path: join(SHOTS, `${locale}-${name}-${width}.png`), fullPage: true });
        }
        await page.setViewportSize({ width: 1280, height: 800 });
      };
      const open = async (path: string, name: string) => {
        const response = await page.goto(`${app.url}${path}`);
        t.equal(response?.status(), 200, `${locale} ${name} answers 200`);
        await check(name);
      };

      if (locale === 'en') {
        await page.goto(`${app.url}/console/accept/${operator.token}`);
        await page.locator('#password').fill(PASSWORD);
        await page.locator('#confirm').fill(PASSWORD);
        await page.locator('form button[type=submit]').click();
        await page.waitForURL('**/console/orgs');
        await page.getByRole('button', { name: 'Sign out' }).click();
      }
      await page.goto(`${app.url}/console/login`);
      await check('sign-in');
      await page.locator('#email').fill('ops@lender.cl');
      await page.locator('#password').fill(PASSWORD);
      await page.locator('form.console-form button[type=submit]').click();
      await page.waitForURL('**/console/orgs');

      await open('/console/orgs', 'orgs');
      await open(org, 'overview');
      await open(`${org}/links`, 'links');
      // At a phone's width the status filter's label stays beside its select, not a line above or apart.
      await page.setViewportSize({ width: 390, height: 844 });
      const label = (await page.locator('label[for=status]').boundingBox())!;
      const select = (await page.locator('select#status').boundingBox())!;
      const gap = select.x - (label.x + label.width);
      const rowShift = Math.abs(label.y + label.height / 2 - (select.y + select.height / 2));
      t.ok(
        gap >= 0 && gap <= 24 && rowShift <= 4,
        `${locale}: the Estado label sits by its select (${gap}, ${rowShift})`,
      );
      await page.setViewportSize({ width: 1280, height: 800 });
      await open(`${org}/links/${link.body.id}`, 'link');
      const movements = await page
        .locator('section, h2')
        .filter({ hasText: /movements|movimientos/i })
        .count();
      t.ok(movements > 0, 'the link page has its movements');
      // The bank's product, not the API's enum: a cuenta vista (type `checking`) is not a cuenta corriente.
      const vista = page.locator('tr', { hasText: 'Cuenta Vista' }).first().locator('td').nth(2);
      t.equal(await vista.innerText(), 'Cuenta vista', `${locale}: the cuenta vista's type`);
      // Times in the operator's zone (America/Santiago by default), in the locale's format; never `… UTC`.
      const text = await page.locator('main').innerText();
      t.notMatch(
        text,
        /\d{4}-\d{2}-\d{2} \d{2}:\d{2}( UTC)?/,
        `${locale}: no ISO-like UTC time on the link page`,
      );
      t.match(
        text,
        locale === 'es'
          ? /\b\d{2}-\d{2}-\d{4} \d{2}:\d{2}\b/
          : /\b[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2} [AP]M\b/,
        `${locale}: times as the locale writes them`,
      );
      const amounts = await page.locator('td[data-label="Amount"], td[data-label="Monto"]').allInnerTexts();
      t.ok(amounts.length > 0, 'amounts are shown');
      for (const amount of amounts)
        t.match(
          amount,
          locale === 'es' ? /^-?\$[\d.]+$/ : /^-?CLP\s[\d,]+$/,
          `money in the locale: ${amount}`,
        );
      await open(`${org}/keys`, 'keys');
      await open(`${org}/keys/${tenant.keys.sk_test.id}`, 'key');
      await open(`${org}/webhooks`, 'webhooks');
      // Fire a test event at the failing receiver: the answer is a page of its own.
      await page.locator('#fire-type').selectOption('link.refreshed');
      await page.locator('#fire-link').selectOption(link.body.id);
      await dispatching(async () => {
        await page.locator('form[action$="/fire"] button[type=submit]').click();
        await page.waitForURL('**/webhooks/fire');
      });
      await check('fire');
      await open(`${org}/webhooks/${endpoint.body.id}`, 'endpoint');
      await open(`${org}/webhooks/deliveries`, 'deliveries');
      const delivery = await app.db
        .knex('webhook_deliveries')
        .where({ endpoint_id: endpoint.body.id })
        .first('id');
      await open(`${org}/webhooks/deliveries/${delivery.id}`, 'delivery');
      await open(`${org}/events`, 'events');
      await open(`${org}/audit`, 'audit');
      const audit = await page.locator('tbody').innerText();
      t.notMatch(
        audit,
        /[{}]|api_key\.created|sandbox\.fire/,
        `${locale}: audit entries without JSON or codes`,
      );
      t.match(
        audit,
        locale === 'es' ? 'Creó una clave de API' : 'Created an API key',
        `${locale}: sentences`,
      );
      await open('/console/users', 'users');
      const user = await app.db.knex('console_users').where({ email: 'ops@lender.cl' }).first('id');
      await open(`/console/users/${user.id}`, 'user');
      await open('/console/account', 'account');

      // An id in a table is shortened, with a button that copies it whole.
      await page.goto(`${app.url}${org}/links`);
      const id = page.locator('td code.id').first();
      t.equal(await id.getAttribute('title'), link.body.id, 'the whole id is its title');
      const shown = (await id.boundingBox())!.width;
      t.ok(shown < 120, `the id takes ${Math.round(shown)} px, not its whole length`);
      await context.grantPermissions(['clipboard-read', 'clipboard-write']);
      await page.locator('button.copy-id').first().click();
      t.equal(
        await page.evaluate('navigator.clipboard.readText()'),
        link.body.id,
        'the button copies it whole',
      );
    });
  }

  await t.test('the invite form picks the organisation from a list', async (t) => {
    const context = await launchChromium(t, { width: 390, height: 844 }, 'es-CL');
    const page = await context.newPage();
    await page.goto(`${app.url}/console/login`);
    await page.locator('#email').fill('ops@lender.cl');
    await page.locator('#password').fill(PASSWORD);
    await page.locator('form.console-form button[type=submit]').click();
    await page.waitForURL('**/console/orgs');
    await page.goto(`${app.url}/console/users`);
    const options = await page.locator('#invite-org option').allInnerTexts();
    t.same(options, ['Ninguna', 'Organización principal']);
    await page.locator('#invite-email').fill('ana@lender.cl');
    await page.locator('#invite-role').selectOption('admin');
    await page.locator('#invite-org').selectOption({ label: 'Organización principal' });
    await page.locator('form[action="/console/users"] button[type=submit]').click();
    t.match(await page.locator('.secret-once').innerText(), 'ana@lender.cl invitado como administrador');
    const ana = await app.db.knex('console_users').where({ email: 'ana@lender.cl' }).first('org_id');
    t.equal(ana.org_id, tenant.orgId, 'invited to the organisation picked');
  });
});
