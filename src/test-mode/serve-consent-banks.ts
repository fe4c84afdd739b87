import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa, { type Middleware } from 'koa';
import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import type { Logger } from '../logging/logger.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { CONSENT_BANK_PATH, startConsentBank, type ConsentBank } from '../consent-bank/consent-bank.js';
import type { ConsentBankFaults } from '../consent-bank/faults.js';
import { registerWithSimulatedBank } from './self-registration.js';
import { pagesPort } from './pages-port.js';
import { sandboxCustomerData } from './sandbox-customer-data.js';
import type { CustomerData } from '../consent-bank/customer-data.js';
import { CONSENT_CALLBACK_PATH } from '../banks/consent/register.js';
import { BRASIL_SANDBOX_BANK_ID } from '../banks/institutions.js';
import { startBrasilBank, type BrasilBank } from '../consent-bank/brasil/brasil-bank.js';
import type { BankOptions } from '../consent-bank/bank-profile.js';
import { hasTestCa, readTestCa, testCaDirectory, type TestCaMaterial } from '../consent-bank/test-ca.js';

/*
 * The simulated bank as the API process serves it (docs/open-finance.md, "How test mode works"). It is an aid
 * for test mode, the API is the product: a missing test CA or a taken port turns the bank off with one
 * warning that says what to do, as a taken metrics port does, rather than crash-looping the API.
 */

export interface ServeBankInput {
  config: Readonly<Config>;
  db: Database;
  clock: Clock;
  logger: Logger;
  /**
   * The appliance's public base URL, as a browser reaches it: the consent callback the appliance registers
   * lives under it. The bank's own pages never do (issue 44, item 7): they have an origin of their own.
   */
  publicBaseUrl: string;
  /** Tests: a port other than the configured one (0 picks a free one). */
  port?: number;
  /** Tests: the pages' port, when not `pagesPort(port)` (a restart on the port a free one got). */
  pagesPort?: number;
  faults?: ConsentBankFaults;
  /** Tests: the Brazilian bank's choices (its response kinds and client authentication methods). */
  brasil?: Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'>;
  /** Tests: the banks' customers, when not the credential sandbox's (a name changed at the bank). */
  data?: CustomerData;
}

export interface ServedBank {
  bank: ConsentBank;
  /** The Brazilian bank (`fapi1-br`), beside the Chilean one; null when its port was taken. */
  brasil: BrasilBank | null;
  ca: TestCaMaterial;
  /** The banks' browser face: their own origin, never the appliance's. */
  pages: PagesListener;
}

/**
 * The banks' sign-in and consent pages on an origin of their own (issue 44, item 7). On the appliance's
 * origin a simulated bank's pages (a sign-in form that takes any sandbox RUT, an OIDC provider's cookies)
 * shared the console's origin, its cookies' scope and its CSP's `'self'`, on a live appliance too. Their
 * own port on `sandbox.consentBank.host` (loopback by default) keeps them apart, as a real bank's are.
 */
export interface PagesListener {
  /** `http://127.0.0.1:8445`: the banks' issuers live under it. */
  url: string;
  serve(pages: Middleware): void;
  close(): Promise<void>;
}

