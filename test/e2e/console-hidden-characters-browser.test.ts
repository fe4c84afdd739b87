import { join } from 'node:path';
import t from 'tap';
import { invite, tenantWithHiddenCharacters } from '../helpers/console.js';
import { CONSOLE_SHOTS, acceptInBrowser, consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * Issue 44, item 6, as a person sees it: a tenant's external_user_id and webhook description and the
 * organisation's name, each with U+202E (RIGHT-TO-LEFT OVERRIDE), read in headless Chromium. The page shows
 * the marker `\u202e` where the character is, as the CLI does, and what follows it reads left to right:
 * `cust‮1147-remotsuc` no longer reads `customer-7411`. Saved as
 * test-output/screenshots/console/hidden-characters-*.png (on SQLite).
 */

const RLO = '\u202e';

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const app = await startTestApp(t, engine);
  const { tenant, linkId, hookId } = await tenantWithHiddenCharacters(t, app, {
    externalUserId: `cust${RLO}1147-remotsuc`,
    description: `payroll ${RLO}kooh`,
  });
  const { token } = await invite(app, tenant.orgId);
  const context = await launchChromium(t);
  const page = await context.newPage();
  const look = consoleLook(t, engine, 'hidden-characters-');
  await acceptInBrowser(page, app, token, `**/console/o/${tenant.orgId}/test`);

  const base = `${app.url}/console/o/${tenant.orgId}/test`;
  for (const [name, path, shown] of [
    ['link', `/links/${linkId}`, 'cust\\u202e1147-remotsuc'],
    ['links', '/links', 'cust\\u202e1147-remotsuc'],
    ['endpoint', `/webhooks/${hookId}`, 'payroll \\u202ekooh'],
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
