import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { BrowserContext, Frame, FrameLocator, Page } from 'playwright-core';
import { launchChromium, servePage } from './browser.js';
import {
  bankPageWords,
  consentWidgetWords,
  type ConsentCountry,
  type WidgetLocale,
} from './consent-countries.js';
import {
  HANG_GUARD_MS,
  RAISED_LIMITS,
  createTenant,
  runSyncs,
  startTestApp,
  type TestApp,
} from './harness.js';

/*
 * The widget in Debian's Chromium, as the browser tests drive it: the API in-process with a tenant, a customer's
 * page of its own origin that opens the widget with embed.js, the app's redirect_uri that records what the
 * hosted widget brings back, and every page's script errors collected. For a consent bank, the steps of the
 * person's trip (the popup, the bank's pages, the way back) take a country (consent-countries.ts), so that
 * each country's trip is walked by the same steps.
 */

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
/** The size widget.js asks for its popup (window.open features); the test's context gives every page its own. */
export const POPUP = { width: 520, height: 760 };

/** Waits for the screen whose heading is `name`; a timeout says which screen was there instead. */
export async function screen(frame: FrameLocator | Page, name: string | RegExp): Promise<void> {
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

/** How far the document is wider than its window: a sideways scroll when above 0. */
export async function overflow(target: Page | Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
}

/** How far the document is taller than its window: the screen does not fit when above 0. */
export async function overflowDown(target: Page | Frame): Promise<number> {
  return (await target.evaluate('document.documentElement.scrollHeight - window.innerHeight')) as number;
}

type PageLanguage = 'es' | 'en';
const APP_WORDS = {
  es: { customer: 'App del cliente', back: 'De vuelta en la app' },
  en: { customer: 'Customer app', back: 'Back in the app' },
} as const;

/** The customer's page: embed.js from the API, and a log of what reached it (`window.events`). */
function customerHtml(apiUrl: string, language: PageLanguage): string {
  const title = APP_WORDS[language].customer;
  return `<!doctype html>
<html lang="${language}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title></head>
<body style="font-family: system-ui; padding: 24px"><h1>${title}</h1>
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
async function startReturn(t: Test, language: PageLanguage): Promise<{ url: string; hits: URL[] }> {
  const hits: URL[] = [];
  const heading = APP_WORDS[language].back;
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/favicon.ico') return void response.writeHead(204).end();
    hits.push(url);
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><html lang="${language}"><title>${heading}</title><h1>${heading}</h1>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

type ConsentBankOption = NonNullable<Parameters<typeof startTestApp>[2]>['consentBank'];

export interface WidgetPages {
  app: TestApp;
  sk: string;
  /** The app's redirect_uri server: `${back.url}/return/…` is allowed. */
  back: { url: string; hits: URL[] };
  /** The customer's page, which opens the widget with `window.openWidget(token)`. */
  customer: string;
  /** Script errors, and console errors but the expected ones, of every page watched. */
  problems: string[];
  watch(page: Page): void;
  /** A widget token of the tenant's secret key, with widget_url on the test app's own address. */
  token(body: Record<string, unknown>): Promise<{ token: string; widget_url: string }>;
  /** A browser speaking `browser` at `viewport`, on the customer's page with the widget opened by `body`. */
  embedded(
    t: Test,
    browser: string,
    body: Record<string, unknown>,
    viewport?: { width: number; height: number },
  ): Promise<{ context: BrowserContext; page: Page; frame: FrameLocator }>;
  /** A browser speaking `browser` at `viewport` (a phone unless given), a watched page in it. */
  browserPage(t: Test, browser: string, viewport?: { width: number; height: number }): Promise<Page>;
  /** The widget's own frame in the customer's page (for what a frame locator cannot evaluate). */
  widgetFrame(page: Page): Frame;
  /** The exchange token the customer's page received from `onSuccess`, once it has. */
  successToken(page: Page): Promise<string>;
  /** The steps of a person's trip to `country`'s consent bank (consentPages). */
  consent<T = void>(country: ConsentCountry, options: ConsentPagesOptions<T>): ConsentPages<T>;
}

/**
 * The API (SQLite, a moved clock; the simulated consent bank when asked) with a tenant whose limits a browser
 * test does not reach, the customer's page, the app's redirect_uri, and the pages' problems. `language`: the
 * customer's page's and the redirect_uri page's; `expectedConsole`: console errors that are an answer the
 * widget words, not a fault.
 */
export async function widgetPages(
  t: Test,
  options: { consentBank?: ConsentBankOption; language?: PageLanguage; expectedConsole?: RegExp } = {},
): Promise<WidgetPages> {
  const language = options.language ?? 'en';
  const back = await startReturn(t, language);
  const app = await startTestApp(t, 'sqlite', {
    consentBank: options.consentBank,
    config: { widget: { allowedRedirectUris: [`${back.url}/return/`] } },
  });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const customer = await servePage(t, customerHtml(app.url, language));
  const problems: string[] = [];
  const watch = (page: Page) => {
    page.on('pageerror', (error) => problems.push(`page error: ${page.url()}: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      if (options.expectedConsole?.test(message.text())) return;
      problems.push(`console: ${page.url()}: ${message.text()}`);
    });
  };
  const token = async (body: Record<string, unknown>) => {
    const created = await app.request('POST', '/v1/widget_tokens', { key: sk, body });
    if (created.status !== 200) throw new Error(created.text);
    // widget_url names the configured base URL; the test app listens on a port chosen at start.
    const url = new URL(created.body.widget_url);
    return { token: created.body.token as string, widget_url: `${app.url}${url.pathname}${url.search}` };
  };
  const browserPage = async (t: Test, browser: string, viewport = PHONE) => {
    const context = await launchChromium(t, viewport, browser);
    const page = await context.newPage();
    watch(page);
    return page;
  };
  const pages: WidgetPages = {
    app,
    sk,
    back,
    customer,
    problems,
    watch,
    token,
    browserPage,
    async embedded(t, browser, body, viewport = DESKTOP) {
      const page = await browserPage(t, browser, viewport);
      await page.goto(customer);
      await page.evaluate(`window.openWidget(${JSON.stringify((await token(body)).token)})`);
      return { context: page.context(), page, frame: page.frameLocator('[data-svc-widget] iframe') };
    },
    widgetFrame: (page) => page.frames().find((frame) => frame.url().startsWith(`${app.url}/widget?`))!,
    async successToken(page) {
      await page.waitForFunction('window.events.some((e) => e.kind === "success")', null, {
        timeout: HANG_GUARD_MS,
      });
      const events = (await page.evaluate('window.events')) as { kind: string; exchangeToken: string }[];
      return events.find((event) => event.kind === 'success')!.exchangeToken;
    },
    consent: (country, consent) => consentPages(pages, country, consent),
  };
  return pages;
}

