/*
 * The simulated consent bank as the consent benches use it (consent-sync.ts, consent-budget.ts,
 * bank-fairness.ts): its browser face on a bare Koa server standing in for the appliance's, the end user's walk
 * through it, and a link made from the tokens of that walk.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa, { type Middleware } from 'koa';
import * as client from 'openid-client';
import { systemClock } from '../src/clock/clock.js';
import { startConsentBank } from '../src/consent-bank/consent-bank.js';
import { ConsentBankFaults } from '../src/consent-bank/faults.js';
import { makeTestCa } from '../src/consent-bank/test-ca.js';
import { builtInFaults, CONSENT_BANK_PASSWORD } from '../src/consent-bank/users.js';
import { parseAuthorizationDetails, validUntil } from '../src/banks/consent/authorization-details.js';
import { CONSENT_SANDBOX_BANK_ID } from '../src/banks/institutions.js';
import type { Database } from '../src/db/database.js';
import { createConsentLink } from '../src/links/consent/grants.js';
import type { SecretBox } from '../src/secrets/secret-box.js';
import { silentLogger } from '../src/logging/logger.js';
import { sandboxCustomerData } from '../src/test-mode/sandbox-customer-data.js';
import type { CustomerData } from '../src/consent-bank/customer-data.js';

export const REDIRECT_URI = 'https://app.example/callback';
export const ACTIONS = ['ReadAccounts', 'ReadBalances', 'ReadTransactions', 'ReadCreditCards'];

/** The bank's browser face on a bare Koa server, standing in for the appliance's HTTP server. */
export async function startBank(db: Database, data: CustomerData = sandboxCustomerData()) {
  const ca = await makeTestCa(Date.now());
  let mounted: Middleware = (_ctx, next) => next();
  const app = new Koa();
  app.use((ctx, next) => mounted(ctx, next));
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const bank = await startConsentBank({
    db,
    ca,
    clock: systemClock,
    logger: silentLogger,
    publicBaseUrl: appUrl,
    data,
    port: 0,
    faults: new ConsentBankFaults(builtInFaults),
  });
  mounted = bank.browserMiddleware;
  return {
    bank,
    ca,
    async close() {
      await bank.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * PAR, sign-in as `rut`, consent to `actions` and the code's exchange, by a browser without JavaScript (as
 * test/helpers/consent-bank.ts has it): redirects by hand, cookies by name.
 */
export async function walkConsent(
  configuration: client.Configuration,
  rut: string,
  actions: readonly string[] = ACTIONS,
): Promise<client.TokenEndpointResponse & client.TokenEndpointResponseHelpers> {
  const verifier = client.randomPKCECodeVerifier();
  const state = randomBytes(8).toString('hex');
  const url = await client.buildAuthorizationUrlWithPAR(configuration, {
    redirect_uri: REDIRECT_URI,
    // A refresh token comes with offline_access and prompt=consent (OpenID Connect Core §11), as the bank
    // now applies it: the budget bench refreshes every link's token.
    scope: 'openid offline_access',
    prompt: 'consent',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    grant_management_action: 'create',
    authorization_details: JSON.stringify([{ type: 'Accounts', actions }]),
  });
  const cookies = new Map<string, string>();
  const go = async (at: string, form?: Record<string, string>) => {
    const headers: Record<string, string> = { 'accept-language': 'es' };
    if (cookies.size > 0) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(at, {
      method: form ? 'POST' : 'GET',
      headers,
      body: form && new URLSearchParams(form).toString(),
      redirect: 'manual',
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    return response;
  };
  const follow = async (start: string, form?: Record<string, string>) => {
    let response = await go(start, form);
    let at = start;
    while (response.status >= 300 && response.status < 400) {
      at = new URL(response.headers.get('location')!, at).href;
      if (at.startsWith(REDIRECT_URI)) break;
      response = await go(at);
    }
    await response.body?.cancel();
    return at;
  };
  const signIn = await follow(url.href);
  const consentPage = await follow(`${signIn}/login`, { rut, password: CONSENT_BANK_PASSWORD });
  const callback = await follow(`${consentPage}/confirm`, {});
  return client.authorizationCodeGrant(configuration, new URL(callback), {
    pkceCodeVerifier: verifier,
    expectedState: state,
  });
}

/**
 * A consent link of `orgId` at the simulated bank from the tokens of a walk (`walkConsent`) as `rut`, as the
 * widget's callback makes one, without its events. Its first sync is queued with it.
 */
export async function consentLinkOf(
  db: Database,
  secrets: SecretBox,
  input: {
    orgId: string;
    registration: { id: string; client_id: string };
    rut: string;
    tokens: Awaited<ReturnType<typeof walkConsent>>;
    syncIntervalMs: number;
  },
): Promise<string> {
  const { tokens } = input;
  const details = parseAuthorizationDetails(tokens.authorization_details)!;
  const now = Date.now();
  const link = await db.transaction((trx) =>
    createConsentLink(
      trx,
      { orgId: input.orgId, mode: 'test', actor: 'bench' },
      {
        bank_id: CONSENT_SANDBOX_BANK_ID,
        holder_type: 'individual',
        consent_version: 'bench',
        consent_text_hash: 'a'.repeat(64),
        subject: input.rut.replace(/\./g, ''),
      },
      {
        consentClientId: input.registration.id,
        clientId: input.registration.client_id,
        grantId: String(tokens.grant_id),
        authorizationDetails: details,
        expiresAt: validUntil(details),
        accessToken: tokens.access_token,
        accessTokenExpiresAt: now + (tokens.expires_in ?? 0) * 1000,
        refreshToken: tokens.refresh_token ?? null,
      },
      { secrets, syncIntervalMs: input.syncIntervalMs, consentExpiryWarningDays: 7 },
      now,
      { announce: false },
    ),
  );
  return link.id;
}
