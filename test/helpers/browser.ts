import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's Chromium, driven by playwright-core (which downloads no browser). */
export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';

/** Fails the file when Chromium is missing: a browser test is never skipped. */
export function requireChromium(t: Test): boolean {
  if (existsSync(CHROMIUM)) return true;
  t.fail(
    `Chromium is not installed at ${CHROMIUM}. Install Debian's package (apt-get install -y chromium), as .ci/run does, or point SVC_CHROMIUM at a Chromium binary. This test is never skipped.`,
  );
  return false;
}

/**
 * A headless Chromium with a fresh profile, closed and removed when the test ends. The flags keep it off
 * the network: without the background-networking ones it tries Google's hosts at every start.
 */
export async function launchChromium(
  t: Test,
  viewport = { width: 1280, height: 800 },
  /** The browser's language (navigator.language and Accept-Language); English unless a test says. */
  locale = 'en-US',
): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'svc-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    locale,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  return context;
}

/** One HTML page at `/` on a loopback port of its own (so its own origin), closed when the test ends. */
export async function servePage(t: Test, html: string): Promise<string> {
  const server: Server = createServer((request, response) => {
    if (request.url === '/favicon.ico') return void response.writeHead(204).end();
    response.writeHead(request.url === '/' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    response.end(request.url === '/' ? html : 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
