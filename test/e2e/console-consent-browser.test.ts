import t from 'tap';
import { CONSOLE_CATALOGUES } from '../../src/console/messages.js';
import { runConsentExpiry } from '../../src/scheduler/consent-expiry.js';
import { appBesideBank, consentLink } from '../helpers/consent-bank.js';
import { invite } from '../helpers/console.js';
import { consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { forEachEngine, linkBody, runSyncs, setTimeLimit } from '../helpers/harness.js';

/*
 * The console's consent badge in headless Chromium, on both engines (issue 31, item 1; the API-level check is
 * test/api/console-consent.test.ts): support reads, in the links list and on each link's page, which consent
 * links need their end user (a consent expiring, one that ended) and which do not (a consent with time left,
 * a credential link), in English and in Spanish. Every page is checked with axe-core and saved at desktop and
 * phone widths in test-output/screenshots/console/ (`consent-…`).
 */
setTimeLimit(t, 420_000);

const DAY = 86_400_000;
const PASSWORD = 'a long and quiet password';

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine);
  const key = tenant.keys.sk_test.secret;
  const credential = await app.request('POST', '/v1/links', {
    key,
    body: linkBody({ external_user_id: 'customer-credential' }),
  });
  t.equal(credential.status, 200, credential.text);
  const endsIn = async (days: number, rut: string) => {
    const ends = new Date(Math.floor((app.clock.now() + days * DAY) / 1000) * 1000).toISOString();
    return (await consentLink(fixture, app, registration, tenant.orgId, rut, undefined, ends)).linkId;
  };
  const ended = await endsIn(1, '55.555.555-5');
  const soon = await endsIn(5, '11.111.111-1');
  const later = await endsIn(90, '12.345.678-5');
  await runSyncs(app);
  // A day and a minute on: the first consent ended (the tick expires its link), the second is within 7 days.
  app.clock.advance(DAY + 60_000);
  t.same(await runConsentExpiry(app.services), { ended: 1, warned: 1 });

  const look = consoleLook(t, engine, 'consent-');
  /** A browser in `language` with a new support user `email` signed in, on the links list. */
  const signIn = async (email: string, language: 'en' | 'es') => {
    const words = CONSOLE_CATALOGUES[language];
    const context = await launchChromium(t, undefined, language === 'es' ? 'es-CL' : 'en-US');
    const page = await context.newPage();
    const { token } = await invite(app, tenant.orgId, email, 'support');
    await page.goto(`${app.url}/console/accept/${token}`);
    await page.getByLabel(words['accept.password']).fill(PASSWORD);
    await page.getByLabel(words['accept.confirm']).fill(PASSWORD);
    await page.getByRole('button', { name: words['accept.submit'] }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
    await page.getByRole('link', { name: words['nav.links'], exact: true }).click();
    await page.waitForURL('**/test/links');
    return page;
  };
  const rowOf = (page: Awaited<ReturnType<typeof signIn>>, linkId: string) =>
    page.locator('tbody tr').filter({ hasText: linkId });

  await t.test('the links list and a link page mark the consents that need their end user', async (t) => {
    const page = await signIn('help@lender.cl', 'en');
    const marked = (linkId: string) => rowOf(page, linkId).locator('.badge.attention');
    t.equal(await marked(soon).innerText(), 'consent expiring', 'the expiring consent is marked');
    t.equal(await marked(ended).innerText(), 'consent expired', 'the ended one too');
    t.ok(await marked(soon).isVisible(), 'and the mark is visible');
    t.equal(await marked(later).count(), 0, 'a consent with time left is not marked');
    t.equal(await rowOf(page, credential.body.id).locator('.badge').count(), 0, 'a credential link has none');
    await look(page, 'links');

    await rowOf(page, soon).getByRole('link').first().click();
    await page.waitForURL(`**/links/${soon}`);
    const main = page.locator('main');
    t.equal(await main.locator('.badge.attention').first().innerText(), 'consent expiring');
    t.match(
      await main.innerText(),
      /until [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d\d\s[AP]M/,
      'when it ends',
    );
    t.match(await main.innerText(), /renew it before then through the widget/, 'and what the user must do');
    await look(page, 'link-expiring');

    await page.goto(`${app.url}/console/o/${tenant.orgId}/test/links/${later}`);
    t.equal(await page.locator('main .badge.attention').count(), 0, 'no mark on a consent with time left');
    t.match(await page.locator('main').innerText(), /consent active/);
  });

  await t.test('in Spanish', async (t) => {
    const page = await signIn('ayuda@lender.cl', 'es');
    t.equal(
      await rowOf(page, soon).locator('.badge.attention').innerText(),
      'consentimiento por vencer',
      'marked in Spanish',
    );
    t.equal(await rowOf(page, ended).locator('.badge.attention').innerText(), 'consentimiento vencido');
    await look(page, 'links-es');
    await page.goto(`${app.url}/console/o/${tenant.orgId}/test/links/${ended}`);
    t.match(await page.locator('main').innerText(), /La persona debe renovarlo desde el widget/);
    await look(page, 'link-ended-es');
  });
});
