import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { fetch as undiciFetch } from 'undici';
import type { BrowserContext, Frame, FrameLocator, Page } from 'playwright-core';
import { findGrantRow, openGrantId } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { seriousViolations } from '../helpers/axe.js';
import { launchChromium, requireChromium, servePage } from '../helpers/browser.js';
import { grantManagementToken, mtlsAgent, testCa } from '../helpers/consent-bank.js';
import { HANG_GUARD_MS, createTenant, runSyncs, startTestApp, type TestApp } from '../helpers/harness.js';

/*
 * A consent bank linked through the widget in Debian's Chromium: the simulated Open Finance bank the API
 * serves in test mode (Banco Abierto). Embedded, the widget's consent screen opens the bank in a popup where
 * the person signs in and confirms; the popup comes back to the widget's callback, says so and closes, and
 * the widget (polling) goes on to the first sync and the exchange token. Hosted, the window itself goes to
 * the bank and back, then to the app's redirect_uri. A refusal at the bank is worded in both windows and
 * makes nothing; deleting the link revokes its grant at the bank. Screenshots land in
 * test-output/screenshots/consent/ (docs/images/widget/consent-*.png are copies of some).
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
/** The size widget.js asks for its popup (window.open features); the test's context gives every page its own. */
const POPUP = { width: 520, height: 760 };
const BANK = 'Banco Abierto (simulado)';
const generous = {
  sync_write: { perMinute: 10_000, burst: 1_000 },
  resource_write: { perMinute: 10_000, burst: 1_000 },
  read: { perMinute: 10_000, burst: 1_000 },
  widget_tokens: { perMinute: 10_000, burst: 1_000 },
};

/** The widget's words (src/widget/messages.ts, consent-screen.ts) and the bank's (src/consent-bank/pages.ts). */
const WORDS = {
  es: {
    browser: 'es-CL',
    picker: 'Elige tu banco',
    consentTitle: 'Vas a compartir con Bank Connect',
    items: [
      'Tus cuentas: número, tipo y titular',
      'Los saldos de tus cuentas',
      'Tus movimientos: cargos y abonos',
      'Tus tarjetas de crédito: cupo, deuda y compras',
    ],
    duration: /^Durante 12 meses, hasta el \d{1,2} de [a-z]+ de \d{4}$/,
    bankLead: 'Bank Connect pide acceso a estos datos:',
    bankUntil: /^Hasta el (\d{1,2} de [a-z]+ de \d{4})\.$/,
    go: `Continuar a ${BANK}`,
    awaiting: `Autoriza en ${BANK}`,
    reopen: `Abrir ${BANK} de nuevo`,
    bankSignIn: 'Ingresa a tu banco',
    bankPassword: 'Clave',
    bankSignInButton: 'Ingresar',
    bankConsent: 'Autoriza el acceso a tus datos',
    approve: 'Autorizar',
    refuse: 'Rechazar',
    returned: 'Autorizado',
    connecting: `Conectando con ${BANK}`,
    connected: 'Conectado',
    found: /^Encontramos \d+ cuentas en Banco Abierto \(simulado\)/,
    continue: 'Continuar',
    denied: `No autorizaste a ${BANK}`,
    tryAgain: 'Intentar de nuevo',
  },
  en: {
    browser: 'en-GB',
    picker: 'Select your bank',
    consentTitle: 'You are about to share with Bank Connect',
    items: [
      'Your accounts: number, type and holder',
      'Your account balances',
      'Your movements: debits and credits',
      'Your credit cards: limit, amount owed and purchases',
    ],
    duration: /^For 12 months, until \d{1,2} [A-Z][a-z]+ \d{4}$/,
    bankLead: 'Bank Connect asks to see:',
    bankUntil: /^Until (\d{1,2} [A-Z][a-z]+ \d{4})\.$/,
    go: `Continue to ${BANK}`,
    awaiting: `Authorise at ${BANK}`,
    reopen: `Open ${BANK} again`,
    bankSignIn: 'Sign in to your bank',
    bankPassword: 'Password',
    bankSignInButton: 'Sign in',
    bankConsent: 'Allow access to your data',
    approve: 'Approve',
    refuse: 'Refuse',
    returned: 'Authorised',
    connecting: `Connecting to ${BANK}`,
    connected: 'Connected',
    found: /^We found \d+ accounts at Banco Abierto \(simulado\)/,
    continue: 'Continue',
    denied: `You did not authorise ${BANK}`,
    tryAgain: 'Try again',
  },
} as const;
type Locale = keyof typeof WORDS;

