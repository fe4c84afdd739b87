import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { findGrantRow, openGrantId } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { seriousViolations } from '../helpers/axe.js';
import { requireChromium } from '../helpers/browser.js';
import { BRASIL, consentWidgetWords } from '../helpers/consent-countries.js';
import { runSyncs } from '../helpers/harness.js';
import { DESKTOP, PHONE, overflow, overflowDown, screen, widgetPages } from '../helpers/widget-browser.js';

/*
 * An Open Finance Brasil bank (`fapi1-br`) linked through the widget in Debian's Chromium: the simulated
 * Banco Aberto the API serves in test mode. The consent screen asks for the person's CPF (checked as typed,
 * and by the server); the bank's pages open in a popup (embedded) or in this window (hosted), where the
 * person signs in with the CPF and authorises; the bank answers with a signed JARM, and the widget goes on to
 * the first sync and the exchange token. The steps of the trip are Chile's too (test/helpers/widget-browser.ts):
 * what is Brazil's is checked here. Screenshots land in test-output/screenshots/consent-br/.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent-br');
const BANK = BRASIL.bankName;
const CPF = BRASIL.users.holder;

/** The widget's words (src/widget/messages.ts, consent-screen.ts) around the Brazilian bank. */
const WORDS = {
  es: {
    ...consentWidgetWords(BRASIL, 'es'),
    cpfInvalid: 'No es un CPF válido: revisa sus 11 dígitos.',
    cpfValid: 'CPF válido',
  },
  en: {
    ...consentWidgetWords(BRASIL, 'en'),
    cpfInvalid: 'This is not a valid CPF: check its 11 digits.',
    cpfValid: 'Valid CPF',
  },
} as const;

