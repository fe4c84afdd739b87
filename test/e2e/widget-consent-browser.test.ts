import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { fetch as undiciFetch } from 'undici';
import type { Page } from 'playwright-core';
import { findGrantRow, openGrantId } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { pauseBank } from '../../src/banks/budget/store.js';
import type { ManualClock } from '../../src/clock/clock.js';
import { seriousViolations } from '../helpers/axe.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { grantManagementToken, mtlsAgent, testCa } from '../helpers/consent-bank.js';
import { CHILE, consentWidgetWords } from '../helpers/consent-countries.js';
import { HANG_GUARD_MS, runSyncs } from '../helpers/harness.js';
import { DESKTOP, PHONE, overflow, overflowDown, screen, widgetPages } from '../helpers/widget-browser.js';

/*
 * A consent bank linked through the widget in Debian's Chromium: the simulated Open Finance bank the API
 * serves in test mode (Banco Abierto). Embedded, the widget's consent screen opens the bank in a popup where
 * the person signs in and confirms; the popup comes back to the widget's callback, says so and closes, and
 * the widget (polling) goes on to the first sync and the exchange token. Hosted, the window itself goes to
 * the bank and back, then to the app's redirect_uri. A refusal at the bank is worded in both windows and
 * makes nothing; deleting the link revokes its grant at the bank. Screenshots land in
 * test-output/screenshots/consent/ (docs/images/widget/consent-*.png are copies of some). The steps of the
 * trip are Brazil's too (test/helpers/widget-browser.ts): what is Chile's is checked here.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent');
const BANK = CHILE.bankName;

/** The widget's words (src/widget/messages.ts, consent-screen.ts) and the bank's (src/consent-bank/pages.ts). */
const WORDS = {
  es: {
    ...consentWidgetWords(CHILE, 'es'),
    items: [
      'Tu nombre, como lo tiene registrado el banco',
      'Tus cuentas: número, tipo y titular',
      'Los saldos de tus cuentas',
      'Tus movimientos: cargos y abonos',
      'Tus tarjetas de crédito: cupo, deuda y compras',
    ],
    duration: /^Durante 12 meses, hasta el \d{1,2} de [a-z]+ de \d{4}$/,
    bankLead: 'Bank Connect pide acceso a estos datos:',
    bankUntil: /^Hasta el (\d{1,2} de [a-z]+ de \d{4})\.$/,
    found: /^Encontramos \d+ cuentas en Banco Abierto \(simulado\)/,
  },
  en: {
    ...consentWidgetWords(CHILE, 'en'),
    items: [
      'Your name, as the bank has it on record',
      'Your accounts: number, type and holder',
      'Your account balances',
      'Your movements: debits and credits',
      'Your credit cards: limit, amount owed and purchases',
    ],
    duration: /^For 12 months, until \d{1,2} [A-Z][a-z]+ \d{4}$/,
    bankLead: 'Bank Connect asks to see:',
    bankUntil: /^Until (\d{1,2} [A-Z][a-z]+ \d{4})\.$/,
    found: /^We found \d+ accounts at Banco Abierto \(simulado\)/,
  },
} as const;
type Locale = keyof typeof WORDS;

