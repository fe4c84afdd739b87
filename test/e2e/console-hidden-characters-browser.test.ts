import { join } from 'node:path';
import t from 'tap';
import { inviteConsoleUser } from '../../src/console/users.js';
import { CONSOLE_SHOTS, consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { createTenant, forEachEngine, linkBody, startTestApp } from '../helpers/harness.js';

/*
 * Issue 44, item 6, as a person sees it: a tenant's external_user_id and webhook description and the
 * organisation's name, each with U+202E (RIGHT-TO-LEFT OVERRIDE), read in headless Chromium. The page shows
 * the marker `\u202e` where the character is, as the CLI does, and what follows it reads left to right:
 * `cust‮1147-remotsuc` no longer reads `customer-7411`. Saved as
 * test-output/screenshots/console/hidden-characters-*.png (on SQLite).
 */

const PASSWORD = 'a long and quiet password';
const RLO = '\u202e';

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  await app.db
    .knex('organisations')
    .where({ id: tenant.orgId })
    .update({ name: `Lender ${RLO}exe.gpj` });
  const link = await app.request('POST', '/v1/links', {
    key: sk,
    body: linkBody({ external_user_id: `cust${RLO}1147-remotsuc` }),
  });
  t.equal(link.status, 200, link.text);
  const hook = await app.request('POST', '/v1/webhook_endpoints', {
    key: sk,
    body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'], description: `payroll ${RLO}kooh` },
  });
  t.equal(hook.status, 200, hook.text);
  const { token } = await app.db.transaction((trx) =>
    inviteConsoleUser(trx, {
      email: 'ana@lender.cl',
      role: 'admin',
      orgId: tenant.orgId,
      actor: 'cli:test',
      now: app.clock.now(),
    }),
  );
  const context = await launchChromium(t);
  const page = await context.newPage();
  const look = consoleLook(t, engine, 'hidden-characters-');
  await page.goto(`${app.url}/console/accept/${token}`);
  await page.getByLabel('New password').fill(PASSWORD);
  await page.getByLabel('Repeat the password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Save and sign in' }).click();
  await page.waitForURL(`**/console/o/${tenant.orgId}/test`);

  const base = `${app.url}/console/o/${tenant.orgId}/test`;
  for (const [name, path, shown] of [
    ['link', `/links/${link.body.id}`, 'cust\\u202e1147-remotsuc'],
    ['links', '/links', 'cust\\u202e1147-remotsuc'],
    ['endpoint', `/webhooks/${hook.body.id}`, 'payroll \\u202ekooh'],
  ] as const) {
    await page.goto(`${base}${path}`);
    const main = await page.locator('main').innerText();
    t.match(main, shown, `the ${name} page shows the marker where the character is`);
    t.match(
      await page.locator('.scope-org').innerText(),
      'Lender \\u202eexe.gpj',
      'and so does the organisation’s name',
    );
    t.notOk(
      (await page.locator('body').innerText()).includes(RLO),
      `no U+202E acts on the ${name} page’s text`,
    );
    await look(page, name);
  }
  if (engine === 'sqlite')
    t.comment(`pictures in ${join(CONSOLE_SHOTS, 'hidden-characters-link-desktop.png')}`);
});
