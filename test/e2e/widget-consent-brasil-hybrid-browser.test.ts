import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { HANG_GUARD_MS, createTenant, runSyncs, startTestApp } from '../helpers/harness.js';

/*
 * A Brazilian bank that offers `code id_token` only (no JARM, FAPI 1.0 Advanced §5.2.2.1), linked through the
 * hosted widget in Debian's Chromium: the bank's form_post page posts the code and the ID token back to the
 * widget's callback (OAuth 2.0 Form Post Response Mode), which checks the detached signature and goes on to
 * the first sync. Screenshots land in test-output/screenshots/consent-br-hybrid/.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent-br-hybrid');
const CPF = '529.982.247-25';

async function heading(page: Page, name: string): Promise<void> {
  await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: HANG_GUARD_MS });
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

if (requireChromium(t)) {
  t.test(
    'FAPI 1.0 Advanced §5.2.2.1: a code id_token bank through the hosted widget in Chromium',
    async (t) => {
      mkdirSync(SHOTS, { recursive: true });
      const back = await startReturn(t);
      const app = await startTestApp(t, 'sqlite', {
        consentBank: { brasil: { authorizationResponses: 'code id_token' } },
        config: { widget: { allowedRedirectUris: [`${back.url}/return/`] } },
      });
      const tenant = await createTenant(app);
      const created = await app.request('POST', '/v1/widget_tokens', {
        key: tenant.keys.sk_test.secret,
        body: {
          locale: 'en',
          redirect_uri: `${back.url}/return/br`,
          state: 'st',
          institution_id: 'bancoabierto-br',
        },
      });
      t.equal(created.status, 200, created.text);
      const widgetUrl = new URL(created.body.widget_url);
      const context = await launchChromium(t, { width: 1280, height: 800 }, 'en-GB');
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`page error: ${page.url()}: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${page.url()}: ${message.text()}`);
      });
      await page.goto(`${app.url}${widgetUrl.pathname}${widgetUrl.search}`);
      await heading(page, 'You are about to share with Bank Connect');
      await page.getByLabel('CPF', { exact: true }).fill(CPF);
      await page.getByRole('button', { name: 'Continue to Banco Aberto (simulado, Brasil)' }).click();
      await heading(page, 'Sign in to your bank');
      await page.getByLabel('CPF', { exact: true }).fill(CPF);
      await page.getByLabel('Password', { exact: true }).fill('sandbox');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await heading(page, 'Allow sharing your data');
      await page.getByRole('button', { name: 'Approve' }).click();
      await heading(page, 'Connecting to Banco Aberto (simulado, Brasil)');
      t.equal(new URL(page.url()).pathname, '/widget/consent/callback', 'posted back to the widget');
      t.equal(await runSyncs(app), 1, 'the first sync runs');
      await heading(page, 'Connected');
      await page.screenshot({ path: join(SHOTS, 'hosted-en-connected.png') });
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.waitForURL(`${back.url}/return/br?**`, { timeout: HANG_GUARD_MS });
      t.ok(back.hits.at(-1)!.searchParams.get('exchange_token'), 'the app gets its exchange token');
      t.same(problems, [], 'no script error and no Content-Security-Policy violation');
    },
  );
}
