import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { Locator, Page } from 'playwright-core';
import { requireChromium } from '../helpers/browser.js';
import { HANG_GUARD_MS, runSyncs } from '../helpers/harness.js';
import { DESKTOP, PHONE, screen, widgetPages } from '../helpers/widget-browser.js';

/*
 * The widget in Spanish and in English, clicked through in Debian's Chromium at a desktop (1280x800) and a
 * phone (390x844) size: bank, RUT and clave, a wrong MFA code and the right one, success, the exchange. Then
 * the hosted flow: widget_url opened as a top-level page, which returns to the app's redirect_uri with the
 * exchange token. Screenshots land in test-output/screenshots/locales/.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'locales');
const WORDS = {
  es: {
    frame: 'Conecta tu banco',
    picker: 'Elige tu banco',
    search: 'Buscar banco',
    placeholder: 'Busca tu banco',
    login: 'Ingresa a Banco de Chile',
    password: 'Clave',
    connect: 'Conectar',
    connecting: 'Conectando con Banco de Chile',
    mfa: 'Ingresa tu código de verificación',
    code: 'Código de verificación',
    verify: 'Verificar',
    wrong: 'El código no es correcto. Revísalo e inténtalo de nuevo: te quedan 2 intentos.',
    connected: 'Conectado',
    found: /Encontramos \d+ cuentas en Banco de Chile a nombre de /,
    continue: 'Continuar',
    footer: 'Conexión cifrada. La app nunca ve tu clave.',
    close: 'Cerrar esta ventana',
    lang: 'es-CL',
    matches: '4 bancos',
    individual: 'Persona',
    business: 'Empresa',
  },
  en: {
    frame: 'Connect your bank',
    picker: 'Select your bank',
    search: 'Search banks',
    placeholder: 'Search for your bank',
    login: 'Log in to Banco de Chile',
    password: 'Password',
    connect: 'Connect',
    connecting: 'Connecting to Banco de Chile',
    mfa: 'Enter your verification code',
    code: 'Verification code',
    verify: 'Verify',
    wrong: 'That code was not correct. Check it and try again: you have 2 tries left.',
    connected: 'Connected',
    found: /We found \d+ accounts at Banco de Chile for /,
    continue: 'Continue',
    footer: 'Encrypted. The app never sees your password.',
    close: 'Close this window',
    lang: 'en',
    matches: '4 banks',
    individual: 'Personal',
    business: 'Business',
  },
} as const;

/** The element is entirely inside the viewport, and inside its frame: visible without scrolling. */
async function aboveTheFold(t: Test, page: Page, element: Locator, what: string): Promise<void> {
  const box = await element.boundingBox();
  const frame = await page.locator('[data-svc-widget] iframe').boundingBox();
  const viewport = page.viewportSize()!;
  t.ok(box && frame, `${what} is laid out`);
  const bottom = Math.min(viewport.height, frame!.y + frame!.height);
  t.ok(
    box!.y >= Math.max(0, frame!.y) &&
      box!.y + box!.height <= bottom &&
      box!.x + box!.width <= viewport.width,
    `${what} is visible without scrolling (its bottom ${Math.round(box!.y + box!.height)} <= ${Math.round(bottom)})`,
  );
}

