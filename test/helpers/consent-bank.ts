import { holderNameOf } from '../../src/banks/consent/data-mapping.js';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa, { type Middleware } from 'koa';
import * as client from 'openid-client';
import type { Test } from 'tap';
import { Agent, fetch as undiciFetch } from 'undici';
import { ManualClock, systemClock } from '../../src/clock/clock.js';
import { callName } from '../../src/consent-bank/bank-shell.js';
import { ConsentBankFaults } from '../../src/consent-bank/faults.js';
import {
  startConsentBank,
  type ConsentBank,
  type ConsentBankOptions,
} from '../../src/consent-bank/consent-bank.js';
import { issueSoftwareStatement } from '../../src/consent-bank/software-statement.js';
import {
  issueClientCertificate,
  makeTestCa,
  subjectDnOf,
  type KeyAndCert,
  type TestCaMaterial,
} from '../../src/consent-bank/test-ca.js';
import { builtInFaults } from '../../src/consent-bank/users.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { migrateUp } from '../../src/db/migrations.js';
import { silentLogger } from '../../src/logging/logger.js';
import {
  createTenant,
  freshDatabase,
  runSyncs,
  startTestApp,
  type ConfigOverrides,
  type EngineName,
  type TestApp,
} from './harness.js';
import { parseAuthorizationDetails, validUntil } from '../../src/banks/consent/authorization-details.js';
import type { ConsentClientRow } from '../../src/banks/consent/registrations.js';
import { insertJobs, syncJob } from '../../src/jobs/jobs.js';
import { createConsentLink } from '../../src/links/consent/grants.js';
import { registerWithSimulatedBank } from '../../src/test-mode/self-registration.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';

/*
 * The simulated consent bank in a test: a migrated database, a test CA of its own, the bank's mTLS listener on
 * a free port, and a bare Koa app standing in for the appliance's HTTP server (it mounts the browser face).
 * The client side is what the connector uses: openid-client with an undici Agent carrying the certificate.
 */

let sharedCa: Promise<TestCaMaterial> | null = null;
/** One CA per test process: two RSA keys take a moment to make. */
export function testCa(): Promise<TestCaMaterial> {
  sharedCa ??= makeTestCa(Date.now());
  return sharedCa;
}

export interface BankFixture {
  bank: ConsentBank;
  ca: TestCaMaterial;
  db: Database;
  faults: ConsentBankFaults;
  /** The stand-in appliance's base URL (plain HTTP on loopback). */
  appUrl: string;
}

export async function startBank(
  t: Test,
  engine: EngineName,
  options: Partial<Pick<ConsentBankOptions, 'data' | 'refreshTokens'>> = {},
): Promise<BankFixture> {
  const faults = new ConsentBankFaults(builtInFaults);
  const { bank, ca, db, appUrl } = await standInBank(t, engine, ({ db, ca, appUrl }) =>
    startConsentBank({
      db,
      ca,
      clock: systemClock,
      logger: silentLogger,
      publicBaseUrl: appUrl,
      data: options.data ?? sandboxCustomerData(),
      refreshTokens: options.refreshTokens,
      port: 0,
      faults,
    }),
  );
  return { bank, ca, db, faults, appUrl };
}

/**
 * A simulated bank (`start`) on a fresh migrated database with the suite's CA, its browser face mounted on a
 * bare Koa app standing in for the appliance's HTTP server; all of it closed when the test ends.
 */
export async function standInBank<B extends { browserMiddleware: Middleware; close(): Promise<void> }>(
  t: Test,
  engine: EngineName,
  start: (on: { db: Database; ca: TestCaMaterial; appUrl: string }) => Promise<B>,
): Promise<{ bank: B; ca: TestCaMaterial; db: Database; appUrl: string }> {
  const database = await freshDatabase(t, engine);
  const db = openDatabase({ url: database.url });
  await migrateUp(db);
  const ca = await testCa();
  let mounted: Middleware = (_ctx, next) => next();
  const app = new Koa();
  app.use((ctx, next) => mounted(ctx, next));
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const bank = await start({ db, ca, appUrl });
  mounted = bank.browserMiddleware;
  t.teardown(async () => {
    await bank.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await db.close();
  });
  return { bank, ca, db, appUrl };
}