/** The steps of a person's trip to one country's consent bank in Chromium (WidgetPages.consent). */
export interface ConsentPages<T> {
  /** Continue on the consent screen: the popup it opens, at the size widget.js asks for. */
  toPopup(context: BrowserContext, frame: FrameLocator, locale: WidgetLocale): Promise<Page>;
  /**
   * The person at the bank's pages in a browser speaking `locale`: sign-in as `user` (the country's holder
   * unless given; skipped when the bank remembers them from a moment ago), then the consent page, which names
   * them and is looked at by the country's `onConsent`, before `decision` picks the button. `shots`: the
   * name the pages' screenshots start with. Answers what `onConsent` found.
   */
  atTheBank(
    t: Test,
    bank: Page,
    locale: WidgetLocale,
    options?: { user?: string; decision?: 'approve' | 'refuse'; shots?: string; signedIn?: boolean },
  ): Promise<T | undefined>;
  /** The popup's last page, after the bank sent it back: `heading`, then it asks to close, and closes. */
  closes(t: Test, popup: Page, heading: string, shot?: string): Promise<void>;
  /**
   * The hosted widget (widget_url as a top-level page, on a phone unless `viewport` says): the consent screen
   * (the first, when the token names the bank; else picked from the list), the CPF where the country asks
   * one, this window to the bank and back to the widget, the first sync, then the app's redirect_uri
   * `returnTo` with the state and an exchange token. Answers the URL the app got.
   */
  hosted(
    t: Test,
    locale: WidgetLocale,
    options: {
      returnTo: string;
      state: string;
      named: boolean;
      shots: string;
      user?: string;
      body?: Record<string, unknown>;
      viewport?: { width: number; height: number };
    },
  ): Promise<URL>;
}

/**
 * The steps of a person's trip to a country's consent bank in Chromium, with screenshots in the folder
 * `shots`; `onConsent` is what the test checks on every visit to the bank's consent page (what the country's
 * bank shows beyond the customer's name).
 */
export interface ConsentPagesOptions<T> {
  shots: string;
  onConsent?: (t: Test, bank: Page, locale: WidgetLocale) => Promise<T>;
}

