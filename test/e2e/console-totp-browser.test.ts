import t from 'tap';
import { base32Decode, hotp, totpCode, totpStep, TOTP_STEP_MS } from '../../src/console/totp.js';
import { PASSWORD, invite } from '../helpers/console.js';
import { acceptInBrowser, consoleLook } from '../helpers/console-browser.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * The console's second factor in headless Chromium, on both engines: from the header's Account link a
 * user turns TOTP on (a wrong code first, then the code computed from the key the page shows), signs out,
 * and signs in again, asked for the code after the password. Every page is checked with axe-core and saved
 * at desktop and phone widths in test-output/screenshots/console/ (totp-*).
 */

forEachEngine(t, async (t, engine) => {
  if (!requireChromium(t)) return;
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  const { token } = await invite(app, tenant.orgId);
  const context = await launchChromium(t);
  const page = await context.newPage();

  const look = consoleLook(t, engine, 'totp-');

  let secret: Buffer = Buffer.alloc(0);
  await t.test('the user turns the second factor on from the Account page', async (t) => {
    await acceptInBrowser(page, app, token, `**/console/o/${tenant.orgId}/test`);
    await page.getByRole('link', { name: 'Account' }).click();
    await page.waitForURL('**/console/account');
    t.match(await page.locator('main').innerText(), 'The second factor is off.');
    await look(page, 'account-off');

    await page.getByRole('button', { name: 'Turn on the second factor' }).click();
    const shown = await page.locator('#totp-secret').innerText();
    t.match(shown, /^([A-Z2-7]{4} ){7}[A-Z2-7]{4}$/);
    secret = base32Decode(shown)!;
    t.match(await page.locator('main').innerText(), 'otpauth://totp/');
    await look(page, 'enrol');

    const step = totpStep(app.clock.now());
    const near = new Set([-1, 0, 1].map((offset) => hotp(secret, step + offset)));
    const wrong = ['000000', '111111', '222222', '333333'].find((code) => !near.has(code))!;
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Verification code (6 digits)').fill(wrong);
    await page.getByRole('button', { name: 'Confirm and turn on' }).click();
    await page.locator('.error').waitFor();
    t.match(await page.locator('.error').innerText(), 'The code is wrong.');
    t.equal(await page.locator('#totp-secret').innerText(), shown, 'the same key, to try again');
    await look(page, 'enrol-wrong');

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Verification code (6 digits)').fill(totpCode(secret, app.clock.now()));
    await page.getByRole('button', { name: 'Confirm and turn on' }).click();
    await page.locator('.notice').waitFor();
    t.match(await page.locator('main').innerText(), 'The second factor is on.');
    await look(page, 'account-on');
  });

  await t.test('signing in again asks for the code after the password', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/console/login');
    await page.getByLabel('Email').fill('ana@lender.cl');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByLabel('Verification code (6 digits)').waitFor();
    t.match(await page.locator('.error').innerText(), 'Enter the code from your authenticator app.');
    t.equal(await page.getByLabel('Email').inputValue(), 'ana@lender.cl');
    t.equal(await page.getByLabel('Password').inputValue(), '', 'the password is not sent back');
    await look(page, 'signin-code');

    app.clock.advance(TOTP_STEP_MS);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Verification code (6 digits)').fill(totpCode(secret, app.clock.now()));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`**/console/o/${tenant.orgId}/test`);
    t.match(await page.locator('main').innerText(), 'Signed in as ana@lender.cl (admin)');
  });
});