export function mtlsAgent(t: Test, ca: TestCaMaterial, identity: KeyAndCert = ca.client): Agent {
  const agent = new Agent({ connect: { ca: ca.caCert, cert: identity.cert, key: identity.key } });
  t.teardown(() => agent.close());
  return agent;
}

/**
 * An mTLS agent holding another certificate of the same CA: a client the bank's TLS accepts, but not the
 * one a certificate-bound token was issued to (RFC 8705 §3).
 */
export async function strangerAgent(t: Test, ca: TestCaMaterial): Promise<Agent> {
  const other = await issueClientCertificate(ca, 'CN=someone else, O=svc sandbox, C=CL', Date.now());
  return mtlsAgent(t, ca, other);
}

export function fetchWith(agent: Agent): client.CustomFetch {
  return ((url: string, options: client.CustomFetchOptions) =>
    undiciFetch(url, {
      ...(options as object),
      dispatcher: agent,
    } as never)) as unknown as client.CustomFetch;
}

export const REDIRECT_URI = 'https://app.example/callback';

/**
 * What a client of the strict bank registers to do all the bank offers: certificate-bound tokens (RFC 8705
 * 3.4), the `Accounts` RAR type (RFC 9396 10.2), refresh tokens, and client_credentials for Grant Management.
 */
export const FULL_METADATA = {
  grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
  authorization_details_types: ['Accounts'],
  tls_client_certificate_bound_access_tokens: true,
} as const;

export async function register(
  fixture: BankFixture,
  agent: Agent,
  identity: KeyAndCert = fixture.ca.client,
  metadata: Record<string, unknown> = FULL_METADATA,
): Promise<client.Configuration> {
  const statement = await issueSoftwareStatement(fixture.ca.directoryKey, {
    clientName: 'svc appliance',
    redirectUris: [REDIRECT_URI],
    subjectDn: subjectDnOf(identity.cert),
    now: Math.floor(Date.now() / 1000),
  });
  const config = await client.dynamicClientRegistration(
    new URL(fixture.bank.issuer),
    {
      redirect_uris: [REDIRECT_URI],
      software_statement: statement,
      tls_client_auth_subject_dn: subjectDnOf(identity.cert),
      token_endpoint_auth_method: 'tls_client_auth',
      use_mtls_endpoint_aliases: true,
      ...metadata,
    },
    client.TlsClientAuth(),
    { execute: [client.allowInsecureRequests], [client.customFetch]: fetchWith(agent) },
  );
  config[client.customFetch] = fetchWith(agent);
  return config;
}

/** A browser without JavaScript: follows redirects by hand, keeps cookies by name. */
export class Browser {
  private readonly cookies = new Map<string, string>();
  /** `stopAt`: the redirect URI, where `follow` stops and hands back the callback URL unvisited. */
  constructor(
    private readonly language = 'es',
    private readonly stopAt = REDIRECT_URI,
  ) {}

  async go(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<Response> {
    const headers: Record<string, string> = { 'accept-language': this.language };
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const response = await fetch(url, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return response;
  }

  /** Follows redirects within the appliance until one leaves it (to the client's redirect URI) or a page. */
  async follow(
    url: string,
    init: { method?: string; form?: Record<string, string> } = {},
  ): Promise<{ response: Response; url: string }> {
    let response = await this.go(url, init);
    let at = url;
    while (response.status >= 300 && response.status < 400) {
      at = new URL(response.headers.get('location')!, at).href;
      if (at.startsWith(this.stopAt)) return { response, url: at };
      response = await this.go(at);
    }
    return { response, url: at };
  }
}

export const ALL_ACTIONS = ['ReadAccounts', 'ReadBalances', 'ReadTransactions', 'ReadCreditCards'];

export interface Consent {
  tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers;
  callback: URL;
  verifier: string;
  state: string;
}

/** PAR, sign-in and consent in the browser, and the code's exchange; `decision` picks the button. */
export async function consent(
  fixture: BankFixture,
  config: client.Configuration,
  options: {
    rut?: string;
    actions?: string[];
    language?: string;
    decision?: 'confirm' | 'abort';
    exchange?: boolean;
    /** When the consent ends (RFC 3339); none: the bank's default, a year. */
    validTo?: string;
    /** The scope asked: by default `openid offline_access` with prompt=consent (OIDC Core 11), for a refresh token. */
    scope?: string;
    /** The `claims` parameter (OpenID Connect Core §5.5), as JSON text; none by default. */
    claims?: string;
  } = {},
): Promise<{ callback: URL; verifier: string; state: string; pages: string[]; tokens?: Consent['tokens'] }> {
  const verifier = client.randomPKCECodeVerifier();
  const state = randomBytes(8).toString('hex');
  const url = await client.buildAuthorizationUrlWithPAR(config, {
    redirect_uri: REDIRECT_URI,
    scope: options.scope ?? 'openid offline_access',
    ...((options.scope ?? 'openid offline_access').includes('offline_access') ? { prompt: 'consent' } : {}),
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    grant_management_action: 'create',
    authorization_details: JSON.stringify([
      {
        type: 'Accounts',
        actions: options.actions ?? ALL_ACTIONS,
        ...(options.validTo ? { validTo: options.validTo } : {}),
      },
    ]),
    ...(options.claims ? { claims: options.claims } : {}),
  });
  const { callback: at, pages } = await atTheBank(url.href, REDIRECT_URI, options);
  const callback = new URL(at);
  if (options.exchange === false || callback.searchParams.has('error'))
    return { callback, verifier, state, pages };
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
  });
  return { callback, verifier, state, pages, tokens };
}

