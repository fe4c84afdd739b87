import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { BrowserContext, FrameLocator, Page } from 'playwright-core';
import { findGrantRow, openGrantId } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { seriousViolations } from '../helpers/axe.js';
import { launchChromium, requireChromium, servePage } from '../helpers/browser.js';
import { HANG_GUARD_MS, createTenant, runSyncs, startTestApp, type TestApp } from '../helpers/harness.js';

/*
 * An Open Finance Brasil bank (`fapi1-br`) linked through the widget in Debian's Chromium: the simulated
 * Banco Aberto the API serves in test mode. The consent screen asks for the person's CPF (checked as typed,
 * and by the server); the bank's pages open in a popup (embedded) or in this window (hosted), where the
 * person signs in with the CPF and authorises; the bank answers with a signed JARM, and the widget goes on to
 * the first sync and the exchange token. Screenshots land in test-output/screenshots/consent-br/.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent-br');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const POPUP = { width: 520, height: 760 };
const BANK = 'Banco Aberto (simulado, Brasil)';
const CPF = '529.982.247-25';
const generous = {
  sync_write: { perMinute: 10_000, burst: 1_000 },
  resource_write: { perMinute: 10_000, burst: 1_000 },
  read: { perMinute: 10_000, burst: 1_000 },
  widget_tokens: { perMinute: 10_000, burst: 1_000 },
};

/** The widget's words (src/widget/messages.ts, consent-screen.ts) and the bank's (consent-bank/brasil/pages.ts). */
const WORDS = {
  es: {
    browser: 'es-CL',
    consentTitle: 'Vas a compartir con Bank Connect',
    go: `Continuar a ${BANK}`,
    cpfInvalid: 'No es un CPF válido: revisa sus 11 dígitos.',
    cpfValid: 'CPF válido',
    awaiting: `Autoriza en ${BANK}`,
    connecting: `Conectando con ${BANK}`,
    connected: 'Conectado',
    continue: 'Continuar',
    returned: 'Autorizado',
    denied: `No autorizaste a ${BANK}`,
  },
  en: {
    browser: 'en-GB',
    consentTitle: 'You are about to share with Bank Connect',
    go: `Continue to ${BANK}`,
    cpfInvalid: 'This is not a valid CPF: check its 11 digits.',
    cpfValid: 'Valid CPF',
    awaiting: `Authorise at ${BANK}`,
    connecting: `Connecting to ${BANK}`,
    connected: 'Connected',
    continue: 'Continue',
    returned: 'Authorised',
    denied: `You did not authorise ${BANK}`,
  },
} as const;
type Locale = keyof typeof WORDS;
/** The bank's own pages speak Portuguese, or English to an English browser. */
const BANK_WORDS = {
  pt: {
    signIn: 'Entre no seu banco',
    password: 'Senha',
    button: 'Entrar',
    consent: 'Autorize o compartilhamento dos seus dados',
    approve: 'Autorizar',
    refuse: 'Recusar',
  },
  en: {
    signIn: 'Sign in to your bank',
    password: 'Password',
    button: 'Sign in',
    consent: 'Allow sharing your data',
    approve: 'Approve',
    refuse: 'Refuse',
  },
} as const;

async function screen(frame: FrameLocator | Page, name: string | RegExp): Promise<void> {
  try {
    await frame.getByRole('heading', { level: 1, name }).waitFor({ timeout: HANG_GUARD_MS });
  } catch (error) {
    const shown = await frame
      .locator('h1')
      .allTextContents()
      .catch(() => ['(none)']);
    throw new Error(`no screen "${String(name)}"; the heading is ${JSON.stringify(shown)}`, { cause: error });
  }
}