if (requireChromium(t)) {
  t.test('a consent bank through the widget in headless Chromium', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const pages = await widgetPages(t, { consentBank: true, language: 'es' });
    const { app, sk, problems } = pages;
    t.ok(app.consentBank, 'the API serves the simulated consent bank');
    const agent = mtlsAgent(t, await testCa());
    /** The grant's status as the bank's Grant Management endpoint answers it, over the appliance's mTLS. */
    const grantAtBank = async (grantId: string) => {
      const bank = await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test');
      const token = await grantManagementToken(bank!.configuration);
      const response = await undiciFetch(`${app.consentBank!.mtlsBase}/grants/${grantId}`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${token}` },
      });
      return ((await response.json()) as { status: string }).status;
    };
    const links = async () => Number((await app.db.knex('links').count({ n: '*' }).first())!.n);

    /** A browser speaking `locale`, on the customer's page with the widget open on the bank list. */
    const embedded = async (t: Test, locale: Locale, body: Record<string, unknown> = {}) => {
      const opened = await pages.embedded(t, WORDS[locale].browser, { locale, ...body });
      await screen(opened.frame, WORDS[locale].picker);
      return opened;
    };
    /**
     * The widget promised "esta misma lista": the bank words what is shared as the widget did, names the
     * requester by the operator's widget name (its registration's client_name) and dates the end alike.
     * Answers the end date the bank gives.
     */
    const sameAsTheWidget = async (t: Test, bank: Page, locale: Locale) => {
      const words = WORDS[locale];
      t.same(await bank.locator('main li').allTextContents(), words.items, 'the same list as the widget');
      const paragraphs = await bank.locator('main p').allTextContents();
      t.ok(
        paragraphs.includes(words.bankLead),
        `the requester is the widget's name: ${paragraphs.join(' | ')}`,
      );
      const until = paragraphs.map((p) => words.bankUntil.exec(p)?.[1]).find(Boolean);
      t.ok(until, `the end dated as the widget dates it: ${paragraphs.join(' | ')}`);
      return until;
    };
    const { toPopup, atTheBank, closes, hosted } = pages.consent(CHILE, {
      shots: SHOTS,
      onConsent: sameAsTheWidget,
    });
    const exchange = async (t: Test, exchangeToken: string, externalUserId: string) => {
      const link = await app.request('POST', `/v1/exchange_tokens/${exchangeToken}`, { key: sk });
      t.equal(link.status, 200, 'the exchange token exchanges');
      t.match(link.body, {
        object: 'link',
        bank_id: 'bancoabierto',
        status: 'active',
        external_user_id: externalUserId,
      });
      return link.body.id as string;
    };

    t.test('embedded, in Spanish: consent screen, the bank in a popup, success, data, revoke', async (t) => {
      const words = WORDS.es;
      const { context, page, frame } = await embedded(t, 'es', { external_user_id: 'consent-es' });
      // On a phone the consent bank is in view on the list, without scrolling past the password banks.
      await page.setViewportSize(PHONE);
      const listed = await frame.getByRole('button', { name: BANK }).boundingBox();
      t.ok(
        listed && listed.y + listed.height <= PHONE.height,
        `in view on a phone (${JSON.stringify(listed)})`,
      );
      await page.screenshot({ path: join(SHOTS, 'es-phone-0-banks.png') });
      await page.setViewportSize(DESKTOP);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-0-banks.png') });
      await frame.getByRole('button', { name: BANK }).click();
      await screen(frame, words.consentTitle);
      t.same(
        await frame.locator('.consent-items li').allTextContents(),
        words.items,
        'what will be shared, one line each',
      );
      const duration = (await frame.locator('#consent-duration').textContent()) ?? '';
      t.match(duration, words.duration, 'for how long');
      const go = frame.getByRole('button', { name: words.go });
      const widget = pages.widgetFrame(page);
      t.equal(
        await widget.evaluate('document.activeElement.textContent'),
        words.go,
        'the focus is on the button to the bank',
      );
      t.same(await seriousViolations(widget), [], 'no serious or critical accessibility violation');
      t.equal(await overflow(widget), 0, 'no sideways scroll at desktop size');
      t.equal(await overflowDown(widget), 0, 'the whole screen fits the widget at desktop size');
      await page.screenshot({ path: join(SHOTS, 'es-desktop-1-consent.png') });
      await page.setViewportSize(PHONE);
      await go.waitFor();
      t.equal(await overflow(widget), 0, 'no sideways scroll at phone size');
      t.equal(await overflowDown(widget), 0, 'nor a scroll down');
      const box = await go.boundingBox();
      t.ok(box && box.y + box.height <= PHONE.height, 'the button is in view on a phone');
      await page.screenshot({ path: join(SHOTS, 'es-phone-1-consent.png') });
      await page.setViewportSize(DESKTOP);

      const popup = await toPopup(context, frame, 'es');
      await screen(frame, words.awaiting);
      t.ok(await frame.getByRole('button', { name: words.reopen }).isVisible(), 'a way back to the popup');
      await page.screenshot({ path: join(SHOTS, 'es-desktop-2-awaiting.png') });
      const bankUntil = await atTheBank(t, popup, 'es', { shots: 'es-popup-3' });
      t.ok(
        bankUntil && duration.endsWith(`hasta el ${bankUntil}`),
        `the same end date: ${duration} / ${bankUntil}`,
      );
      await closes(t, popup, words.returned, 'es-popup-4-returned');

      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
      await screen(frame, words.connected);
      t.match(await frame.locator('main p.lead').textContent(), words.found);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-5-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      const linkId = await exchange(t, await pages.successToken(page), 'consent-es');

      const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
      t.equal(accounts.status, 200);
      t.ok(accounts.body.length >= 3, `the accounts are readable (${accounts.body.length})`);
      const checking = accounts.body.find((a: { type: string }) => a.type === 'checking');
      const movements = await app.request('GET', `/v1/accounts/${checking.id}/movements?per_page=5`, {
        key: sk,
      });
      t.equal(movements.status, 200);
      t.equal(movements.body.length, 5, 'and its movements');

      const grantId = openGrantId((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
      t.equal(await grantAtBank(grantId), 'Authorised', 'the bank holds the consent');
      t.equal((await app.request('DELETE', `/v1/links/${linkId}`, { key: sk })).status, 200);
      t.equal(await grantAtBank(grantId), 'Authorised', 'the bank is told by the scheduler, not the delete');
      t.ok((await revokeDueGrants(app.services)) >= 1, "the scheduler's revoke step ran");
      t.equal(await grantAtBank(grantId), 'Revoked', 'the consent is revoked at the bank');
    });

    t.test('embedded, in English: the bank window closed early and opened again, success', async (t) => {
      const words = WORDS.en;
      const { context, page, frame } = await embedded(t, 'en', { external_user_id: 'consent-en' });
      await frame.getByRole('button', { name: BANK }).click();
      await screen(frame, words.consentTitle);
      t.same(await frame.locator('.consent-items li').allTextContents(), words.items);
      t.match(await frame.locator('#consent-duration').textContent(), words.duration);
      const widget = pages.widgetFrame(page);
      t.equal(await overflowDown(widget), 0, 'the whole screen fits the widget at desktop size');
      await page.screenshot({ path: join(SHOTS, 'en-desktop-1-consent.png') });
      const first = await toPopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await screen(first, CHILE.pages.en.signIn);
      // The person closes the bank's window before signing in: the widget offers it again.
      await first.close();
      await frame.getByRole('button', { name: words.reopen }).click();
      await screen(frame, words.consentTitle);
      const popup = await toPopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'en', { user: '12.345.678-5', shots: 'en-popup-3' });
      await closes(t, popup, words.returned, 'en-popup-4-returned');
      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1);
      await screen(frame, words.connected);
      t.match(await frame.locator('main p.lead').textContent(), words.found);
      await page.screenshot({ path: join(SHOTS, 'en-desktop-5-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      await exchange(t, await pages.successToken(page), 'consent-en');
    });

    t.test('the person refuses at the bank: both windows say so, nothing is made; then agrees', async (t) => {
      const words = WORDS.es;
      const before = await links();
      const { context, page, frame } = await embedded(t, 'es', { external_user_id: 'refuses-first' });
      await frame.getByRole('button', { name: BANK }).click();
      await screen(frame, words.consentTitle);
      const popup = await toPopup(context, frame, 'es');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'es', { decision: 'refuse' });
      await screen(popup, words.denied);
      t.match(await popup.locator('main').textContent(), /No se compartió nada ni se creó una conexión/);
      await popup.screenshot({ path: join(SHOTS, 'es-popup-refused.png') });
      await closes(t, popup, words.denied);
      await screen(frame, words.denied);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-refused.png') });
      t.equal(await links(), before, 'no link');

      // Trying again goes back to the consent screen; the bank remembers the sign-in and asks only to confirm.
      await frame.getByRole('button', { name: words.tryAgain }).click();
      await screen(frame, words.consentTitle);
      const again = await toPopup(context, frame, 'es');
      await atTheBank(t, again, 'es', { signedIn: true });
      await closes(t, again, words.returned);
      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1);
      await screen(frame, words.connected);
      t.equal(await links(), before + 1, 'one link, from the second trip');
    });

    t.test('the bank refuses the consent (33.333.333-3), in English: nothing is made', async (t) => {
      const words = WORDS.en;
      const before = await links();
      const { context, frame } = await embedded(t, 'en');
      await frame.getByRole('button', { name: BANK }).click();
      const popup = await toPopup(context, frame, 'en');
      await atTheBank(t, popup, 'en', { user: CHILE.users.refusedByBank });
      await closes(t, popup, words.denied);
      await screen(frame, words.denied);
      t.ok(
        await frame.getByRole('button', { name: words.tryAgain }).isVisible(),
        'the widget offers a retry',
      );
      t.equal(await links(), before, 'no link');
    });

    for (const locale of ['es', 'en'] as const) {
      t.test(`hosted, ${locale}: this window goes to the bank, back, then to the redirect_uri`, async (t) => {
        const landed = await hosted(t, locale, {
          returnTo: `/return/bank?user=${locale}`,
          state: `st-${locale}`,
          // In English the token names the bank (institution_id): the widget opens on its consent screen.
          named: locale === 'en',
          body: { external_user_id: `hosted-${locale}` },
          shots: `hosted-${locale}-phone`,
        });
        t.equal(landed.searchParams.get('user'), locale, "the redirect_uri's own query is kept");
        await exchange(t, landed.searchParams.get('exchange_token')!, `hosted-${locale}`);
      });
    }

    t.test(
      'a paused bank, in Spanish: the widget says until when, the bank sees nothing; then goes on',
      async (t) => {
        const words = WORDS.es;
        // Not watched: Chromium logs the start's 429 answer as a console error, which is this test's point.
        const context = await launchChromium(t, DESKTOP, words.browser);
        const page = await context.newPage();
        await page.goto(pages.customer);
        await page.evaluate(
          `window.openWidget(${JSON.stringify((await pages.token({ locale: 'es' })).token)})`,
        );
        const frame = page.frameLocator('[data-svc-widget] iframe');
        await screen(frame, words.picker);
        await frame.getByRole('button', { name: BANK }).click();
        await screen(frame, words.consentTitle);
        // The bank answered someone's sync 429 with Retry-After: 45 (bank-calls.ts pauses it for everyone).
        const clock = app.clock as ManualClock;
        const bankKey = { bankId: 'bancoabierto', mode: 'test' as const };
        await pauseBank(app.db, bankKey, clock.now() + 45_000, 'HTTP 429 with Retry-After', clock.now());
        const calls = app.consentBank!.callLog().length;
        const opened = context.waitForEvent('page', { timeout: HANG_GUARD_MS });
        await frame.getByRole('button', { name: words.go }).click();
        const blank = await opened;
        await screen(frame, `${BANK} está ocupado`);
        t.equal(
          await frame.locator('p.lead').textContent(),
          `${BANK} no puede recibir más solicitudes de esta app en este momento, así que no se le envió nada. Vuelve a intentarlo en 45 segundos.`,
          'in Spanish, with when to try again',
        );
        t.equal(app.consentBank!.callLog().length, calls, 'the bank saw nothing: no PAR');
        await page.screenshot({ path: join(SHOTS, 'es-desktop-bank-busy.png') });
        if (!blank.isClosed()) await blank.waitForEvent('close', { timeout: HANG_GUARD_MS });
        t.ok(blank.isClosed(), 'the window opened for the bank (in the click) closed again');

        clock.advance(45_000);
        await frame.getByRole('button', { name: words.tryAgain }).click();
        await screen(frame, words.consentTitle);
        const popup = await toPopup(context, frame, 'es');
        await screen(popup, CHILE.pages.local.signIn);
        t.equal(app.consentBank!.callLog().length, calls + 1, 'the bank, called again: one PAR');
        await popup.close();
      },
    );

    t.test('nothing went wrong in the pages', async (t) => {
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