if (requireChromium(t)) {
  t.test('an Open Finance Brasil bank through the widget in headless Chromium', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    // The widget's own 400 for a CPF the server refuses is an answer it words, not a fault.
    const pages = await widgetPages(t, { consentBank: true, expectedConsole: /status of 400/ });
    const { app, sk, problems } = pages;
    const brasil = app.consentBank!.brasil!;
    t.ok(brasil, 'the API serves the simulated Brazilian bank');
    const links = async () => Number((await app.db.knex('links').count({ n: '*' }).first())!.n);

    const { toPopup, atTheBank, closes, hosted } = pages.consent(BRASIL, { shots: SHOTS });
    /** The link an exchange token names, with its accounts (BRL) and movements, as a business reads them. */
    const linkAndData = async (t: Test, exchangeToken: string) => {
      const link = await app.request('POST', `/v1/exchange_tokens/${exchangeToken}`, { key: sk });
      t.equal(link.status, 200, 'the exchange token exchanges');
      t.match(link.body, { object: 'link', bank_id: 'bancoabierto-br', status: 'active' });
      const linkId = link.body.id as string;
      const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
      t.ok(accounts.body.length >= 3, `the accounts are readable (${accounts.body.length})`);
      t.ok(
        accounts.body.every((a: { currency: string }) => ['BRL', 'USD'].includes(a.currency)),
        'in BRL (a USD account stays USD)',
      );
      const checking = accounts.body.find(
        (a: { type: string; currency: string }) => a.type === 'checking' && a.currency === 'BRL',
      );
      const movements = await app.request('GET', `/v1/accounts/${checking.id}/movements?per_page=5`, {
        key: sk,
      });
      t.equal(movements.body.length, 5, 'and its movements');
      return linkId;
    };

    t.test('embedded, in English: the CPF, the bank in a popup, success, data, revoke', async (t) => {
      const words = WORDS.en;
      const { context, page, frame } = await pages.embedded(t, words.browser, {
        locale: 'en',
        institution_id: BRASIL.bankId,
      });
      await screen(frame, words.consentTitle);
      const widget = pages.widgetFrame(page);
      const cpf = frame.getByLabel('CPF', { exact: true });
      t.equal(await widget.evaluate('document.activeElement.id'), 'cpf', 'the focus is on the CPF field');
      t.same(await seriousViolations(widget), [], 'no serious or critical accessibility violation');
      t.equal(await overflow(widget), 0, 'no sideways scroll at desktop size');
      const down = await overflowDown(widget);
      t.equal(down, 0, `the whole screen fits the widget at 1280×800 (${down} px over)`);
      await page.screenshot({ path: join(SHOTS, 'en-desktop-1-consent.png') });

      // A CPF whose check digits are wrong: said at once, and nothing leaves for the bank.
      const pagesBefore = context.pages().length;
      await cpf.fill('529.982.247-26');
      t.equal(await frame.locator('#cpf-message').textContent(), words.cpfInvalid);
      await frame.getByRole('button', { name: words.go }).click();
      await screen(frame, words.consentTitle);
      t.equal(await cpf.getAttribute('aria-invalid'), 'true');
      t.equal(await widget.evaluate('document.activeElement.id'), 'cpf', 'back on the field');
      t.equal(context.pages().length, pagesBefore, 'no popup opened');
      await page.screenshot({ path: join(SHOTS, 'en-desktop-1b-cpf-invalid.png') });

      await cpf.fill(CPF);
      t.equal(await frame.locator('#cpf-message').textContent(), words.cpfValid);
      await page.setViewportSize(PHONE);
      await frame.getByRole('button', { name: words.go }).waitFor();
      t.equal(await overflow(widget), 0, 'no sideways scroll at phone size');
      await page.screenshot({ path: join(SHOTS, 'en-phone-1-consent.png') });
      await page.setViewportSize(DESKTOP);

      const popup = await toPopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'en', { shots: 'en-popup-2' });
      await closes(t, popup, words.returned, 'en-popup-3-returned');
      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
      await screen(frame, words.connected);
      await page.screenshot({ path: join(SHOTS, 'en-desktop-4-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      const linkId = await linkAndData(t, await pages.successToken(page));

      const consentId = openGrantId((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
      t.equal((await brasil.consent(consentId))?.status, 'AUTHORISED', 'the bank holds the consent');
      t.equal((await app.request('DELETE', `/v1/links/${linkId}`, { key: sk })).status, 200);
      t.ok((await revokeDueGrants(app.services)) >= 1, "the scheduler's revoke step ran");
      t.equal((await brasil.consent(consentId))?.status, 'REJECTED', 'the consent is revoked at the bank');
    });

    t.test('embedded, in Spanish: the bank refuses every consent of 390.533.447-05', async (t) => {
      const words = WORDS.es;
      const before = await links();
      const { context, page, frame } = await pages.embedded(t, words.browser, { locale: 'es' });
      // Picked from the list (a way back to it on the screen then): consent banks come first, marked.
      const names = await frame.locator('.bank-list .bank-name').allTextContents();
      t.same(names.slice(0, 2), ['Banco Abierto (simulado)', BANK], 'the consent banks lead the list');
      t.match(
        await frame.locator('.bank-list li').nth(1).innerText(),
        'autorizas en tu banco, sin dar tu clave',
        'marked as a consent bank',
      );
      t.equal(await frame.locator('.bank-consent').count(), 2, 'and only they are');
      await frame.getByRole('button', { name: BANK }).click();
      await screen(frame, words.consentTitle);
      const widget = pages.widgetFrame(page);
      // The whole screen, its close button included, in the 1280×800 overlay: also with the CPF's message.
      const fits = async (when: string) => {
        const down = await overflowDown(widget);
        t.equal(down, 0, `es: the consent screen fits at 1280×800 ${when} (${down} px over)`);
        const close = await widget.evaluate(
          "(() => { const r = document.getElementById('widget-close').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; })()",
        );
        t.ok(close, `es: the close button is in view ${when}`);
      };
      await fits('as it opens');
      await frame.getByLabel('CPF', { exact: true }).fill('529.982.247-26');
      await fits('with a CPF refused');
      await page.screenshot({ path: join(SHOTS, 'es-desktop-1-consent.png') });
      await frame.getByLabel('CPF', { exact: true }).fill('390.533.447-05');
      await fits('with a CPF accepted');
      const popup = await toPopup(context, frame, 'es');
      await atTheBank(t, popup, 'es', { user: BRASIL.users.refusedByBank });
      await closes(t, popup, words.denied, 'es-popup-refused');
      await screen(frame, words.denied);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-refused.png') });
      t.equal(await links(), before, 'no link');
    });

    t.test('hosted, on a phone in Spanish: this window goes to the bank and back', async (t) => {
      const landed = await hosted(t, 'es', {
        returnTo: '/return/br',
        state: 'st-br',
        named: true,
        user: '111.444.777-35',
        shots: 'hosted-es-phone',
      });
      await linkAndData(t, landed.searchParams.get('exchange_token')!);
    });

    t.test('nothing went wrong in the pages', async (t) => {
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