async function listenForPages(host: string, port: number): Promise<PagesListener> {
  const app = new Koa({ proxy: false });
  app.silent = true;
  let served: Middleware | null = null;
  app.use((ctx, next) => (served ? served(ctx, next) : next()));
  const server = createServer(app.callback());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    serve(pages) {
      served = pages;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The Brazilian bank's mTLS port: the next one after the Chilean bank's (8444 by default), or a free one when
 * the Chilean bank's is 0. Its pages share the appliance's address under their own path.
 */
export function brasilPort(chileanPort: number): number {
  return chileanPort === 0 ? 0 : chileanPort + 1;
}

/** The test CA of `home`, or why there is none (a sentence naming `svc install`). */
export function loadServedCa(home: string): TestCaMaterial | string {
  const directory = testCaDirectory(home);
  if (!hasTestCa(directory))
    return `no test CA in ${directory}; run \`svc install\` (it makes one and keeps everything else)`;
  try {
    return readTestCa(directory);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return `cannot read the test CA in ${directory} (${code}); run \`svc install\` again`;
  }
}

/** The bank's mTLS address as configured, `https://127.0.0.1:8443`, for start-up lines. */
export function configuredBankAddress(config: Readonly<Config>): string {
  const { host, port } = config.sandbox.consentBank;
  return `https://${host}:${port}${CONSENT_BANK_PATH}`;
}

/**
 * Starts the simulated bank when the configuration enables it, or answers null having said why not. The app
 * must serve `bank.browserMiddleware` before `registerServedBank`: registration reads the bank's discovery
 * document through the appliance's own address.
 */
export async function serveConsentBank(input: ServeBankInput): Promise<ServedBank | null> {
  const settings = input.config.sandbox.consentBank;
  if (!settings.enabled) return null;
  const log = input.logger.child({ component: 'consent-bank' });
  const ca = loadServedCa(input.config.home);
  if (typeof ca === 'string') {
    log.warn(`simulated consent bank off: ${ca}`);
    return null;
  }
  const port = input.port ?? settings.port;
  const address = `${settings.host}:${port}`;
  let pages: PagesListener;
  try {
    pages = await listenForPages(settings.host, input.pagesPort ?? pagesPort(port));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EADDRINUSE' && code !== 'EACCES' && code !== 'EADDRNOTAVAIL') throw error;
    const at = `${settings.host}:${pagesPort(port)}`;
    log.warn(
      { consent_bank_pages: at },
      `simulated consent bank off: its pages cannot listen on ${at} (${code}); another svc serve may hold it, or set sandbox.consentBank.port (SVC_SANDBOX_CONSENT_BANK_PORT; its pages take that port + 2) to a free port, or 0`,
    );
    return null;
  }
  // Both banks' customers are the credential sandbox's people (the adapter is test mode's, not the banks').
  // What both banks are started with: the same CA, clock, data and pages' origin; each its own mTLS port.
  const shared = {
    db: input.db,
    ca,
    clock: input.clock,
    logger: input.logger,
    publicBaseUrl: pages.url,
    data: input.data ?? sandboxCustomerData(),
    host: settings.host,
  };
  try {
    const bank = await startConsentBank({ ...shared, port, faults: input.faults });
    let brasil: BrasilBank | null = null;
    try {
      brasil = await startBrasilBank({ ...shared, ...input.brasil, port: brasilPort(port) });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EADDRINUSE' && code !== 'EACCES' && code !== 'EADDRNOTAVAIL') {
        await bank.close();
        throw error;
      }
      log.warn(
        `simulated Brazilian consent bank off: cannot listen on ${settings.host}:${brasilPort(port)} (${code})`,
      );
    }
    return { bank, brasil, ca, pages };
  } catch (error) {
    await pages.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EADDRINUSE' && code !== 'EACCES' && code !== 'EADDRNOTAVAIL') throw error;
    // Several API processes or `svc serve` instances on one machine: only one holds the port.
    log.warn(
      { consent_bank: address },
      `simulated consent bank off: cannot listen on ${address} (${code}); another svc serve may hold it, or set sandbox.consentBank.port (SVC_SANDBOX_CONSENT_BANK_PORT) to a free port, or 0`,
    );
    return null;
  }
}

/**
 * Registers the appliance with the bank it serves (once; again only when an address or the certificate
 * changed). A failure is logged and leaves the bank running: the next start tries again.
 */
export async function registerServedBank(
  served: ServedBank,
  input: {
    db: Database;
    secrets: SecretBox;
    clock: Clock;
    logger: Logger;
    publicBaseUrl: string;
    config: Readonly<Config>;
  },
): Promise<string | null> {
  const redirectUri = `${input.publicBaseUrl.replace(/\/$/, '')}${CONSENT_CALLBACK_PATH}`;
  try {
    const row = await registerWithSimulatedBank({
      db: input.db,
      secrets: input.secrets,
      bank: served.bank,
      ca: served.ca,
      redirectUri,
      clientName: input.config.widget.name,
      now: input.clock.now(),
    });
    if (served.brasil)
      await registerWithSimulatedBank({
        db: input.db,
        secrets: input.secrets,
        bank: served.brasil,
        ca: served.ca,
        redirectUri,
        clientName: input.config.widget.name,
        now: input.clock.now(),
        bankId: BRASIL_SANDBOX_BANK_ID,
      });
    return row.id;
  } catch (error) {
    input.logger.warn(
      { component: 'consent-bank', err: (error as Error).message },
      'simulated consent bank: the appliance could not register with it; test mode cannot link bancoabierto until the next start',
    );
    return null;
  }
}

/**
 * The API process's whole part: starts the bank and its pages' listener (the API is already serving: it
 * does not wait the second the bank takes), then registers the appliance. Never throws: whatever keeps the
 * bank from running is one log line and null, and the API serves on.
 */
export async function serveAndRegister(
  input: ServeBankInput & { secrets: SecretBox },
): Promise<(ConsentBank & { brasil: BrasilBank | null; pagesUrl: string }) | null> {
  let served: ServedBank | null;
  try {
    served = await serveConsentBank(input);
  } catch (error) {
    input.logger.error(
      { component: 'consent-bank', err: (error as Error).message },
      'simulated consent bank off: it failed to start',
    );
    return null;
  }
  if (!served) return null;
  const { bank, brasil, pages } = served;
  const chile = bank.browserMiddleware;
  const closeChile = bank.close.bind(bank);
  pages.serve(brasil ? (ctx, next) => chile(ctx, () => brasil.browserMiddleware(ctx, next)) : chile);
  await registerServedBank(served, input);
  // One handle for the process: the Chilean bank as it was, closing the Brazilian one and the pages with it.
  return Object.assign(bank, {
    brasil,
    pagesUrl: pages.url,
    async close() {
      await Promise.all([closeChile(), brasil?.close(), pages.close()]);
    },
  });
}

/**
 * The base URL the bank's issuer lives under: the configured one, unless the API was asked for any free port
 * (`api.port` 0), when only the listener knows it.
 */
export function bankPublicBase(config: Readonly<Config>, listenerUrl: string): string {
  return new URL(config.api.baseUrl).port === '0' ? listenerUrl : config.api.baseUrl;
}