function customerHtml(apiUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Customer app</title></head>
<body style="font-family: system-ui; padding: 24px"><h1>Customer app</h1>
<script src="${apiUrl}/widget/embed.js"></script>
<script>
  window.events = [];
  window.openWidget = (token) => SvcWidget.open({
    token,
    onSuccess: (exchangeToken, metadata) => window.events.push({ kind: 'success', exchangeToken, metadata }),
    onExit: (info) => window.events.push({ kind: 'exit', reason: info.reason, error_code: info.error_code }),
  });
</script></body></html>`;
}

async function startReturn(t: Test): Promise<{ url: string; hits: URL[] }> {
  const hits: URL[] = [];
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/favicon.ico') return void response.writeHead(204).end();
    hits.push(url);
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><html lang="en"><title>Back in the app</title><h1>Back in the app</h1>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

/** How far the document is wider / taller than its window: a scroll when above 0. */
async function overflow(target: Page | import('playwright-core').Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
}
async function overflowDown(target: Page | import('playwright-core').Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollHeight - window.innerHeight')) as number;
}

if (requireChromium(t)) {
  t.test('an Open Finance Brasil bank through the widget in headless Chromium', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const back = await startReturn(t);
    const app: TestApp = await startTestApp(t, 'sqlite', {
      consentBank: true,
      config: { widget: { allowedRedirectUris: [`${back.url}/return/`] } },
    });
    const brasil = app.consentBank!.brasil!;
    t.ok(brasil, 'the API serves the simulated Brazilian bank');
    const tenant = await createTenant(app, { rateLimits: generous });
    const sk = tenant.keys.sk_test.secret;
    const customer = await servePage(t, customerHtml(app.url));
    const links = async () => Number((await app.db.knex('links').count({ n: '*' }).first())!.n);

    const problems: string[] = [];
    const watch = (page: Page) => {
      page.on('pageerror', (error) => problems.push(`page error: ${page.url()}: ${error.message}`));
      page.on('console', (message) => {
        // The widget's own 400 for a CPF the server refuses is an answer it words, not a fault.
        if (message.type() === 'error' && !/status of 400/.test(message.text()))
          problems.push(`console: ${page.url()}: ${message.text()}`);
      });
    };
    const token = async (body: Record<string, unknown>) => {
      const created = await app.request('POST', '/v1/widget_tokens', { key: sk, body });
      if (created.status !== 200) throw new Error(created.text);
      const url = new URL(created.body.widget_url);
      return { token: created.body.token as string, widget_url: `${app.url}${url.pathname}${url.search}` };
    };
    const toThePopup = async (context: BrowserContext, frame: FrameLocator, locale: Locale) => {
      const opened = context.waitForEvent('page', { timeout: HANG_GUARD_MS });
      await frame.getByRole('button', { name: WORDS[locale].go }).click();
      const popup = await opened;
      watch(popup);
      await popup.addInitScript(
        'window.__close = window.close.bind(window); window.close = () => { window.__closeAsked = true; };',
      );
      await popup.setViewportSize(POPUP);
      return popup;
    };
    /** The person at the bank's pages: sign-in with the CPF, then the consent page's button. */
    const atTheBank = async (
      t: Test,
      bank: Page,
      language: keyof typeof BANK_WORDS,
      options: { cpf?: string; decision?: 'approve' | 'refuse'; shots?: string } = {},
    ) => {
      const words = BANK_WORDS[language];
      await screen(bank, words.signIn);
      t.match(new URL(bank.url()).pathname, /^\/sandbox\/consent-bank-br\//, "the Brazilian bank's own page");
      if (options.shots) await bank.screenshot({ path: join(SHOTS, `${options.shots}-bank-sign-in.png`) });
      await bank.getByLabel('CPF', { exact: true }).fill(options.cpf ?? CPF);
      await bank.getByLabel(words.password, { exact: true }).fill('sandbox');
      await bank.getByRole('button', { name: words.button }).click();
      await screen(bank, words.consent);
      t.match(
        await bank.locator('main').textContent(),
        /529\.982\.247-25|111\.444\.777-35/,
        'it names the customer',
      );
      if (options.shots) await bank.screenshot({ path: join(SHOTS, `${options.shots}-bank-consent.png`) });
      const decision = options.decision ?? 'approve';
      await bank.getByRole('button', { name: decision === 'approve' ? words.approve : words.refuse }).click();
    };
    const popupCloses = async (t: Test, popup: Page, heading: string, shot?: string) => {
      await screen(popup, heading);
      t.equal(new URL(popup.url()).pathname, '/widget/consent/callback', "the widget's callback");
      if (shot) await popup.screenshot({ path: join(SHOTS, `${shot}.png`) });
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      await popup.waitForFunction(() => (globalThis as any).__closeAsked === true, null, {
        timeout: HANG_GUARD_MS,
      });
      const closed = popup.waitForEvent('close', { timeout: HANG_GUARD_MS });
      await popup.evaluate('window.__close()');
      await closed;
    };
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
      const context = await launchChromium(t, DESKTOP, words.browser);
      const page = await context.newPage();
      watch(page);
      await page.goto(customer);
      const opened = await token({ locale: 'en', institution_id: 'bancoabierto-br' });
      await page.evaluate(`window.openWidget(${JSON.stringify(opened.token)})`);
      const frame = page.frameLocator('[data-svc-widget] iframe');
      await screen(frame, words.consentTitle);
      const widget = page.frames().find((f) => f.url().startsWith(`${app.url}/widget?`))!;
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

      const popup = await toThePopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'en', { shots: 'en-popup-2' });
      await popupCloses(t, popup, words.returned, 'en-popup-3-returned');
      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
      await screen(frame, words.connected);
      await page.screenshot({ path: join(SHOTS, 'en-desktop-4-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      await page.waitForFunction('window.events.some((e) => e.kind === "success")', null, {
        timeout: HANG_GUARD_MS,
      });
      const [success] = (await page.evaluate('window.events')) as { exchangeToken: string }[];
      const linkId = await linkAndData(t, success!.exchangeToken);

      const consentId = openGrantId((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
      t.equal((await brasil.consent(consentId))?.status, 'AUTHORISED', 'the bank holds the consent');
      t.equal((await app.request('DELETE', `/v1/links/${linkId}`, { key: sk })).status, 200);
      t.ok((await revokeDueGrants(app.services)) >= 1, "the scheduler's revoke step ran");
      t.equal((await brasil.consent(consentId))?.status, 'REJECTED', 'the consent is revoked at the bank');
    });

    t.test('embedded, in Spanish: the bank refuses every consent of 390.533.447-05', async (t) => {
      const words = WORDS.es;
      const before = await links();
      const context = await launchChromium(t, DESKTOP, words.browser);
      const page = await context.newPage();
      watch(page);
      await page.goto(customer);
      await page.evaluate(`window.openWidget(${JSON.stringify((await token({ locale: 'es' })).token)})`);
      const frame = page.frameLocator('[data-svc-widget] iframe');
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
      const widget = page.frames().find((f) => f.url().startsWith(`${app.url}/widget?`))!;
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
      const popup = await toThePopup(context, frame, 'es');
      await screen(popup, BANK_WORDS.pt.signIn);
      await popup.getByLabel('CPF', { exact: true }).fill('390.533.447-05');
      await popup.getByLabel(BANK_WORDS.pt.password, { exact: true }).fill('sandbox');
      await popup.getByRole('button', { name: BANK_WORDS.pt.button }).click();
      await screen(popup, BANK_WORDS.pt.consent);
      await popup.getByRole('button', { name: BANK_WORDS.pt.approve }).click();
      await popupCloses(t, popup, words.denied, 'es-popup-refused');
      await screen(frame, words.denied);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-refused.png') });
      t.equal(await links(), before, 'no link');
    });

    t.test('hosted, on a phone in Spanish: this window goes to the bank and back', async (t) => {
      const words = WORDS.es;
      const context = await launchChromium(t, PHONE, words.browser);
      const page = await context.newPage();
      watch(page);
      const hosted = await token({
        locale: 'es',
        redirect_uri: `${back.url}/return/br`,
        state: 'st-br',
        institution_id: 'bancoabierto-br',
      });
      await page.goto(hosted.widget_url);
      await screen(page, words.consentTitle);
      t.equal(await overflow(page), 0, 'no sideways scroll on a phone');
      await page.getByLabel('CPF', { exact: true }).fill('111.444.777-35');
      await page.screenshot({ path: join(SHOTS, 'hosted-es-phone-1-consent.png') });
      await page.getByRole('button', { name: words.go }).click();
      await atTheBank(t, page, 'pt', { cpf: '111.444.777-35', shots: 'hosted-es-phone-2' });
      await screen(page, words.connecting);
      t.equal(new URL(page.url()).pathname, '/widget/consent/callback', 'back at the widget');
      t.equal(await runSyncs(app), 1);
      await screen(page, words.connected);
      await page.screenshot({ path: join(SHOTS, 'hosted-es-phone-3-success.png') });
      await page.getByRole('button', { name: words.continue }).click();
      await page.waitForURL(`${back.url}/return/br?**`, { timeout: HANG_GUARD_MS });
      const landed = back.hits.at(-1)!;
      t.equal(landed.searchParams.get('state'), 'st-br');
      await linkAndData(t, landed.searchParams.get('exchange_token')!);
    });

    t.test('nothing went wrong in the pages', async (t) => {
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