if (requireChromium(t)) {
  t.test('the widget in Spanish and English, embedded and hosted', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const pages = await widgetPages(t, { language: 'es' });
    const { app, sk, back: callback, problems, token } = pages;

    for (const locale of ['es', 'en'] as const) {
      for (const [size, viewport] of [
        ['desktop', DESKTOP],
        ['phone', PHONE],
      ] as const) {
        t.test(`${locale} at ${size} size: bank, RUT and clave, a wrong code, success`, async (t) => {
          const words = WORDS[locale];
          const shot = (name: string) =>
            page.screenshot({ path: join(SHOTS, `${locale}-${size}-${name}.png`) });
          // The browser speaks the other language: the token's locale wins.
          const { page, frame } = await pages.embedded(
            t,
            locale === 'es' ? 'en-US' : 'es-CL',
            { locale },
            viewport,
          );
          await screen(frame, words.picker);
          t.equal(
            await frame.locator('html').getAttribute('lang'),
            words.lang,
            '<html lang> names the language',
          );
          t.equal(await frame.locator('#widget-close').getAttribute('aria-label'), words.close);
          t.equal(
            await frame
              .locator('.widget-footer')
              .textContent()
              .then((s) => s?.trim()),
            words.footer,
          );
          const search = frame.getByLabel(words.search);
          t.equal(
            await search.getAttribute('placeholder'),
            words.placeholder,
            'the search box has a placeholder',
          );
          const chile = frame.getByRole('button', { name: 'Banco de Chile' });
          t.equal(await chile.locator('.bank-badge').textContent(), 'Ch', 'a monogram for each bank');
          const colours = await frame.locator('.bank-badge').evaluateAll((badges) =>
            // eslint-disable-next-line @typescript-eslint/no-explicit-any
            badges.map((badge) => (globalThis as any).getComputedStyle(badge).backgroundColor),
          );
          t.ok(new Set(colours).size >= 6, `the marks differ in colour (${new Set(colours).size} colours)`);
          await shot('1-picker');

          // Keyboard: search, Tab to the only match, Enter.
          await search.fill('chile');
          t.equal(await frame.locator('#bank-count').textContent(), words.matches, 'the search filters');
          t.equal(await frame.locator('.bank:visible').count(), 4);
          await page.keyboard.press('Tab');
          await page.keyboard.press('Enter');
          await screen(frame, words.login);
          const connect = frame.getByRole('button', { name: words.connect, exact: true });
          const consent = frame.locator('#consent');
          for (const holder of [words.business, words.individual]) {
            await frame.getByLabel(holder, { exact: true }).check();
            const form = `${size}, ${holder}`;
            await aboveTheFold(t, page, consent, `the consent text (${form})`);
            await aboveTheFold(t, page, connect, `${words.connect} (${form})`);
            const [text, button] = [await consent.boundingBox(), await connect.boundingBox()];
            t.ok(text!.y + text!.height <= button!.y, `the consent text is read before the button (${form})`);
            if (holder === words.business) await shot('2-credentials-business');
          }
          await frame.getByLabel('RUT', { exact: true }).pressSequentially('111111111');
          await frame.getByLabel(words.password, { exact: true }).fill('sandbox-mfa');
          await shot('2-credentials');
          await connect.click();
          await screen(frame, words.connecting);
          await runSyncs(app);

          await screen(frame, words.mfa);
          const code = frame.getByLabel(words.code);
          await shot('3-mfa');
          await code.fill('000000');
          await frame.getByRole('button', { name: words.verify }).click();
          await frame.locator('#progress-status').waitFor({ timeout: HANG_GUARD_MS });
          await runSyncs(app);
          await frame.locator('#mfa-message', { hasText: words.wrong }).waitFor({ timeout: HANG_GUARD_MS });
          t.equal(await code.getAttribute('aria-invalid'), 'true', 'the wrong code is flagged');
          await shot('4-mfa-wrong-code');
          await code.fill('123456');
          await code.press('Enter');
          // The code is taken (the page shows progress) before the worker runs.
          await frame.locator('#progress-status').waitFor({ timeout: HANG_GUARD_MS });
          await runSyncs(app);
          await screen(frame, words.connected);
          t.match(await frame.locator('main').textContent(), words.found);
          await shot('5-success');
          await frame.getByRole('button', { name: words.continue }).click();
          const link = await app.request('POST', `/v1/exchange_tokens/${await pages.successToken(page)}`, {
            key: sk,
          });
          t.equal(link.status, 200, 'the exchange token exchanges');
          t.match(link.body, { object: 'link', bank_id: 'bancochile', status: 'active' });
        });
      }
    }

    t.test("no locale on the token: the browser's language", async (t) => {
      for (const [browser, heading, frameTitle] of [
        ['es-CL', 'Elige tu banco', 'Conecta tu banco'],
        ['en-GB', 'Select your bank', 'Connect your bank'],
      ] as const) {
        const { page, frame } = await pages.embedded(t, browser, {});
        await screen(frame, heading);
        t.equal(await page.locator('[data-svc-widget] iframe').getAttribute('title'), frameTitle);
      }
    });

    t.test('hosted: widget_url as a top-level page returns to redirect_uri', async (t) => {
      const page = await pages.browserPage(t, 'es-CL', PHONE);

      // Without a redirect_uri there is nowhere to hand the result: a clear page, not a 400.
      const plain = await token({});
      const answer = await page.goto(plain.widget_url);
      t.equal(answer?.status(), 200);
      await screen(page, 'Abre esto desde la app');
      await page.screenshot({ path: join(SHOTS, 'hosted-phone-no-redirect.png') });

      const hosted = await token({ redirect_uri: `${callback.url}/return/bank?user=7`, state: 'xyz-123' });
      await page.goto(hosted.widget_url);
      await screen(page, 'Elige tu banco');
      t.equal(
        await page.locator('meta[name="viewport"]').getAttribute('content'),
        'width=device-width, initial-scale=1',
      );
      t.equal(
        await page.locator('#widget-close').isVisible(),
        false,
        'no close button: nothing to close into',
      );
      await page.screenshot({ path: join(SHOTS, 'hosted-phone-picker.png') });
      await page.getByRole('button', { name: 'Banco Santander Chile' }).click();
      await screen(page, 'Ingresa a Banco Santander Chile');
      await page.getByLabel('RUT', { exact: true }).pressSequentially('222222222');
      await page.getByLabel('Clave', { exact: true }).fill('sandbox');
      await page.getByRole('button', { name: 'Conectar', exact: true }).click();
      await screen(page, 'Conectando con Banco Santander Chile');
      await runSyncs(app);
      await screen(page, 'Conectado');
      await page.screenshot({ path: join(SHOTS, 'hosted-phone-success.png') });
      await page.getByRole('button', { name: 'Continuar' }).click();
      await page.waitForURL(`${callback.url}/return/bank?**`, { timeout: HANG_GUARD_MS });
      await page.getByRole('heading', { name: 'De vuelta en la app' }).waitFor();
      const landed = callback.hits.at(-1)!;
      t.equal(landed.pathname, '/return/bank');
      t.equal(landed.searchParams.get('user'), '7');
      t.equal(landed.searchParams.get('state'), 'xyz-123', 'the state comes back unchanged');
      const exchangeToken = landed.searchParams.get('exchange_token')!;
      t.match(exchangeToken, /^et_[0-9A-Za-z]{40}$/);
      const link = await app.request('POST', `/v1/exchange_tokens/${exchangeToken}`, { key: sk });
      t.equal(link.status, 200, 'the exchange token from the redirect exchanges');
      t.match(link.body, { object: 'link', bank_id: 'santander', status: 'active' });

      // A failure offers the way back too, with the error and the state.
      const failing = await token({
        redirect_uri: `${callback.url}/return/bank`,
        state: 'st-2',
        locale: 'en',
      });
      await page.setViewportSize(DESKTOP);
      await page.goto(failing.widget_url);
      await screen(page, 'Select your bank');
      await page.getByRole('button', { name: 'Bci' }).click();
      await page.getByLabel('RUT', { exact: true }).pressSequentially('222222222');
      await page.getByLabel('Password', { exact: true }).fill('sandbox-unavailable');
      await page.getByRole('button', { name: 'Connect', exact: true }).click();
      await screen(page, 'Connecting to Bci');
      await runSyncs(app);
      await screen(page, 'Bci is not responding');
      await page.screenshot({ path: join(SHOTS, 'hosted-desktop-error.png') });
      await page.getByRole('button', { name: 'Back to the app' }).click();
      await page.waitForURL(`${callback.url}/return/bank?**`, { timeout: HANG_GUARD_MS });
      const exited = callback.hits.at(-1)!;
      t.same(Object.fromEntries(exited.searchParams), {
        error: 'exited',
        state: 'st-2',
        error_code: 'bank_unavailable',
      });
    });

    t.test('nothing went wrong in the pages', async (t) => {
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