function consentPages<T>(
  pages: WidgetPages,
  country: ConsentCountry,
  options: ConsentPagesOptions<T>,
): ConsentPages<T> {
  const shot = (name: string) => join(options.shots, `${name}.png`);
  const steps: ConsentPages<T> = {
    async toPopup(context, frame, locale) {
      const opened = context.waitForEvent('page', { timeout: HANG_GUARD_MS });
      await frame.getByRole('button', { name: consentWidgetWords(country, locale).go }).click();
      const popup = await opened;
      pages.watch(popup);
      // The page that closes itself (the callback's) asks to, and the test closes it once it has looked:
      // a timer would race the screenshot on a loaded machine. (Playwright's clock is the whole context's.)
      await popup.addInitScript(
        'window.__close = window.close.bind(window); window.close = () => { window.__closeAsked = true; };',
      );
      await popup.setViewportSize(POPUP);
      return popup;
    },

    async atTheBank(t, bank, locale, step = {}) {
      const words = bankPageWords(country, locale);
      const user = step.user ?? country.users.holder;
      if (!step.signedIn) {
        await screen(bank, words.signIn);
        t.match(new URL(bank.url()).pathname, country.pagesPath, "the bank's own page");
        t.equal(await bank.locator('header').textContent(), country.bankName, 'named as the widget named it');
        if (step.shots) await bank.screenshot({ path: shot(`${step.shots}-bank-sign-in`) });
        await bank.getByLabel(country.idLabel, { exact: true }).fill(user);
        await bank.getByLabel(words.password, { exact: true }).fill('sandbox');
        await bank.getByRole('button', { name: words.button }).click();
      }
      await screen(bank, words.consent);
      t.match(await bank.locator('main').textContent(), user, 'it names the customer');
      const found = await options.onConsent?.(t, bank, locale);
      if (step.shots) await bank.screenshot({ path: shot(`${step.shots}-bank-consent`) });
      const decision = step.decision ?? 'approve';
      await bank.getByRole('button', { name: decision === 'approve' ? words.approve : words.refuse }).click();
      return found;
    },

    async closes(t, popup, heading, name) {
      await screen(popup, heading);
      t.equal(new URL(popup.url()).pathname, '/widget/consent/callback', "the widget's callback");
      if (name) await popup.screenshot({ path: shot(name) });
      // A function, not a string: the widget's CSP refuses eval, which Playwright uses for a string.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      await popup.waitForFunction(() => (globalThis as any).__closeAsked === true, null, {
        timeout: HANG_GUARD_MS,
      });
      const closed = popup.waitForEvent('close', { timeout: HANG_GUARD_MS });
      await popup.evaluate('window.__close()');
      await closed;
      t.ok(popup.isClosed(), 'it asked to close itself, and could (a window its opener opened)');
    },

    async hosted(t, locale, trip) {
      const words = consentWidgetWords(country, locale);
      const viewport = trip.viewport ?? PHONE;
      const page = await pages.browserPage(t, words.browser, viewport);
      const hosted = await pages.token({
        locale,
        redirect_uri: `${pages.back.url}${trip.returnTo}`,
        state: trip.state,
        ...trip.body,
        ...(trip.named ? { institution_id: country.bankId } : {}),
      });
      await page.goto(hosted.widget_url);
      if (trip.named) {
        await page.locator('h1').waitFor({ timeout: HANG_GUARD_MS });
        t.equal(
          await page.locator('h1').textContent(),
          words.consentTitle,
          'the first screen is the consent',
        );
      } else {
        await screen(page, words.picker);
        await page.getByRole('button', { name: country.bankName }).click();
        await screen(page, words.consentTitle);
      }
      t.equal(await overflow(page), 0, `no sideways scroll at ${viewport.width} px`);
      if (country.idField === 'cpf')
        await page.getByLabel('CPF', { exact: true }).fill(trip.user ?? country.users.holder);
      await page.screenshot({ path: shot(`${trip.shots}-1-consent`) });
      await page.getByRole('button', { name: words.go }).click();
      await steps.atTheBank(t, page, locale, { user: trip.user, shots: `${trip.shots}-2` });
      await screen(page, words.connecting);
      t.equal(new URL(page.url()).pathname, '/widget/consent/callback', 'back at the widget');
      t.equal(await runSyncs(pages.app), 1, 'the first sync runs through the bank API');
      await screen(page, words.connected);
      await page.screenshot({ path: shot(`${trip.shots}-3-success`) });
      await page.getByRole('button', { name: words.continue }).click();
      const returnPath = trip.returnTo.split('?')[0];
      await page.waitForURL(`${pages.back.url}${returnPath}?**`, { timeout: HANG_GUARD_MS });
      const landed = pages.back.hits.at(-1)!;
      t.equal(landed.searchParams.get('state'), trip.state, 'the state comes back unchanged');
      t.match(landed.searchParams.get('exchange_token'), /^et_[0-9A-Za-z]{40}$/, 'with an exchange token');
      return landed;
    },
  };
  return steps;
}