/**
 * The end user at the bank's pages: sign-in (a sandbox user, password `sandbox`) and the consent page, where
 * `decision` picks the button. Answers the callback URL the bank sent the browser to, not yet visited.
 */
export async function atTheBank(
  authorizationUrl: string,
  redirectUri: string,
  options: { rut?: string; cpf?: string; language?: string; decision?: 'confirm' | 'abort' } = {},
): Promise<{ callback: string; pages: string[]; answer: Response }> {
  const browser = new Browser(options.language ?? 'es', redirectUri);
  const pages: string[] = [];
  const signInPage = await browser.follow(authorizationUrl);
  pages.push(await signInPage.response.text());
  // A Brazilian bank's customer signs in with a CPF, a Chilean one's with a RUT.
  const id: Record<string, string> =
    options.cpf !== undefined ? { cpf: options.cpf } : { rut: options.rut ?? '11.111.111-1' };
  const afterLogin = await browser.follow(`${signInPage.url}/login`, {
    method: 'POST',
    form: { ...id, password: 'sandbox' },
  });
  pages.push(await afterLogin.response.text());
  const done = await browser.follow(`${afterLogin.url}/${options.decision ?? 'confirm'}`, {
    method: 'POST',
    form: {},
  });
  // `answer`: the last response, a page of its own where the bank posts its answer back (form_post).
  return { callback: done.url, pages, answer: done.response };
}

export function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * A consent at the simulated bank, recorded as a link of `orgId` with its first (full) sync queued, as the
 * widget records one: what the sync and revoke tests start from.
 */
export async function consentLink(
  fixture: BankFixture,
  app: Pick<TestApp, 'db' | 'clock' | 'services'>,
  registration: ConsentClientRow,
  orgId: string,
  rut: string,
  actions?: string[],
  validTo?: string,
): Promise<{ linkId: string; grantId: string; accessToken: string }> {
  const { configuration } = await app.services.consentClients.forRegistration(registration);
  const { tokens } = await consent(fixture, configuration, { rut, actions, validTo });
  const details = parseAuthorizationDetails(tokens!.authorization_details)!;
  const now = app.clock.now();
  const grantId = String(tokens!.grant_id);
  const link = await app.db.transaction((trx) =>
    createConsentLink(
      trx,
      { orgId, mode: 'test', actor: 'test' },
      {
        bank_id: 'bancoabierto',
        holder_type: 'individual',
        consent_version: 'widget-1',
        consent_text_hash: 'a'.repeat(64),
        subject: rut.replace(/\./g, ''),
      },
      {
        consentClientId: registration.id,
        clientId: registration.client_id,
        grantId,
        authorizationDetails: details,
        expiresAt: validUntil(details),
        accessToken: tokens!.access_token,
        accessTokenExpiresAt: now + (tokens!.expires_in ?? 0) * 1000,
        refreshToken: tokens!.refresh_token ?? null,
        // As the widget's callback: the code exchange's ID token said whose consent it is (its `name`, if asked).
        holder: { name: holderNameOf(tokens!.claims()?.name) },
      },
      {
        secrets: app.services.secrets,
        syncIntervalMs: 3_600_000,
        consentExpiryWarningDays: app.services.config.links.consentExpiryWarningDays,
      },
      now,
      { announce: false },
    ),
  );
  return { linkId: link.id, grantId, accessToken: tokens!.access_token };
}

