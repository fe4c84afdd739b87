import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { FrameLocator, Page } from 'playwright-core';
import { launchChromium, requireChromium, servePage } from '../helpers/browser.js';
import {
  HANG_GUARD_MS,
  createTenant,
  linkBody,
  runSyncs,
  schedulerTick,
  startTestApp,
  type TestApp,
} from '../helpers/harness.js';
import { refreshAwaitingMfa, widgetToken } from '../helpers/widget.js';

/*
 * The widget as a person uses it: Debian's Chromium opens a page of another origin that loads embed.js from the API and calls SvcWidget.open. The API runs
 * in-process on a moved clock; the test runs the syncs the scheduler would run while the widget polls.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 360, height: 740 };
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const generous = {
  sync_write: { perMinute: 10_000, burst: 1_000 },
  resource_write: { perMinute: 10_000, burst: 1_000 },
  read: { perMinute: 10_000, burst: 1_000 },
  widget_tokens: { perMinute: 10_000, burst: 1_000 },
};

interface PageEvent {
  kind: 'message' | 'success' | 'exit';
  origin?: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data?: any;
  exchangeToken?: string | null;
  metadata?: { intent: string; refresh_intent_id: string | null };
  reason?: string;
}

/** The customer's page: its own origin, embed.js from the API, and a log of what reached it. */
async function startCustomerPage(t: Test, apiUrl: string): Promise<string> {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Customer app</title></head>
<body style="font-family: system-ui; padding: 24px">
<h1>Customer app</h1><p>Connect your bank to continue.</p><button id="connect">Connect a bank</button>
<script src="${apiUrl}/widget/embed.js"></script>
<script>
  window.events = [];
  window.addEventListener('message', (event) => {
    if (event.data && typeof event.data.type === 'string')
      window.events.push({ kind: 'message', origin: event.origin, data: event.data });
  });
  window.openWidget = (token) => SvcWidget.open({
    token,
    onSuccess: (exchangeToken, metadata) => window.events.push({ kind: 'success', exchangeToken, metadata }),
    onExit: (info) => window.events.push({ kind: 'exit', reason: info.reason, error_code: info.error_code }),
  });
</script></body></html>`;
  return servePage(t, html);
}

async function events(page: Page): Promise<PageEvent[]> {
  return (await page.evaluate('window.events')) as PageEvent[];
}

async function waitForEvent(page: Page, kind: PageEvent['kind']): Promise<PageEvent> {
  await page.waitForFunction(`window.events.some((event) => event.kind === ${JSON.stringify(kind)})`, null, {
    timeout: HANG_GUARD_MS,
  });
  return (await events(page)).find((event) => event.kind === kind)!;
}

/** The widget's heading: each screen has exactly one h1, focused when the screen appears. */
async function screen(frame: FrameLocator, name: string | RegExp): Promise<void> {
  await frame.getByRole('heading', { level: 1, name }).waitFor({ timeout: HANG_GUARD_MS });
}

/** The id of the element that has the focus inside the widget. */
async function focusedId(frame: FrameLocator): Promise<string | null> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return frame.locator('body').evaluate(() => (globalThis as any).document.activeElement?.id ?? null);
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

if (requireChromium(t)) {
  t.test('the hosted widget in headless Chromium', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const app: TestApp = await startTestApp(t, 'sqlite');
    const tenant = await createTenant(app, { rateLimits: generous });
    const sk = tenant.keys.sk_test.secret;
    const apiOrigin = new URL(app.url).origin;
    const customer = await startCustomerPage(t, app.url);
    t.not(new URL(customer).origin, apiOrigin, 'the customer page has its own origin');
    const context = await launchChromium(t, DESKTOP);
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    const frame = page.frameLocator('iframe[title="Connect your bank"]');
    const openWidget = async (token: string) => {
      await page.goto(customer);
      await page.evaluate(`window.openWidget(${JSON.stringify(token)})`);
    };

    t.test('connect: picker, RUT as typed, refused password, another try, success, exchange', async (t) => {
      await openWidget(await widgetToken(app, sk, { external_user_id: 'browser-user' }));
      await screen(frame, 'Select your bank');
      const opened = await waitForEvent(page, 'message');
      t.match(opened, { origin: apiOrigin, data: { type: 'ready' } }, 'the widget says it is ready');
      await shot(page, '01-bank-picker-desktop');

      // Keyboard only: search, Tab to the first match, Enter.
      await frame.getByLabel('Search banks').fill('chile');
      await page.keyboard.press('Tab');
      await page.keyboard.press('Enter');
      await screen(frame, 'Log in to Banco de Chile');
      const rut = frame.getByLabel('RUT', { exact: true });
      t.equal(await focusedId(frame), 'rut', 'focus moves to the RUT');
      await rut.pressSequentially('123456789');
      t.equal(await rut.inputValue(), '12.345.678-9', 'formatted as typed');
      t.equal(await rut.getAttribute('aria-invalid'), 'true', 'a wrong check digit is refused as typed');
      t.match(await frame.locator('#rut-message').textContent(), /check digit does not match/);
      await shot(page, '02-credentials-invalid-rut-desktop');
      await frame.getByLabel('Password', { exact: true }).fill('sandbox-rejected');
      await frame.getByLabel('Password', { exact: true }).press('Enter');
      await page.waitForTimeout(300);
      t.equal(await frame.locator('h1').textContent(), 'Log in to Banco de Chile', 'not sent with a bad RUT');

      await rut.fill('');
      await rut.pressSequentially('123456785');
      t.equal(await rut.inputValue(), '12.345.678-5');
      t.equal(await rut.getAttribute('aria-invalid'), 'false');
      t.equal(await frame.locator('#rut-message').textContent(), 'Valid RUT');
      await shot(page, '03-credentials-desktop');
      await frame.getByLabel('Password', { exact: true }).press('Enter');
      await screen(frame, 'Connecting to Banco de Chile');
      t.equal(await frame.getByRole('status').getAttribute('aria-live'), 'polite', 'progress is announced');
      await shot(page, '04-progress-desktop');

      await runSyncs(app);
      await screen(frame, 'Your bank did not accept these details');
      t.match(await frame.locator('main').textContent(), /Check your RUT and password and try again/);
      await shot(page, '05-error-desktop');
      await frame.getByRole('button', { name: 'Try again' }).click();
      await screen(frame, 'Log in to Banco de Chile');
      t.equal(await rut.inputValue(), '12.345.678-5', 'the RUT is kept for the next try');
      await frame.getByLabel('Password', { exact: true }).fill('sandbox');
      await frame.getByRole('button', { name: 'Connect', exact: true }).click();
      await screen(frame, 'Connecting to Banco de Chile');
      await runSyncs(app);
      await screen(frame, 'Connected');
      await shot(page, '06-success-desktop');
      await frame.getByRole('button', { name: 'Continue' }).click();

      const success = await waitForEvent(page, 'success');
      const message = (await events(page)).find(
        (event) => event.kind === 'message' && event.data.type === 'success',
      )!;
      t.equal(message.origin, apiOrigin, "the exchange token came from the API's origin");
      t.match(message.data, { type: 'success', intent: 'connect', exchange_token: /^et_[0-9A-Za-z]{40}$/ });
      t.equal(success.exchangeToken, message.data.exchange_token, 'onSuccess got it');
      t.equal(await page.locator('iframe').count(), 0, 'the overlay closed');

      const link = await app.request('POST', `/v1/exchange_tokens/${success.exchangeToken}`, { key: sk });
      t.equal(link.status, 200);
      t.match(link.body, {
        object: 'link',
        bank_id: 'bancochile',
        status: 'active',
        external_user_id: 'browser-user',
      });
      const accounts = await app.request('GET', `/v1/accounts?link_id=${link.body.id}`, { key: sk });
      t.ok(accounts.body.length > 0, 'its first sync stored the accounts');
      const refresh = await app.request('POST', '/v1/refresh_intents', {
        key: sk,
        body: { link_id: link.body.id },
      });
      await runSyncs(app);
      t.equal(
        (await app.request('GET', `/v1/refresh_intents/${refresh.body.id}`, { key: sk })).body.status,
        'succeeded',
        'and it keeps syncing',
      );
    });

    t.test('MFA of a refresh: the widget opened with requires_mfa.widget_token', async (t) => {
      const created = await app.request('POST', '/v1/links', {
        key: sk,
        body: linkBody({
          bank_id: 'santander',
          credentials: { rut: '11.111.111-1', password: 'sandbox-mfa' },
        }),
      });
      await runSyncs(app);
      const waiting = await refreshAwaitingMfa(app, sk, created.body.id);
      t.equal(waiting.status, 'requires_mfa');

      await openWidget(waiting.requires_mfa.widget_token);
      await screen(frame, 'Enter your verification code');
      const code = frame.getByLabel('Verification code');
      t.equal(await focusedId(frame), 'mfa-code', 'focus is on the code field');
      await shot(page, '07-mfa-desktop');
      await code.pressSequentially('123456');
      await code.press('Enter');
      await screen(frame, 'Updating your accounts');
      await runSyncs(app);
      await screen(frame, 'Verified');
      await shot(page, '08-mfa-success-desktop');
      await frame.getByRole('button', { name: 'Continue' }).click();
      const success = await waitForEvent(page, 'success');
      t.equal(success.exchangeToken, null, 'a refresh needs no exchange');
      t.same(success.metadata, { intent: 'mfa', refresh_intent_id: waiting.id });
      t.equal(
        (await app.request('GET', `/v1/refresh_intents/${waiting.id}`, { key: sk })).body.status,
        'succeeded',
      );
    });

    t.test('reconnect an expired link, at a phone width', async (t) => {
      await page.setViewportSize(PHONE);
      const created = await app.request('POST', '/v1/links', {
        key: sk,
        body: linkBody({
          bank_id: 'bci',
          credentials: { rut: '22.222.222-2', password: 'sandbox-expiring' },
        }),
      });
      await runSyncs(app);
      for (let i = 0; i < 3; i++) {
        app.clock.advance(4 * HOUR + MINUTE);
        await schedulerTick(app);
      }
      const linkId = created.body.id;
      t.equal((await app.request('GET', `/v1/links/${linkId}`, { key: sk })).body.status, 'expired');

      await openWidget(await widgetToken(app, sk, { intent: 'reconnect', link_id: linkId }));
      await screen(frame, 'Reconnect Bci');
      const box = await page.locator('iframe').boundingBox();
      t.equal(Math.round(box!.width), PHONE.width, 'the widget fills a phone screen');
      await shot(page, '09-reconnect-credentials-phone');
      // Another person's login is refused before the bank is asked, and the form is offered again.
      await frame.getByLabel('RUT', { exact: true }).pressSequentially('111111111');
      await frame.getByLabel('Password', { exact: true }).fill('sandbox');
      await frame.getByRole('button', { name: 'Reconnect', exact: true }).click();
      await screen(frame, 'This is a different bank login');
      t.match(await frame.locator('main').textContent(), /Sign in with the same RUT/);
      await shot(page, '09b-reconnect-other-holder-phone');
      await frame.getByRole('button', { name: 'Try again' }).click();
      await frame.getByLabel('RUT', { exact: true }).fill('');
      await frame.getByLabel('RUT', { exact: true }).pressSequentially('222222222');
      await frame.getByLabel('Password', { exact: true }).fill('sandbox');
      await frame.getByRole('button', { name: 'Reconnect', exact: true }).click();
      await screen(frame, 'Reconnecting to Bci');
      await shot(page, '10-progress-phone');
      await runSyncs(app);
      await screen(frame, 'Reconnected');
      await shot(page, '11-success-phone');
      await frame.getByRole('button', { name: 'Continue' }).click();
      const success = await waitForEvent(page, 'success');
      t.equal(success.metadata?.intent, 'reconnect');
      const link = await app.request('POST', `/v1/exchange_tokens/${success.exchangeToken}`, { key: sk });
      t.match(link.body, { id: linkId, status: 'active', expired_at: null });

      await openWidget(await widgetToken(app, sk));
      await screen(frame, 'Select your bank');
      await shot(page, '12-bank-picker-phone');
      await frame.getByRole('button', { name: 'Banco Falabella' }).click();
      await screen(frame, 'Log in to Banco Falabella');
      await shot(page, '13-credentials-phone');
      await page.keyboard.press('Escape');
      const exit = await waitForEvent(page, 'exit');
      t.match(exit, { kind: 'exit', reason: 'closed' }, 'Escape closes the widget and calls onExit');
      await page.setViewportSize(DESKTOP);
    });

    t.test(
      'closing with × on the Connected screen hands over the exchange token as Continue does',
      async (t) => {
        await openWidget(await widgetToken(app, sk, { external_user_id: 'closes-early' }));
        await screen(frame, 'Select your bank');
        await frame.getByRole('button', { name: 'Banco Falabella' }).click();
        await screen(frame, 'Log in to Banco Falabella');
        await frame.getByLabel('RUT', { exact: true }).pressSequentially('123456785');
        await frame.getByLabel('Password', { exact: true }).fill('sandbox');
        await frame.getByRole('button', { name: 'Connect', exact: true }).click();
        await screen(frame, 'Connecting to Banco Falabella');
        await runSyncs(app);
        await screen(frame, 'Connected');
        await frame.locator('#widget-close').click();
        const success = await waitForEvent(page, 'success');
        t.match(success.exchangeToken, /^et_[0-9A-Za-z]{40}$/, 'onSuccess got the exchange token');
        t.equal(await page.locator('iframe').count(), 0, 'the overlay closed');
        const link = await app.request('POST', `/v1/exchange_tokens/${success.exchangeToken}`, { key: sk });
        t.equal(link.status, 200);
        t.match(link.body, { object: 'link', bank_id: 'falabella', external_user_id: 'closes-early' });
      },
    );

    t.test('a used link shows a clear error page', async (t) => {
      const token = await widgetToken(app, sk);
      await openWidget(token);
      await screen(frame, 'Select your bank');
      await openWidget(token);
      await screen(frame, 'This link was already used');
      await shot(page, '14-error-used-link-desktop');
      await frame.getByRole('button', { name: 'Close', exact: true }).click();
      const exit = await waitForEvent(page, 'exit');
      t.match(exit, { reason: 'error', error_code: 'token_consumed' });
    });

    t.test('nothing went wrong in the page', async (t) => {
      // The used link's page answers 410 on purpose; anything else (a CSP refusal, a script error) is a bug.
      const unexpected = problems.filter((problem) => !problem.includes('status of 410'));
      t.same(unexpected, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
