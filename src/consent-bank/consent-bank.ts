/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import { createHash, createPrivateKey, randomUUID, type X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import Koa, { type Context, type Middleware } from 'koa';
import type { Clock } from '../clock/clock.js';
import type { Database } from '../db/database.js';
import { pageHeaders, sendHtml } from '../html/respond.js';
import type { Logger } from '../logging/logger.js';
import { formatRut } from '../rut/rut.js';
import { consentEnd, detailProblem, grantedActions, type AccountAction } from './authorization-details.js';
import { ConsentBankFaults, retryAfterOf, type UserFaults } from './faults.js';
import { loadOidcProvider } from './load-provider.js';
import { PAGE_CSP, consentPage, gonePage, pickLanguage, signInPage } from './pages.js';
import {
  ACCOUNTS_BASE,
  CREDIT_CARDS_BASE,
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  accountBalances,
  accountIdentification,
  accountTransactions,
  accountsList,
  bookingWindow,
  breakAnswer,
  cardAccountsList,
  cardIdentification,
  cardLimits,
  cardTransactions,
  findCardAccount,
  findDepositAccount,
  type Paging,
} from './resources.js';
import { checkSoftwareStatement, directoryPublicKey } from './software-statement.js';
import {
  findRevokedGrant,
  revokeGrant,
  setExpiry,
  stateAdapterClass,
  stateKeys,
  type StateStoreOptions,
} from './store.js';
import {
  certificateThumbprint,
  makeForeignServerCertificate,
  sameDn,
  subjectDnOf,
  type TestCaMaterial,
} from './test-ca.js';
import { builtInFaults, signIn } from './users.js';

/** Where the bank lives on both faces: under the appliance's base URL and on its own mTLS listener. */
export const CONSENT_BANK_PATH = '/sandbox/consent-bank';
/** The mTLS listener's port when the config does not say (`sandbox.consentBank.port`). */
export const CONSENT_BANK_DEFAULT_PORT = 8443;
/** Access tokens are short (the Chilean draft follows Brazil's 5 to 15 minutes); refresh tokens renew them. */
export const ACCESS_TOKEN_TTL_S = 600;
export const GRANT_MANAGEMENT_PATH = '/grants';
export const PAR_PATH = '/par';

export interface ConsentBankOptions {
  db: Database;
  ca: TestCaMaterial;
  clock: Clock;
  logger: Logger;
  /** The appliance's public base URL: the issuer is `${publicBaseUrl}/sandbox/consent-bank`. */
  publicBaseUrl: string;
  /** The mTLS listener's address: 127.0.0.1 unless a test says otherwise; nothing beyond loopback. */
  host?: string;
  /** The mTLS listener's port; 0 picks a free one. */
  port?: number;
  faults?: ConsentBankFaults;
}

export interface ConsentBank {
  issuer: string;
  /** The machine face's base, `https://127.0.0.1:<port>/sandbox/consent-bank`. */
  mtlsBase: string;
  /** The browser face: the appliance's HTTP server mounts it (it answers only under CONSENT_BANK_PATH). */
  browserMiddleware: Middleware;
  faults: ConsentBankFaults;
  /** Requests the mTLS face answered since the bank started, by kind: what a test counts to bound our calls. */
  calls(): Readonly<Record<CallKind, number>>;
  /**
   * When the mTLS face received each of its latest calls (the bank's clock, ms) and their kind: what a test
   * counts per second and minute to check the appliance keeps within the bank's limits. The last 10,000.
   */
  callLog(): readonly { kind: CallKind; at: number }[];
  close(): Promise<void>;
}

export type CallKind = 'token' | 'resources' | 'grant_management' | 'other';

/** The models the invalidate-all fault hides: every grant and every token of one. */
const GRANT_MODELS = new Set(['Grant', 'AccessToken', 'RefreshToken']);

/** The machine endpoints, relative to the bank's base on either face. */
const MTLS_ROUTES = {
  token_endpoint: '/token',
  pushed_authorization_request_endpoint: PAR_PATH,
  registration_endpoint: '/reg',
  grant_management_endpoint: GRANT_MANAGEMENT_PATH,
  introspection_endpoint: '/token/introspection',
} as const;

/** The browser face passes only these to the library; the rest lives on the mTLS face. */
function browserRoute(path: string): 'provider' | 'interaction' | null {
  if (path === '/auth' || /^\/auth\/[\w-]+$/.test(path)) return 'provider';
  if (path === '/.well-known/openid-configuration' || path === '/jwks') return 'provider';
  if (/^\/interaction\/[\w-]+(\/(login|confirm|abort))?$/.test(path)) return 'interaction';
  return null;
}

function oauthError(ctx: Context, status: number, error: string, description: string): void {
  ctx.status = status;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { error, error_description: description };
}

/** Reads a small urlencoded form (sign-in and consent): 8 KiB is far above any of ours. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 8_192) throw new Error('form too large');
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function peerCertificate(ctx: { req: IncomingMessage }): X509Certificate | undefined {
  const socket = ctx.req.socket as TLSSocket;
  if (!socket.encrypted) return undefined;
  return socket.getPeerX509Certificate() ?? undefined;
}

function parseDetails(value: unknown): Record<string, unknown>[] {
  if (Array.isArray(value)) return value as Record<string, unknown>[];
  if (typeof value !== 'string') return [];
  try {
    const parsed = JSON.parse(value);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

export async function startConsentBank(options: ConsentBankOptions): Promise<ConsentBank> {
  const { db, ca, clock, logger } = options;
  const log = logger.child({ component: 'consent-bank' });
  const faults = options.faults ?? new ConsentBankFaults(builtInFaults);
  const publicBase = new URL(options.publicBaseUrl);
  const issuer = `${publicBase.origin}${publicBase.pathname.replace(/\/$/, '')}${CONSENT_BANK_PATH}`;
  const issuerPath = new URL(issuer).pathname;
  const keys = stateKeys(ca.stateSecret);
  const directoryKey = directoryPublicKey(ca.directoryKey);
  const serverContext = {
    key: ca.server.key,
    cert: ca.server.cert,
    ca: [ca.caCert],
    minVersion: 'TLSv1.3' as const,
  };
  const foreign = await makeForeignServerCertificate(clock.now());

  // The listener first: the port (0 in tests) must be known before discovery can name the mTLS aliases.
  let handleMtls: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server: Server = createServer(
    { ...serverContext, requestCert: true, rejectUnauthorized: true },
    (req, res) => handleMtls(req, res),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? CONSENT_BANK_DEFAULT_PORT, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const mtlsOrigin = `https://${options.host ?? '127.0.0.1'}:${port}`;
  const mtlsBase = `${mtlsOrigin}${issuerPath}`;
  const unsubscribe = faults.onChange(() => {
    // A fault that swaps the server certificate applies to new TLS connections.
    const use = faults.bankWide.foreignServerCertificate
      ? { ...serverContext, ...foreign, ca: [] }
      : serverContext;
    server.setSecureContext(use);
  });

  const storeOptions: StateStoreOptions = {
    db,
    keys,
    hooks: {
      beforeStore(model, payload) {
        if (
          model === 'AccessToken' &&
          faults.forUser(payload.accountId as string | undefined).unboundTokens
        ) {
          const { 'x5t#S256': _bound, ...unbound } = payload;
          return unbound;
        }
        return payload;
      },
      hides: (model) => faults.bankWide.invalidateAllGrants === true && GRANT_MODELS.has(model),
      shouldConsume(model, payload) {
        return !(
          model === 'AuthorizationCode' &&
          faults.forUser(payload.accountId as string | undefined).acceptReplayedCode
        );
      },
    },
  };

  const { Provider, errors } = await loadOidcProvider(log);
  const signingJwk = {
    ...createPrivateKey(ca.bankSigningKey).export({ format: 'jwk' }),
    alg: 'PS256',
    use: 'sig',
  };
  const kid = createHash('sha256').update(String(signingJwk.n)).digest('base64url').slice(0, 16);
  const cookieKey = createHash('sha256').update(`cookies:${ca.stateSecret}`).digest('base64url');

  const provider = new Provider(issuer, {
    adapter: stateAdapterClass(storeOptions),
    jwks: { keys: [{ ...signingJwk, kid }] },
    cookies: { keys: [cookieKey] },
    clientAuthMethods: ['tls_client_auth'],
    responseTypes: ['code'],
    scopes: ['openid', 'offline_access'],
    enabledJWA: { idTokenSigningAlgValues: ['PS256'] },
    routes: { pushed_authorization_request: PAR_PATH, registration: '/reg' },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_certificate_bound_access_tokens: true,
      id_token_signed_response_alg: 'PS256',
      authorization_details_types: ['Accounts'],
    },
    async findAccount(_ctx: unknown, sub: string) {
      return { accountId: sub, claims: async () => ({ sub }) };
    },
    pkce: { required: () => true },
    // Every client gets refresh tokens: the appliance syncs long after the user has left.
    issueRefreshToken: async (_ctx: unknown, client: any) => client.grantTypeAllowed('refresh_token'),
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      IdToken: ACCESS_TOKEN_TTL_S,
      Interaction: 30 * 60,
      Session: 60 * 60,
      RefreshToken: 3 * 366 * 86_400,
      // A grant lasts until the consent's validTo (else a year): tokens of an expired grant stop.
      Grant: (_ctx: unknown, grant: any) =>
        Math.max(1, Math.ceil((consentEnd(grant.rar ?? [], clock.now()) - clock.now()) / 1000)),
    },
    extraParams: {
      // Chile's draft: every authorization creates a grant (Grant Management draft 08); update/replace later.
      grant_management_action(_ctx: unknown, value: unknown) {
        if (value !== 'create')
          throw new errors.InvalidRequest(
            'grant_management_action=create is required (the only action this bank supports on authorization)',
          );
      },
      grant_id(_ctx: unknown, value: unknown) {
        if (value !== undefined)
          throw new errors.InvalidRequest('grant_id is not supported: this bank only creates grants');
      },
    },
    extraClientMetadata: {
      properties: ['software_statement'],
      validator(ctx: any, key: string, value: unknown, metadata: any) {
        if (key !== 'software_statement') return;
        // Stored clients were checked when they registered; the statement may have expired since.
        if (ctx?.oidc?.route !== 'registration') return;
        const check = checkSoftwareStatement(value, directoryKey, Math.floor(clock.now() / 1000));
        if (!check.ok) throw new errors.InvalidSoftwareStatement(check.reason);
        const { claims } = check;
        if (
          typeof metadata.tls_client_auth_subject_dn !== 'string' ||
          !sameDn(metadata.tls_client_auth_subject_dn, claims.tls_client_auth_subject_dn)
        )
          throw new errors.UnapprovedSoftwareStatement(
            'tls_client_auth_subject_dn must be the software statement’s',
          );
        const cert = peerCertificate(ctx);
        if (!cert || !sameDn(subjectDnOf(cert.toString()), claims.tls_client_auth_subject_dn))
          throw new errors.UnapprovedSoftwareStatement(
            'the client certificate is not the one the software statement names',
          );
        for (const uri of metadata.redirect_uris ?? [])
          if (!claims.redirect_uris.includes(uri))
            throw new errors.InvalidRedirectUri('redirect_uris must be among the software statement’s');
        metadata.client_name = claims.client_name;
      },
    },
    interactions: {
      url: (_ctx: unknown, interaction: any) => `${issuerPath}/interaction/${interaction.uid}`,
    },
    discovery: {
      grant_management_actions_supported: ['create', 'query', 'revoke'],
      grant_management_action_required: true,
    },
    features: {
      fapi: { enabled: true, profile: '2.0' },
      pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: true },
      registration: { enabled: true },
      // RFC 7592 (read, update, delete at `/reg/{client_id}` with the registration access token), for
      // `svc banks rotate-certificate`. Each update issues a new token and ends the old one (§2.2 allows
      // it; the library's default): a client that does not keep the new one loses management at once.
      registrationManagement: { enabled: true, rotateRegistrationAccessToken: true },
      devInteractions: { enabled: false },
      // A client may ask whether its token is bound to its certificate (the appliance does, once a consent).
      introspection: { enabled: true },
      revocation: { enabled: false },
      userinfo: { enabled: false },
      mTLS: {
        enabled: true,
        certificateBoundAccessTokens: true,
        tlsClientAuth: true,
        getCertificate: (ctx: any) => peerCertificate(ctx),
        // The listener refuses any certificate the test CA did not issue (rejectUnauthorized).
        certificateAuthorized: (ctx: any) => (ctx.req.socket as TLSSocket).authorized === true,
        certificateSubjectMatches: (ctx: any, property: string, expected: string) => {
          const cert = peerCertificate(ctx);
          return (
            property === 'tls_client_auth_subject_dn' &&
            cert !== undefined &&
            sameDn(subjectDnOf(cert.toString()), expected)
          );
        },
      },
      // RAR needs a resource indicator in this library: the resource APIs are one resource, the mTLS base.
      resourceIndicators: {
        enabled: true,
        defaultResource: () => mtlsBase,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => {
          if (resource !== mtlsBase)
            throw new errors.InvalidTarget('the only resource is the bank’s mTLS base');
          return {
            scope: '',
            audience: mtlsBase,
            accessTokenFormat: 'opaque',
            accessTokenTTL: ACCESS_TOKEN_TTL_S,
          };
        },
      },
      richAuthorizationRequests: {
        enabled: true,
        types: {
          Accounts: {
            validate(_ctx: unknown, detail: Record<string, unknown>) {
              const problem = detailProblem(detail, clock.now());
              if (problem) throw new errors.InvalidAuthorizationDetails(problem);
            },
          },
        },
        // What the user approved is on the grant; codes and tokens carry exactly that.
        authorizationDetailsForGrantSource: (ctx: any) => ctx.oidc.grant?.rar,
        authorizationDetailsForAccessToken: (_ctx: unknown, _token: unknown, source: any) => source?.rar,
        authorizationDetailsForIntrospection: (_ctx: unknown, token: any) => token.rar,
      },
    },
    renderError: async (ctx: any, out: { error: string }) => {
      // The browser sees a page of the bank's, never the error's details (they may name a client).
      const language = pickLanguage(undefined, ctx.get('accept-language'));
      pageHeaders(ctx, PAGE_CSP);
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = gonePage(language).toString();
      log.info({ error: out.error }, 'consent bank: browser request refused');
    },
  });
  // The faces set the forwarded headers themselves (below), from the configured bases, never the client's.
  provider.proxy = true;
  provider.silent = true;
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    log.error({ err: { message: error.message } }, 'consent bank: server error'),
  );

  provider.use(async (ctx: any, next: () => Promise<void>) => {
    await next();
    const route = ctx.oidc?.route;
    if (route === 'discovery' && ctx.status === 200) {
      const aliases: Record<string, string> = {};
      for (const [name, path] of Object.entries(MTLS_ROUTES)) aliases[name] = `${mtlsBase}${path}`;
      // Every machine endpoint needs the client certificate: the top-level names point at the mTLS face too.
      Object.assign(ctx.body, aliases, {
        mtls_endpoint_aliases: aliases,
        token_endpoint_auth_methods_supported: ['tls_client_auth'],
        code_challenge_methods_supported: ['S256'],
        authorization_details_types_supported: ['Accounts'],
      });
    }
    if (route === 'token' && ctx.status === 200) {
      const token = ctx.oidc.entities?.AccessToken;
      if (token?.grantId) ctx.body = { ...ctx.body, grant_id: token.grantId };
    }
    if (route === 'pushed_authorization_request' && ctx.status === 201) {
      const ttl = faults.bankWide.requestUriTtlSeconds;
      if (ttl !== undefined) {
        const id = String(ctx.body.request_uri).split(':').pop() as string;
        await setExpiry(
          storeOptions,
          'PushedAuthorizationRequest',
          id,
          Date.now() + ttl * 1000 - (ttl === 0 ? 1 : 0),
        );
        ctx.body = { ...ctx.body, expires_in: ttl };
      }
    }
  });

  const callProvider = provider.callback() as (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /** Hands a request to the library with the path under the bank's base, as seen from `base`. */
  const delegate = async (ctx: Context, base: URL): Promise<void> => {
    const req = ctx.req as IncomingMessage & { originalUrl?: string };
    req.originalUrl = ctx.originalUrl;
    req.url = ctx.url.slice(issuerPath.length) || '/';
    req.headers['x-forwarded-proto'] = base.protocol.replace(':', '');
    req.headers['x-forwarded-host'] = base.host;
    ctx.respond = false;
    await callProvider(req, ctx.res);
  };

  const browserMiddleware: Middleware = async (ctx, next) => {
    if (ctx.path !== issuerPath && !ctx.path.startsWith(`${issuerPath}/`)) return next();
    const path = ctx.path.slice(issuerPath.length);
    switch (browserRoute(path)) {
      case 'provider':
        return delegate(ctx, publicBase);
      case 'interaction':
        return interaction(ctx, path);
      default:
        return oauthError(
          ctx,
          404,
          'invalid_request',
          `No browser endpoint here; machine endpoints are at ${mtlsBase} (mtls_endpoint_aliases)`,
        );
    }
  };

  /** The sign-in and consent pages, and their three answers. */
  const interaction = async (ctx: Context, path: string): Promise<void> => {
    const [, , uid, step] = path.split('/') as [string, string, string, string | undefined];
    let details: any;
    try {
      details = await provider.interactionDetails(ctx.req, ctx.res);
    } catch {
      pageHeaders(ctx, PAGE_CSP);
      return sendHtml(ctx, 400, gonePage(pickLanguage(undefined, ctx.get('accept-language'))));
    }
    const language = pickLanguage(details.params.ui_locales, ctx.get('accept-language'));
    pageHeaders(ctx, PAGE_CSP);
    if (details.uid !== uid) return sendHtml(ctx, 400, gonePage(language));
    const base = `${issuerPath}/interaction/${uid}`;
    const finish = async (result: unknown, merge: boolean) => {
      ctx.respond = false;
      await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
    };

    if (step === undefined && ctx.method === 'GET') {
      if (details.prompt.name === 'login')
        return sendHtml(ctx, 200, signInPage(language, `${base}/login`, false, ''));
      const client = await provider.Client.find(details.params.client_id);
      const requested = parseDetails(details.params.authorization_details);
      const validTo = requested.map((d) => d.validTo).find((v): v is string => typeof v === 'string');
      return sendHtml(
        ctx,
        200,
        consentPage(language, {
          clientName: client?.clientName ?? details.params.client_id,
          rut: formatRut(details.session?.accountId ?? ''),
          actions: [...grantedActions(requested)] as AccountAction[],
          validTo: validTo ? validTo.slice(0, 10) : null,
          approveAction: `${base}/confirm`,
          refuseAction: `${base}/abort`,
        }),
      );
    }
    if (ctx.method !== 'POST' || step === undefined)
      return oauthError(ctx, 405, 'invalid_request', 'Use the bank’s page');
    const form = await readForm(ctx.req).catch(() => new URLSearchParams());

    if (step === 'login') {
      const user = signIn(form.get('rut') ?? '', form.get('password') ?? '');
      if (!user)
        return sendHtml(ctx, 401, signInPage(language, `${base}/login`, true, form.get('rut') ?? ''));
      return finish({ login: { accountId: user.rut } }, false);
    }
    if (step === 'abort')
      return finish({ error: 'access_denied', error_description: 'The user refused the consent' }, false);

    // confirm
    const accountId: string | undefined = details.session?.accountId;
    if (!accountId) return sendHtml(ctx, 400, gonePage(language));
    if (faults.forUser(accountId).refuseConsent)
      return finish({ error: 'access_denied', error_description: 'The bank refused the consent' }, false);
    const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
    const scope = String(details.params.scope ?? 'openid')
      .split(' ')
      .filter((s) => s === 'openid' || s === 'offline_access');
    grant.addOIDCScope(scope.join(' '));
    for (const detail of parseDetails(details.params.authorization_details)) grant.addRar(detail);
    const grantId = await grant.save();
    return finish({ consent: { grantId } }, true);
  };

  const calls: Record<CallKind, number> = { token: 0, resources: 0, grant_management: 0, other: 0 };
  const callLog: { kind: CallKind; at: number }[] = [];
  const mtlsApp = new Koa();
  mtlsApp.silent = true;
  mtlsApp.use(async (ctx) => {
    const kind: CallKind = ctx.path.startsWith(`${issuerPath}/open-banking/`)
      ? 'resources'
      : ctx.path.startsWith(`${issuerPath}${GRANT_MANAGEMENT_PATH}/`)
        ? 'grant_management'
        : ctx.path === `${issuerPath}${MTLS_ROUTES.token_endpoint}`
          ? 'token'
          : 'other';
    calls[kind] += 1;
    callLog.push({ kind, at: clock.now() });
    if (callLog.length > 10_000) callLog.splice(0, callLog.length - 10_000);
    if (kind === 'resources') return resources(ctx, ctx.path.slice(issuerPath.length));
    if (kind === 'grant_management')
      return grantManagement(
        ctx,
        decodeURIComponent(ctx.path.slice(`${issuerPath}${GRANT_MANAGEMENT_PATH}/`.length)),
      );
    if (ctx.path === issuerPath || ctx.path.startsWith(`${issuerPath}/`)) {
      const delay = faults.bankWide.tokenDelayMs;
      if (delay && ctx.path === `${issuerPath}${MTLS_ROUTES.token_endpoint}`) await sleep(delay);
      return delegate(ctx, new URL(mtlsOrigin));
    }
    return oauthError(ctx, 404, 'invalid_request', 'Not an endpoint of the consent bank');
  });
  handleMtls = mtlsApp.callback();

  /** The resource APIs' error body (Open Finance Brasil's ResponseError) and, for 401, RFC 6750's header. */
  const refuse = (ctx: Context, status: number, code: string, detail: string, oauth?: string) => {
    ctx.status = status;
    if (oauth) ctx.set('WWW-Authenticate', `Bearer error="${oauth}", error_description="${detail}"`);
    ctx.body = {
      errors: [{ code, title: code, detail }],
      meta: {
        totalRecords: 1,
        totalPages: 1,
        requestDateTime: new Date(clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      },
    };
  };

  const resources = async (ctx: Context, path: string): Promise<void> => {
    const asked = ctx.get('x-fapi-interaction-id');
    ctx.set('x-fapi-interaction-id', /^[0-9a-f-]{36}$/i.test(asked) ? asked : randomUUID());
    if (ctx.method !== 'GET') return refuse(ctx, 405, 'METHOD_NOT_ALLOWED', 'Only GET');
    const match = /^Bearer ([^\s]+)$/.exec(ctx.get('authorization'));
    if (!match) return refuse(ctx, 401, 'UNAUTHORIZED', 'An access token is required', 'invalid_token');
    const token = await provider.AccessToken.find(match[1]);
    if (!token || token.isExpired)
      return refuse(ctx, 401, 'UNAUTHORIZED', 'The access token is invalid or expired', 'invalid_token');
    const grant = await provider.Grant.find(token.grantId);
    if (!grant || grant.isExpired)
      return refuse(ctx, 401, 'UNAUTHORIZED', 'The consent was revoked or has expired', 'invalid_token');
    const bound: string | undefined = token['x5t#S256'];
    const cert = peerCertificate(ctx);
    if (bound !== undefined && (!cert || certificateThumbprint(cert) !== bound))
      return refuse(
        ctx,
        401,
        'UNAUTHORIZED',
        'The access token is bound to another certificate',
        'invalid_token',
      );

    const rut: string = token.accountId;
    const userFaults: UserFaults = faults.forUser(rut);
    if (userFaults.delayMs) await sleep(userFaults.delayMs);
    switch (userFaults.resourceStatus) {
      case 401:
        return refuse(ctx, 401, 'UNAUTHORIZED', 'The bank refused the token (fault)', 'invalid_token');
      case 403:
        return refuse(ctx, 403, 'FORBIDDEN', 'The bank refused the call (fault)');
      case 429:
      case 529:
        ctx.set('Retry-After', String(retryAfterOf(userFaults)));
        return refuse(ctx, userFaults.resourceStatus, 'TOO_MANY_REQUESTS', 'Too many requests (fault)');
    }

    const granted = grantedActions(token.rar);
    const now = clock.now();
    const self = new URL(ctx.href.replace(/^http:/, 'https:'));
    const paging = pagingOf(ctx);
    if (typeof paging === 'string') return refuse(ctx, 400, 'PARAMETRO_INVALIDO', paging);
    const window = bookingWindow(
      ctx.query.fromBookingDate ? String(ctx.query.fromBookingDate) : null,
      ctx.query.toBookingDate ? String(ctx.query.toBookingDate) : null,
      now,
    );
    const need = (action: AccountAction) => {
      if (granted.has(action)) return true;
      refuse(ctx, 403, 'FORBIDDEN', `The consent does not cover ${action}`, undefined);
      return false;
    };
    const answer = (body: { data: unknown; meta?: unknown }) => {
      ctx.status = 200;
      ctx.body = userFaults.breakSchema ? breakAnswer(body) : body;
    };

    const parts = path.split('/').filter(Boolean); // open-banking, accounts|credit-cards-accounts, v2, accounts, id?, leaf?
    const family = `/${parts.slice(0, 3).join('/')}`;
    const [collection, id, leaf, extra] = parts.slice(3);
    if (collection !== 'accounts' || extra !== undefined)
      return refuse(ctx, 404, 'NOT_FOUND', 'No such resource');
    if (family === ACCOUNTS_BASE) {
      if (id === undefined)
        return need('ReadAccounts') ? answer(accountsList(rut, self, paging, now)) : undefined;
      const spec = findDepositAccount(rut, id);
      if (!spec) return refuse(ctx, 404, 'NOT_FOUND', 'No such account');
      if (leaf === undefined)
        return need('ReadAccounts') ? answer(accountIdentification(spec, self, now)) : undefined;
      if (leaf === 'balances')
        return need('ReadBalances') ? answer(accountBalances(rut, spec, self, now)) : undefined;
      if (leaf === 'transactions') {
        if (!window)
          return refuse(
            ctx,
            400,
            'PARAMETRO_INVALIDO',
            'fromBookingDate/toBookingDate must be YYYY-MM-DD, from before to',
          );
        return need('ReadTransactions')
          ? answer(accountTransactions(rut, spec, window, self, paging, now))
          : undefined;
      }
    }
    if (family === CREDIT_CARDS_BASE) {
      if (!need('ReadCreditCards')) return;
      if (id === undefined) return answer(cardAccountsList(rut, self, paging, now));
      const spec = findCardAccount(rut, id);
      if (!spec) return refuse(ctx, 404, 'NOT_FOUND', 'No such credit-card account');
      if (leaf === undefined) return answer(cardIdentification(spec, self, now));
      if (leaf === 'limits') return answer(cardLimits(rut, spec, self, now));
      if (leaf === 'transactions') {
        if (!window)
          return refuse(
            ctx,
            400,
            'PARAMETRO_INVALIDO',
            'fromBookingDate/toBookingDate must be YYYY-MM-DD, from before to',
          );
        return answer(cardTransactions(rut, spec, window, self, paging, now));
      }
    }
    return refuse(ctx, 404, 'NOT_FOUND', 'No such resource');
  };

  /** Grant Management (draft 08): query and revoke, for the client that owns the grant (by its certificate). */
  const grantManagement = async (ctx: Context, grantId: string): Promise<void> => {
    ctx.set('Cache-Control', 'no-store');
    if (ctx.method !== 'GET' && ctx.method !== 'DELETE') {
      ctx.set('Allow', 'GET, DELETE');
      return oauthError(
        ctx,
        405,
        'invalid_request',
        'Grant Management answers GET (query) and DELETE (revoke)',
      );
    }
    // A fault answers before the bank looks at the grant, as a rate limiter or a maintenance page would.
    const fault = faults.bankWide.grantManagementStatus;
    if (fault && ctx.method === 'DELETE') {
      ctx.set('Retry-After', String(retryAfterOf(faults.bankWide, fault)));
      return oauthError(ctx, fault, 'temporarily_unavailable', `Grant Management answers ${fault} (fault)`);
    }
    const cert = peerCertificate(ctx);
    const owns = async (clientId: string) => {
      const client = await provider.Client.find(clientId);
      const dn = client?.metadata().tls_client_auth_subject_dn;
      return typeof dn === 'string' && cert !== undefined && sameDn(subjectDnOf(cert.toString()), dn);
    };
    const unknown = () => oauthError(ctx, 404, 'invalid_grant', 'No grant of this client has that id');
    if (!/^[\w-]{1,128}$/.test(grantId)) return unknown();
    const grant = await provider.Grant.find(grantId, { ignoreExpiration: true });
    if (!grant) {
      const revoked = await findRevokedGrant(storeOptions, grantId);
      if (!revoked || !(await owns(revoked.clientId))) return unknown();
      if (ctx.method === 'DELETE') {
        ctx.status = 204;
        return;
      }
      ctx.body = {
        status: 'Revoked',
        authorization_details: revoked.authorizationDetails,
        revoked_at: new Date(revoked.revokedAt).toISOString(),
      };
      return;
    }
    if (!(await owns(grant.clientId))) return unknown();
    if (ctx.method === 'DELETE') {
      await revokeGrant(storeOptions, grantId, {
        clientId: grant.clientId,
        accountId: grant.accountId,
        revokedAt: clock.now(),
        authorizationDetails: grant.rar ?? [],
      });
      log.info({ client: grant.clientId }, 'consent bank: grant revoked');
      ctx.status = 204;
      return;
    }
    ctx.body = {
      status: grant.isExpired ? 'Expired' : 'Authorised',
      scopes: [{ scope: grant.openid?.scope ?? '' }],
      authorization_details: grant.rar ?? [],
      created_at: new Date(grant.iat * 1000).toISOString(),
      expires_at: grant.exp ? new Date(grant.exp * 1000).toISOString() : null,
    };
  };

  log.info({ issuer, mtls: mtlsOrigin }, 'consent bank started');
  return {
    issuer,
    mtlsBase,
    browserMiddleware,
    faults,
    calls: () => ({ ...calls }),
    callLog: () => [...callLog],
    async close() {
      unsubscribe();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** `page` and `page-size` as the Open Finance files define them (1.., 1..1000, default 25). */
function pagingOf(ctx: Context): Paging | string {
  const number = (name: string, fallback: number) => {
    const raw = ctx.query[name];
    if (raw === undefined) return fallback;
    return typeof raw === 'string' && /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  };
  const page = number('page', 1);
  const pageSize = number('page-size', DEFAULT_PAGE_SIZE);
  if (!(page >= 1) || !(page <= 2_147_483_647)) return 'page must be an integer from 1';
  if (!(pageSize >= 1) || !(pageSize <= MAX_PAGE_SIZE))
    return `page-size must be an integer from 1 to ${MAX_PAGE_SIZE}`;
  return { page, pageSize };
}