/**
 * What the consent sync tests start from: the simulated bank on a database of its own (with `data` when
 * given), the app on the real clock (the bank's: sync windows and token lives agree) with `config`, a tenant,
 * and the app registered with the bank.
 */
export async function appBesideBank(
  t: Test,
  engine: EngineName,
  options: Partial<Pick<ConsentBankOptions, 'data'>> & { config?: ConfigOverrides } = {},
) {
  const fixture = await startBank(t, engine, options.data ? { data: options.data } : {});
  const app = await startTestApp(t, engine, { clock: new ManualClock(Date.now()), config: options.config });
  const tenant = await createTenant(app);
  const registration = await registerApp(fixture, app);
  return { fixture, app, tenant, registration };
}

/** The calls a simulated bank received while `run` ran, by name (`callName`: `accounts list`, `token`, …). */
export async function callsDuring(
  bank: Pick<ConsentBank, 'callLog'>,
  run: () => Promise<unknown>,
): Promise<Record<string, number>> {
  const from = bank.callLog().length;
  await run();
  const byName: Record<string, number> = {};
  for (const call of bank.callLog().slice(from))
    byName[callName(call.path)] = (byName[callName(call.path)] ?? 0) + 1;
  return byName;
}

/**
 * The link's next scheduled sync, run: the job the scheduler's tick would queue for it now, alone (other
 * tests' links are left as they are).
 */
export async function scheduledSync(
  t: Test,
  app: Pick<TestApp, 'db' | 'clock' | 'services'>,
  linkId: string,
  orgId: string,
): Promise<void> {
  const job = syncJob(
    { id: linkId, org_id: orgId },
    { refresh_type: 'scheduled', interactive: false },
    app.clock.now(),
  );
  await app.db.transaction((trx) => insertJobs(trx, [job]));
  t.equal(await runSyncs(app), 1, 'one scheduled sync');
}

/** The appliance registered with a simulated bank of its own (the bank's database is separate, as at a bank). */
export async function registerApp(
  fixture: BankFixture,
  app: Pick<TestApp, 'db' | 'services'>,
): Promise<ConsentClientRow> {
  return registerWithSimulatedBank({
    db: app.db,
    secrets: app.services.secrets,
    bank: fixture.bank,
    ca: fixture.ca,
    redirectUri: REDIRECT_URI,
    clientName: app.services.config.widget.name,
    now: Date.now(),
  });
}

/** A client_credentials token of Grant Management's scope (draft section 6.1). */
export async function grantManagementToken(
  config: client.Configuration,
  scope = 'grant_management_query grant_management_revoke',
): Promise<string> {
  return (await client.clientCredentialsGrant(config, { scope })).access_token;
}

/** A call to Grant Management with a token (RFC 6750 Bearer). */
export async function grantCall(
  fixture: BankFixture,
  agent: Agent,
  grantId: string,
  method: 'GET' | 'DELETE',
  token: string | null,
): Promise<Response> {
  return (await undiciFetch(`${fixture.bank.mtlsBase}/grants/${encodeURIComponent(grantId)}`, {
    dispatcher: agent,
    method,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  })) as unknown as Response;
}

/**
 * The bank's Grant Management as the appliance's registered client reads it (draft §6.2 and §6.3, with a
 * client_credentials token of the draft's scopes, over the client's mTLS): what a test checks at the bank.
 */
export function grantsAtBank(fixture: BankFixture, app: Pick<TestApp, 'db' | 'services'>, agent: Agent) {
  const token = async () => {
    const bank = await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test');
    return grantManagementToken(bank!.configuration);
  };
  return {
    /** `Authorised`, `Revoked`, `Expired` as the bank says, or null when it has no such grant (404). */
    async status(grantId: string): Promise<string | null> {
      const response = await grantCall(fixture, agent, grantId, 'GET', await token());
      if (response.status === 404) return null;
      return ((await response.json()) as { status: string }).status;
    },
    /** The end user revokes at the bank (as its consent dashboard would): the HTTP status. */
    async revoke(grantId: string): Promise<number> {
      return (await grantCall(fixture, agent, grantId, 'DELETE', await token())).status;
    },
  };
}