/** Waits for the screen whose heading is `name`; a timeout says which screen was there instead. */
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

/** The customer's page: embed.js from the API, and a log of what reached it. */
function customerHtml(apiUrl: string): string {
  return `<!doctype html>
<html lang="es"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>App del cliente</title></head>
<body style="font-family: system-ui; padding: 24px"><h1>App del cliente</h1>
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

/** The app's redirect_uri: a local server that records what the hosted widget brought back. */
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

/** How far the document is wider than its window: a sideways scroll when above 0. */
async function overflow(target: Page | Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
}

/** How far the document is taller than its window: the screen does not fit when above 0. */
async function overflowDown(target: Page | Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollHeight - window.innerHeight')) as number;
}

if (requireChromium(t)) {
  t.test('a consent bank through the widget in headless Chromium', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const back = await startReturn(t);
    const app: TestApp = await startTestApp(t, 'sqlite', {
      consentBank: true,
      config: { widget: { allowedRedirectUris: [`${back.url}/return/`] } },
    });
    t.ok(app.consentBank, 'the API serves the simulated consent bank');
    const tenant = await createTenant(app, { rateLimits: generous });
    const sk = tenant.keys.sk_test.secret;
    const customer = await servePage(t, customerHtml(app.url));
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

    const problems: string[] = [];
    const watch = (page: Page) => {
      page.on('pageerror', (error) => problems.push(`page error: ${page.url()}: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${page.url()}: ${message.text()}`);
      });
    };
    const token = async (body: Record<string, unknown>) => {
      const created = await app.request('POST', '/v1/widget_tokens', { key: sk, body });
      if (created.status !== 200) throw new Error(created.text);
      // widget_url names the configured base URL; the test app listens on a port chosen at start.
      const url = new URL(created.body.widget_url);
      return { token: created.body.token as string, widget_url: `${app.url}${url.pathname}${url.search}` };
    };
    /** A browser speaking `locale`, on the customer's page with the widget open on the bank list. */
    const embedded = async (t: Test, locale: Locale, body: Record<string, unknown> = {}) => {
      const context = await launchChromium(t, DESKTOP, WORDS[locale].browser);
      const page = await context.newPage();
      watch(page);
      await page.goto(customer);
      await page.evaluate(`window.openWidget(${JSON.stringify((await token({ locale, ...body })).token)})`);
      const frame = page.frameLocator('[data-svc-widget] iframe');
      await screen(frame, WORDS[locale].picker);
      return { context, page, frame };
    };
    /** Continue on the consent screen: the popup it opens, at the size widget.js asks for. */
    const toThePopup = async (context: BrowserContext, frame: FrameLocator, locale: Locale) => {
      const opened = context.waitForEvent('page', { timeout: HANG_GUARD_MS });
      await frame.getByRole('button', { name: WORDS[locale].go }).click();
      const popup = await opened;
      watch(popup);
      // The page that closes itself (the callback's) asks to, and the test closes it once it has looked:
      // a timer would race the screenshot on a loaded machine. (Playwright's clock is the whole context's.)
      await popup.addInitScript(
        'window.__close = window.close.bind(window); window.close = () => { window.__closeAsked = true; };',
      );
      await popup.setViewportSize(POPUP);
      return popup;
    };
    /**
     * The person at the bank's pages: sign-in (unless the bank remembers them from a moment ago), then the
     * consent page, where `decision` picks the button.
     */
    const atTheBank = async (
      t: Test,
      bank: Page,
      locale: Locale,
      options: { rut?: string; decision?: 'approve' | 'refuse'; shots?: string; signedIn?: boolean } = {},
    ) => {
      const words = WORDS[locale];
      if (!options.signedIn) {
        await screen(bank, words.bankSignIn);
        t.match(new URL(bank.url()).pathname, /^\/sandbox\/consent-bank\//, "the bank's own page");
        t.equal(await bank.locator('header').textContent(), BANK, 'named as the widget named it');
        if (options.shots) await bank.screenshot({ path: join(SHOTS, `${options.shots}-bank-sign-in.png`) });
        await bank.getByLabel('RUT', { exact: true }).fill(options.rut ?? '11.111.111-1');
        await bank.getByLabel(words.bankPassword, { exact: true }).fill('sandbox');
        await bank.getByRole('button', { name: words.bankSignInButton }).click();
      }
      await screen(bank, words.bankConsent);
      // The widget promised "esta misma lista": the bank words what is shared as the widget did, names the
      // requester by the operator's widget name (its registration's client_name) and dates the end alike.
      t.same(await bank.locator('main li').allTextContents(), words.items, 'the same list as the widget');
      const paragraphs = await bank.locator('main p').allTextContents();
      t.ok(
        paragraphs.includes(words.bankLead),
        `the requester is the widget's name: ${paragraphs.join(' | ')}`,
      );
      const until = paragraphs.map((p) => words.bankUntil.exec(p)?.[1]).find(Boolean);
      t.ok(until, `the end dated as the widget dates it: ${paragraphs.join(' | ')}`);
      if (options.shots) await bank.screenshot({ path: join(SHOTS, `${options.shots}-bank-consent.png`) });
      const decision = options.decision ?? 'approve';
      await bank.getByRole('button', { name: decision === 'approve' ? words.approve : words.refuse }).click();
      return until;
    };
    /** The popup's last page, after the bank sent it back: `heading`, then it asks to close, and closes. */
    const popupCloses = async (t: Test, popup: Page, heading: string, shot?: string) => {
      await screen(popup, heading);
      t.equal(new URL(popup.url()).pathname, '/widget/consent/callback', "the widget's callback");
      if (shot) await popup.screenshot({ path: join(SHOTS, `${shot}.png`) });
      // A function, not a string: the widget's CSP refuses eval, which Playwright uses for a string.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      await popup.waitForFunction(() => (globalThis as any).__closeAsked === true, null, {
        timeout: HANG_GUARD_MS,
      });
      const closed = popup.waitForEvent('close', { timeout: HANG_GUARD_MS });
      await popup.evaluate('window.__close()');
      await closed;
      t.ok(popup.isClosed(), 'it asked to close itself, and could (a window its opener opened)');
    };
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
      const widget = page.frames().find((f) => f.url().startsWith(`${app.url}/widget?`))!;
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

      const popup = await toThePopup(context, frame, 'es');
      await screen(frame, words.awaiting);
      t.ok(await frame.getByRole('button', { name: words.reopen }).isVisible(), 'a way back to the popup');
      await page.screenshot({ path: join(SHOTS, 'es-desktop-2-awaiting.png') });
      const bankUntil = await atTheBank(t, popup, 'es', { shots: 'es-popup-3' });
      t.ok(
        bankUntil && duration.endsWith(`hasta el ${bankUntil}`),
        `the same end date: ${duration} / ${bankUntil}`,
      );
      await popupCloses(t, popup, words.returned, 'es-popup-4-returned');

      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
      await screen(frame, words.connected);
      t.match(await frame.locator('main p.lead').textContent(), words.found);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-5-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      await page.waitForFunction('window.events.some((e) => e.kind === "success")', null, {
        timeout: HANG_GUARD_MS,
      });
      const [success] = (await page.evaluate('window.events')) as { exchangeToken: string }[];
      const linkId = await exchange(t, success!.exchangeToken, 'consent-es');

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
      const widget = page.frames().find((f) => f.url().startsWith(`${app.url}/widget?`))!;
      t.equal(await overflowDown(widget), 0, 'the whole screen fits the widget at desktop size');
      await page.screenshot({ path: join(SHOTS, 'en-desktop-1-consent.png') });
      const first = await toThePopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await screen(first, words.bankSignIn);
      // The person closes the bank's window before signing in: the widget offers it again.
      await first.close();
      await frame.getByRole('button', { name: words.reopen }).click();
      await screen(frame, words.consentTitle);
      const popup = await toThePopup(context, frame, 'en');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'en', { rut: '12.345.678-5', shots: 'en-popup-3' });
      await popupCloses(t, popup, words.returned, 'en-popup-4-returned');
      await screen(frame, words.connecting);
      t.equal(await runSyncs(app), 1);
      await screen(frame, words.connected);
      t.match(await frame.locator('main p.lead').textContent(), words.found);
      await page.screenshot({ path: join(SHOTS, 'en-desktop-5-success.png') });
      await frame.getByRole('button', { name: words.continue }).click();
      await page.waitForFunction('window.events.some((e) => e.kind === "success")', null, {
        timeout: HANG_GUARD_MS,
      });
      const [success] = (await page.evaluate('window.events')) as { exchangeToken: string }[];
      await exchange(t, success!.exchangeToken, 'consent-en');
    });

    t.test('the person refuses at the bank: both windows say so, nothing is made; then agrees', async (t) => {
      const words = WORDS.es;
      const before = await links();
      const { context, page, frame } = await embedded(t, 'es', { external_user_id: 'refuses-first' });
      await frame.getByRole('button', { name: BANK }).click();
      await screen(frame, words.consentTitle);
      const popup = await toThePopup(context, frame, 'es');
      await screen(frame, words.awaiting);
      await atTheBank(t, popup, 'es', { decision: 'refuse' });
      await screen(popup, words.denied);
      t.match(await popup.locator('main').textContent(), /No se compartió nada ni se creó una conexión/);
      await popup.screenshot({ path: join(SHOTS, 'es-popup-refused.png') });
      await popupCloses(t, popup, words.denied);
      await screen(frame, words.denied);
      await page.screenshot({ path: join(SHOTS, 'es-desktop-refused.png') });
      t.equal(await links(), before, 'no link');

      // Trying again goes back to the consent screen; the bank remembers the sign-in and asks only to confirm.
      await frame.getByRole('button', { name: words.tryAgain }).click();
      await screen(frame, words.consentTitle);
      const again = await toThePopup(context, frame, 'es');
      await atTheBank(t, again, 'es', { signedIn: true });
      await popupCloses(t, again, words.returned);
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
      const popup = await toThePopup(context, frame, 'en');
      await atTheBank(t, popup, 'en', { rut: '33.333.333-3' });
      await popupCloses(t, popup, words.denied);
      await screen(frame, words.denied);
      t.ok(
        await frame.getByRole('button', { name: words.tryAgain }).isVisible(),
        'the widget offers a retry',
      );
      t.equal(await links(), before, 'no link');
    });

    for (const locale of ['es', 'en'] as const) {
      // In English the token names the bank (institution_id): the widget opens on its consent screen.
      const named = locale === 'en';
      t.test(`hosted, ${locale}: this window goes to the bank, back, then to the redirect_uri`, async (t) => {
        const words = WORDS[locale];
        const context = await launchChromium(t, PHONE, words.browser);
        const page = await context.newPage();
        watch(page);
        const state = `st-${locale}`;
        const hosted = await token({
          locale,
          redirect_uri: `${back.url}/return/bank?user=${locale}`,
          state,
          external_user_id: `hosted-${locale}`,
          ...(named ? { institution_id: 'bancoabierto' } : {}),
        });
        await page.goto(hosted.widget_url);
        if (named) {
          await page.locator('h1').waitFor({ timeout: HANG_GUARD_MS });
          t.equal(
            await page.locator('h1').textContent(),
            words.consentTitle,
            'the first screen is the consent',
          );
        } else {
          await screen(page, words.picker);
          await page.getByRole('button', { name: BANK }).click();
          await screen(page, words.consentTitle);
        }
        t.equal(await overflow(page), 0, 'no sideways scroll on a phone');
        await page.screenshot({ path: join(SHOTS, `hosted-${locale}-phone-1-consent.png`) });
        await page.getByRole('button', { name: words.go }).click();
        await atTheBank(t, page, locale, { shots: `hosted-${locale}-phone-2` });
        await screen(page, words.connecting);
        t.equal(new URL(page.url()).pathname, '/widget/consent/callback', 'back at the widget');
        t.equal(await runSyncs(app), 1);
        await screen(page, words.connected);
        await page.screenshot({ path: join(SHOTS, `hosted-${locale}-phone-3-success.png`) });
        await page.getByRole('button', { name: words.continue }).click();
        await page.waitForURL(`${back.url}/return/bank?**`, { timeout: HANG_GUARD_MS });
        const landed = back.hits.at(-1)!;
        t.equal(landed.searchParams.get('user'), locale, "the redirect_uri's own query is kept");
        t.equal(landed.searchParams.get('state'), state, 'the state comes back unchanged');
        const exchangeToken = landed.searchParams.get('exchange_token')!;
        t.match(exchangeToken, /^et_[0-9A-Za-z]{40}$/);
        await exchange(t, exchangeToken, `hosted-${locale}`);
      });
    }

    t.test('nothing went wrong in the pages', async (t) => {
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    });
  });
}
