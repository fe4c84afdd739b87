/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import { createHash, createPrivateKey, hkdfSync, randomUUID, type X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import Koa, { type Context, type Middleware } from 'koa';
import type { Clock } from '../../clock/clock.js';
import type { Database } from '../../db/database.js';
import { pageHeaders, sendHtml } from '../../html/respond.js';
import type { Logger } from '../../logging/logger.js';
import { normaliseCnpj, normaliseCpf } from '../../cpf/cpf.js';
import { loadOidcProvider } from '../load-provider.js';
import { brasilValidator, type BrasilValidator } from '../../open-finance/schemas.js';
import { PAGE_CSP } from '../pages.js';
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
  cardAccountsList,
  cardIdentification,
  cardLimits,
  cardTransactions,
  findCardAccount,
  findDepositAccount,
  type Paging,
} from '../resources.js';
import { checkSoftwareStatement, directoryPublicKey } from '../software-statement.js';
import { stateAdapterClass, stateKeys, type StateStoreOptions } from '../store.js';
import { certificateThumbprint, sameDn, subjectDnOf, type TestCaMaterial } from '../test-ca.js';
import { profileOf } from '../users.js';
import {
  authorise,
  consentData,
  createConsent,
  extend,
  extensionsData,
  isRefusal,
  parseZulu,
  refuse as refuseConsent,
  revoke,
  settle,
  zulu,
  type ConsentRecord,
  type Permission,
  type Refusal,
} from './consents.js';
import { BRASIL_MARKET, findBrasilUser, openPaginationKey, paginationKey, signInBrasil } from './market.js';
import { brasilConsentPage, brasilGonePage, brasilSignInPage, pickBrasilLanguage } from './pages.js';

/*
 * The simulated Open Finance Brasil bank (docs/open-finance.md, "Open Finance Brasil"): the `fapi1-br`
 * profile on oidc-provider (FAPI 1.0 Final: PAR required, PKCE, JARM for `code`, PS256, `tls_client_auth` or
 * `private_key_jwt`, certificate-bound tokens) and Brazil's data APIs beside it on the same mTLS listener:
 * consents 3.3.1, resources 3.1.0, accounts 2.4.2, credit cards 2.3.1, in BRL with CPF and CNPJ, paged with
 * a `pagination-key`. Every consent request is checked against the official file before the bank acts on it.
 *
 * It has its own issuer under the appliance's base URL (BRASIL_BANK_PATH) and its own state keys, so its
 * rows in `consent_bank_state` are invisible to the Chilean bank and the other way round.
 */

export const BRASIL_BANK_PATH = '/sandbox/consent-bank-br';
export const CONSENTS_BASE = '/open-banking/consents/v3';
export const RESOURCES_BASE = '/open-banking/resources/v3';
/** Brazil's rule for access tokens is 5 to 15 minutes; the bank gives 10, as the Chilean one does. */
export const BRASIL_ACCESS_TOKEN_TTL_S = 600;
/** The consent ids' URN namespace (`urn:bancoabierto-br:<uuid>`). */
export const CONSENT_NAMESPACE = 'bancoabierto-br';
/** The scopes of Brazil's data APIs this bank serves (consents table of the file). */
export const DATA_SCOPES = ['accounts', 'credit-cards-accounts', 'resources'] as const;
const CONSENT_SCOPE = /^consent:(urn:[a-zA-Z0-9][a-zA-Z0-9-]{0,31}:[a-zA-Z0-9()+,\-.:=@;$_!*'%/?#]+)$/;

export interface BrasilBankOptions {
  db: Database;
  ca: TestCaMaterial;
  clock: Clock;
  logger: Logger;
  publicBaseUrl: string;
  host?: string;
  /** The mTLS listener's port; 0 picks a free one. */
  port?: number;
}

export interface BrasilBank {
  issuer: string;
  mtlsBase: string;
  browserMiddleware: Middleware;
  /** A consent as the bank holds it now (tests read it to see what a revoke did). */
  consent(consentId: string): Promise<ConsentRecord | null>;
  close(): Promise<void>;
}

const MTLS_ROUTES = {
  token_endpoint: '/token',
  pushed_authorization_request_endpoint: '/par',
  registration_endpoint: '/reg',
  introspection_endpoint: '/token/introspection',
} as const;

function browserRoute(path: string): 'provider' | 'interaction' | null {
  if (path === '/auth' || /^\/auth\/[\w-]+$/.test(path)) return 'provider';
  if (path === '/.well-known/openid-configuration' || path === '/jwks') return 'provider';
  if (/^\/interaction\/[\w-]+(\/(login|confirm|abort))?$/.test(path)) return 'interaction';
  return null;
}

function peerCertificate(ctx: { req: IncomingMessage }): X509Certificate | undefined {
  const socket = ctx.req.socket as TLSSocket;
  if (!socket.encrypted) return undefined;
  return socket.getPeerX509Certificate() ?? undefined;
}

async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The consent id a scope string names (`consent:urn:…`), or null. */
export function consentIdOfScope(scope: unknown): string | null {
  if (typeof scope !== 'string') return null;
  for (const item of scope.split(' ')) {
    const match = CONSENT_SCOPE.exec(item);
    if (match) return match[1]!;
  }
  return null;
}

export async function startBrasilBank(options: BrasilBankOptions): Promise<BrasilBank> {
  const { db, ca, clock, logger } = options;
  const log = logger.child({ component: 'consent-bank-br' });
  const publicBase = new URL(options.publicBaseUrl);
  const issuer = `${publicBase.origin}${publicBase.pathname.replace(/\/$/, '')}${BRASIL_BANK_PATH}`;
  const issuerPath = new URL(issuer).pathname;
  // Keys of its own: its rows in the shared state table are found and opened by this bank only.
  const keys = stateKeys(
    Buffer.from(
      hkdfSync('sha256', Buffer.from(ca.stateSecret, 'hex'), Buffer.alloc(0), 'brasil', 32),
    ).toString('hex'),
  );
  const pagingSecret = Buffer.from(
    hkdfSync('sha256', Buffer.from(ca.stateSecret, 'hex'), Buffer.alloc(0), 'brasil pagination', 32),
  );
  const directoryKey = directoryPublicKey(ca.directoryKey);
  const validate: BrasilValidator = brasilValidator();

  let handleMtls: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server: Server = createServer(
    {
      key: ca.server.key,
      cert: ca.server.cert,
      ca: [ca.caCert],
      minVersion: 'TLSv1.2',
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => handleMtls(req, res),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const mtlsOrigin = `https://${options.host ?? '127.0.0.1'}:${port}`;
  const mtlsBase = `${mtlsOrigin}${issuerPath}`;

  const storeOptions: StateStoreOptions = { db, keys };
  const Adapter = stateAdapterClass(storeOptions);
  const consents = new Adapter('OpenFinanceBrasilConsent');
  const loadConsent = async (consentId: string): Promise<ConsentRecord | null> => {
    const found = (await consents.find(consentId)) as unknown as ConsentRecord | undefined;
    return found ? settle(found, clock.now()) : null;
  };
  const saveConsent = (record: ConsentRecord) =>
    consents.upsert(record.consentId, record as unknown as Record<string, unknown>);

  const { Provider, errors } = await loadOidcProvider(log);
  const signingJwk = {
    ...createPrivateKey(ca.bankSigningKey).export({ format: 'jwk' }),
    alg: 'PS256',
    use: 'sig',
  };
  const kid = createHash('sha256')
    .update(`br:${String(signingJwk.n)}`)
    .digest('base64url')
    .slice(0, 16);
  const cookieKey = createHash('sha256').update(`cookies-br:${ca.stateSecret}`).digest('base64url');

  const provider = new Provider(issuer, {
    adapter: Adapter,
    jwks: { keys: [{ ...signingJwk, kid }] },
    cookies: { keys: [cookieKey] },
    clientAuthMethods: ['tls_client_auth', 'private_key_jwt'],
    responseTypes: ['code id_token', 'code'],
    scopes: ['openid', 'consents', ...DATA_SCOPES],
    enabledJWA: {
      idTokenSigningAlgValues: ['PS256'],
      authorizationSigningAlgValues: ['PS256'],
      clientAuthSigningAlgValues: ['PS256'],
      requestObjectSigningAlgValues: ['PS256'],
    },
    routes: {
      pushed_authorization_request: MTLS_ROUTES.pushed_authorization_request_endpoint,
      registration: '/reg',
    },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      response_types: ['code'],
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_certificate_bound_access_tokens: true,
      id_token_signed_response_alg: 'PS256',
      authorization_signed_response_alg: 'PS256',
    },
    async findAccount(_ctx: unknown, sub: string) {
      return { accountId: sub, claims: async () => ({ sub }) };
    },
    pkce: { required: () => true },
    issueRefreshToken: async (_ctx: unknown, client: any) => client.grantTypeAllowed('refresh_token'),
    // Brazil: no refresh-token rotation; the refresh token lives as long as the consent (at most a year).
    rotateRefreshToken: false,
    ttl: {
      AccessToken: BRASIL_ACCESS_TOKEN_TTL_S,
      ClientCredentials: BRASIL_ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      IdToken: BRASIL_ACCESS_TOKEN_TTL_S,
      Interaction: 30 * 60,
      Session: 60 * 60,
      RefreshToken: 366 * 86_400,
      Grant: 366 * 86_400,
    },
    extraClientMetadata: {
      properties: ['software_statement'],
      validator(ctx: any, key: string, value: unknown, metadata: any) {
        if (key !== 'software_statement') return;
        if (ctx?.oidc?.route !== 'registration') return;
        const check = checkSoftwareStatement(value, directoryKey, Math.floor(clock.now() / 1000));
        if (!check.ok) throw new errors.InvalidSoftwareStatement(check.reason);
        const { claims } = check;
        const cert = peerCertificate(ctx);
        if (!cert || !sameDn(subjectDnOf(cert.toString()), claims.tls_client_auth_subject_dn))
          throw new errors.UnapprovedSoftwareStatement(
            'the client certificate is not the one the software statement names',
          );
        if (
          metadata.token_endpoint_auth_method === 'tls_client_auth' &&
          (typeof metadata.tls_client_auth_subject_dn !== 'string' ||
            !sameDn(metadata.tls_client_auth_subject_dn, claims.tls_client_auth_subject_dn))
        )
          throw new errors.UnapprovedSoftwareStatement(
            'tls_client_auth_subject_dn must be the software statement’s',
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
    features: {
      fapi: { enabled: true, profile: '1.0 Final' },
      pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: true },
      jwtResponseModes: { enabled: true },
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      revocation: { enabled: false },
      userinfo: { enabled: false },
      // The data APIs are one resource, the mTLS base. Its scopes are the static ones plus the `consent:<id>`
      // a request, code or refresh token carries: oidc-provider drops any scope its resource does not list.
      resourceIndicators: {
        enabled: true,
        defaultResource: () => mtlsBase,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx: any, resource: string) => {
          if (resource !== mtlsBase)
            throw new errors.InvalidTarget('the only resource is the bank’s mTLS base');
          const carried = [
            ctx.oidc?.params?.scope,
            ctx.oidc?.entities?.AuthorizationCode?.scope,
            ctx.oidc?.entities?.RefreshToken?.scope,
          ];
          const dynamic = carried.flatMap((scope) =>
            typeof scope === 'string' ? scope.split(' ').filter((s) => CONSENT_SCOPE.test(s)) : [],
          );
          return {
            scope: ['consents', ...DATA_SCOPES, ...new Set(dynamic)].join(' '),
            audience: mtlsBase,
            accessTokenFormat: 'opaque',
            accessTokenTTL: BRASIL_ACCESS_TOKEN_TTL_S,
          };
        },
      },
      mTLS: {
        enabled: true,
        certificateBoundAccessTokens: true,
        tlsClientAuth: true,
        getCertificate: (ctx: any) => peerCertificate(ctx),
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
    },
    renderError: async (ctx: any, out: { error: string }) => {
      const language = pickBrasilLanguage(undefined, ctx.get('accept-language'));
      pageHeaders(ctx, PAGE_CSP);
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = brasilGonePage(language).toString();
      log.info({ error: out.error }, 'consent bank (Brazil): browser request refused');
    },
  });
  provider.proxy = true;
  provider.silent = true;
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    log.error({ err: { message: error.message } }, 'consent bank (Brazil): server error'),
  );

  provider.use(async (ctx: any, next: () => Promise<void>) => {
    await next();
    if (ctx.oidc?.route === 'discovery' && ctx.status === 200) {
      const aliases: Record<string, string> = {};
      for (const [name, path] of Object.entries(MTLS_ROUTES)) aliases[name] = `${mtlsBase}${path}`;
      Object.assign(ctx.body, aliases, {
        mtls_endpoint_aliases: aliases,
        code_challenge_methods_supported: ['S256'],
      });
    }
  });

  const callProvider = provider.callback() as (req: IncomingMessage, res: ServerResponse) => Promise<void>;
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
        ctx.status = 404;
        ctx.body = { error: 'invalid_request', error_description: `Machine endpoints are at ${mtlsBase}` };
    }
  };

  /** Sign-in with a CPF, the consent page, and their answers; the consent resource follows the decision. */
  const interaction = async (ctx: Context, path: string): Promise<void> => {
    const [, , uid, step] = path.split('/') as [string, string, string, string | undefined];
    let details: any;
    try {
      details = await provider.interactionDetails(ctx.req, ctx.res);
    } catch {
      pageHeaders(ctx, PAGE_CSP);
      return sendHtml(ctx, 400, brasilGonePage(pickBrasilLanguage(undefined, ctx.get('accept-language'))));
    }
    const language = pickBrasilLanguage(details.params.ui_locales, ctx.get('accept-language'));
    pageHeaders(ctx, PAGE_CSP);
    if (details.uid !== uid) return sendHtml(ctx, 400, brasilGonePage(language));
    const base = `${issuerPath}/interaction/${uid}`;
    const finish = async (result: unknown, merge: boolean) => {
      ctx.respond = false;
      await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
    };
    const consentId = consentIdOfScope(details.params.scope);
    const record = consentId ? await loadConsent(consentId) : null;
    // The PAR's scope names the consent; one that is gone, not this client's, or no longer awaiting ends here.
    if (!record || record.clientId !== details.params.client_id || record.status !== 'AWAITING_AUTHORISATION')
      return sendHtml(ctx, 400, brasilGonePage(language));

    if (step === undefined && ctx.method === 'GET') {
      if (details.prompt.name === 'login')
        return sendHtml(ctx, 200, brasilSignInPage(language, `${base}/login`, false, ''));
      const client = await provider.Client.find(details.params.client_id);
      return sendHtml(
        ctx,
        200,
        brasilConsentPage(language, {
          clientName: client?.clientName ?? details.params.client_id,
          cpf: details.session?.accountId ?? '',
          permissions: record.permissions,
          expires: record.expirationDateTime === null ? null : zulu(record.expirationDateTime).slice(0, 10),
          approveAction: `${base}/confirm`,
          refuseAction: `${base}/abort`,
        }),
      );
    }
    if (ctx.method !== 'POST' || step === undefined) {
      ctx.status = 405;
      return;
    }
    const form = new URLSearchParams(await readBody(ctx.req, 8_192).catch(() => ''));
    const now = clock.now();
    if (step === 'login') {
      const user = signInBrasil(form.get('cpf') ?? '', form.get('password') ?? '');
      if (!user)
        return sendHtml(ctx, 401, brasilSignInPage(language, `${base}/login`, true, form.get('cpf') ?? ''));
      return finish({ login: { accountId: user.cpf } }, false);
    }
    if (step === 'abort') {
      await saveConsent(refuseConsent(record, 'USER', 'CUSTOMER_MANUALLY_REJECTED', now));
      return finish({ error: 'access_denied', error_description: 'The customer refused the consent' }, false);
    }
    // confirm
    const cpf: string | undefined = details.session?.accountId;
    if (!cpf) return sendHtml(ctx, 400, brasilGonePage(language));
    if (findBrasilUser(cpf)?.refusesConsent) {
      await saveConsent(refuseConsent(record, 'ASPSP', 'INTERNAL_SECURITY_REASON', now));
      return finish({ error: 'access_denied', error_description: 'The bank refused the consent' }, false);
    }
    const authorised = authorise(record, cpf, now);
    if (isRefusal(authorised)) {
      // Signed in as someone else than the consent's customer: Brazil's banks reject such a consent.
      await saveConsent(refuseConsent(record, 'ASPSP', 'INTERNAL_SECURITY_REASON', now));
      return finish({ error: 'access_denied', error_description: authorised.detail }, false);
    }
    await saveConsent(authorised);
    const grant = new provider.Grant({ accountId: cpf, clientId: details.params.client_id });
    const asked = String(details.params.scope ?? '').split(' ');
    // The data scopes asked, and this consent's own, on the data APIs' resource (the static ones are also
    // the library's OIDC scopes, so they go on both): a token reads only what its consent allows.
    const data = DATA_SCOPES.filter((s) => asked.includes(s));
    grant.addOIDCScope([...(asked.includes('openid') ? ['openid'] : []), ...data].join(' '));
    grant.addResourceScope(mtlsBase, [...data, `consent:${record.consentId}`].join(' '));
    const grantId = await grant.save();
    return finish({ consent: { grantId } }, true);
  };

  const mtlsApp = new Koa();
  mtlsApp.silent = true;
  mtlsApp.use(async (ctx) => {
    if (!ctx.path.startsWith(`${issuerPath}/`)) {
      ctx.status = 404;
      return;
    }
    const path = ctx.path.slice(issuerPath.length);
    const asked = ctx.get('x-fapi-interaction-id');
    if (path.startsWith('/open-banking/'))
      ctx.set('x-fapi-interaction-id', /^[0-9a-f-]{36}$/i.test(asked) ? asked : randomUUID());
    if (path === CONSENTS_BASE + '/consents' || path.startsWith(`${CONSENTS_BASE}/consents/`))
      return consentsApi(ctx, path.slice(`${CONSENTS_BASE}/consents`.length));
    if (path.startsWith('/open-banking/')) return dataApi(ctx, path);
    return delegate(ctx, new URL(mtlsOrigin));
  });
  handleMtls = mtlsApp.callback();

  /** The files' `ResponseError`. */
  const fail = (ctx: Context, status: number, code: string, detail: string, oauth?: string) => {
    ctx.status = status;
    if (oauth) ctx.set('WWW-Authenticate', `Bearer error="${oauth}"`);
    // `totalRecords`/`totalPages` too: the data files' error meta requires them; the consents file allows them.
    ctx.body = {
      errors: [{ code, title: code, detail }],
      meta: { totalRecords: 1, totalPages: 1, requestDateTime: zulu(clock.now()) },
    };
  };
  const refused = (ctx: Context, refusal: Refusal) => fail(ctx, refusal.status, refusal.code, refusal.detail);

  /** The token a call carries, of the kind asked, bound to the caller's certificate. */
  const bearer = async (ctx: Context, kind: 'ClientCredentials' | 'AccessToken'): Promise<any | null> => {
    const match = /^Bearer ([^\s]+)$/.exec(ctx.get('authorization'));
    if (!match) {
      fail(ctx, 401, 'UNAUTHORIZED', 'An access token is required', 'invalid_token');
      return null;
    }
    const token = await provider[kind].find(match[1]);
    const cert = peerCertificate(ctx);
    if (!token || token.isExpired) {
      fail(ctx, 401, 'UNAUTHORIZED', 'The access token is invalid or expired', 'invalid_token');
      return null;
    }
    const bound: string | undefined = token['x5t#S256'];
    if (bound === undefined || !cert || certificateThumbprint(cert) !== bound) {
      fail(ctx, 401, 'UNAUTHORIZED', 'The access token is not bound to this certificate', 'invalid_token');
      return null;
    }
    return token;
  };

  const readJson = async (ctx: Context): Promise<unknown> => {
    if (!/^application\/json\b/i.test(ctx.get('content-type'))) {
      fail(ctx, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Send application/json');
      return undefined;
    }
    try {
      return JSON.parse(await readBody(ctx.req, 16_384));
    } catch {
      fail(ctx, 400, 'PARAMETRO_INVALIDO', 'The body is not JSON');
      return undefined;
    }
  };

  const schemaProblem = (schema: string, body: unknown): string | null => {
    const check = validate('consents-3.3.1', schema);
    if (check(body)) return null;
    return (check.errors ?? [])
      .slice(0, 3)
      .map((e) => `${e.instancePath || 'the body'} ${e.message ?? 'is invalid'}`)
      .join('; ');
  };

  const selfOf = (consentId: string, tail = '') =>
    `${mtlsBase}${CONSENTS_BASE}/consents/${encodeURIComponent(consentId)}${tail}`;

  /** consents 3.3.1: POST /consents, GET and DELETE /consents/{id}, POST /extends, GET /extensions. */
  const consentsApi = async (ctx: Context, rest: string): Promise<void> => {
    const now = clock.now();
    if (rest === '') {
      if (ctx.method !== 'POST') return fail(ctx, 405, 'METHOD_NOT_ALLOWED', 'POST creates a consent');
      const token = await bearer(ctx, 'ClientCredentials');
      if (!token) return;
      if (
        !String(token.scope ?? '')
          .split(' ')
          .includes('consents')
      )
        return fail(ctx, 403, 'FORBIDDEN', 'The token lacks the consents scope');
      const body = await readJson(ctx);
      if (body === undefined) return;
      const problem = schemaProblem('CreateConsent', body);
      if (problem) return fail(ctx, 400, 'PARAMETRO_INVALIDO', problem);
      const data = (body as { data: any }).data;
      const cpf = normaliseCpf(String(data.loggedUser.document.identification));
      if (data.loggedUser.document.rel !== 'CPF' || !cpf)
        return fail(ctx, 400, 'PARAMETRO_INVALIDO', 'loggedUser.document must be a valid CPF (rel CPF)');
      let cnpj: string | null = null;
      if (data.businessEntity) {
        cnpj = normaliseCnpj(String(data.businessEntity.document?.identification ?? ''));
        if (!cnpj)
          return fail(ctx, 400, 'PARAMETRO_INVALIDO', 'businessEntity.document must be a valid CNPJ');
      }
      const expiration = data.expirationDateTime === undefined ? null : parseZulu(data.expirationDateTime);
      if (data.expirationDateTime !== undefined && expiration === null)
        return fail(ctx, 400, 'PARAMETRO_INVALIDO', 'expirationDateTime is not a date-time');
      const created = createConsent(
        {
          clientId: token.clientId,
          cpf,
          cnpj,
          permissions: data.permissions,
          expirationDateTime: expiration,
        },
        now,
        CONSENT_NAMESPACE,
      );
      if (isRefusal(created)) return refused(ctx, created);
      await saveConsent(created);
      log.info({ client: token.clientId }, 'consent bank (Brazil): consent created');
      ctx.status = 201;
      ctx.body = {
        data: consentData(created, false),
        links: { self: selfOf(created.consentId) },
        meta: { requestDateTime: zulu(now) },
      };
      return;
    }
    const match = /^\/([^/]+)(\/extends|\/extensions)?$/.exec(rest);
    if (!match) return fail(ctx, 404, 'NOT_FOUND', 'No such resource');
    const consentId = decodeURIComponent(match[1]!);
    const tail = match[2];
    const wants = tail === undefined ? 'ClientCredentials' : 'AccessToken';
    const token = await bearer(ctx, wants);
    if (!token) return;
    const record = /^urn:/.test(consentId) ? await loadConsent(consentId) : null;
    if (!record || record.clientId !== token.clientId)
      return fail(ctx, 404, 'NOT_FOUND', 'No consent of this client has that id');
    if (tail === undefined) {
      if (ctx.method === 'GET') {
        ctx.status = 200;
        ctx.body = {
          data: consentData(record, true),
          links: { self: selfOf(consentId) },
          meta: { requestDateTime: zulu(now) },
        };
        return;
      }
      if (ctx.method !== 'DELETE') return fail(ctx, 405, 'METHOD_NOT_ALLOWED', 'GET or DELETE');
      const revoked = revoke(record, now);
      if (isRefusal(revoked)) return refused(ctx, revoked);
      await saveConsent(revoked);
      log.info({ client: token.clientId }, 'consent bank (Brazil): consent revoked');
      ctx.status = 204;
      return;
    }
    // Extensions: an authorization_code token of this very consent.
    if (consentIdOfScope(token.scope) !== consentId)
      return fail(ctx, 403, 'FORBIDDEN', 'The token is not of this consent');
    if (tail === '/extensions') {
      if (ctx.method !== 'GET') return fail(ctx, 405, 'METHOD_NOT_ALLOWED', 'GET');
      const data = extensionsData(record);
      ctx.status = 200;
      ctx.body = {
        data,
        links: { self: selfOf(consentId, '/extensions') },
        meta: { totalRecords: data.length, totalPages: 1, requestDateTime: zulu(now) },
      };
      return;
    }
    if (ctx.method !== 'POST') return fail(ctx, 405, 'METHOD_NOT_ALLOWED', 'POST extends a consent');
    const body = await readJson(ctx);
    if (body === undefined) return;
    const problem = schemaProblem('CreateConsentExtensions', body);
    if (problem) return fail(ctx, 400, 'PARAMETRO_INVALIDO', problem);
    const data = (body as { data: any }).data;
    const expiration = data.expirationDateTime === undefined ? null : parseZulu(data.expirationDateTime);
    if (data.expirationDateTime !== undefined && expiration === null)
      return fail(ctx, 400, 'PARAMETRO_INVALIDO', 'expirationDateTime is not a date-time');
    const ip = ctx.get('x-fapi-customer-ip-address');
    const agent = ctx.get('x-customer-user-agent');
    if (!ip || !agent)
      return fail(
        ctx,
        400,
        'PARAMETRO_NAO_INFORMADO',
        'x-fapi-customer-ip-address and x-customer-user-agent are required',
      );
    const extended = extend(
      record,
      {
        cpf: normaliseCpf(String(data.loggedUser.document.identification)) ?? '',
        expirationDateTime: expiration,
        ipAddress: ip,
        userAgent: agent,
      },
      now,
    );
    if (isRefusal(extended)) return refused(ctx, extended);
    await saveConsent(extended);
    ctx.status = 201;
    ctx.body = {
      data: consentData(extended, false),
      links: { self: selfOf(consentId) },
      meta: { requestDateTime: zulu(now) },
    };
  };

  /** `page`, `page-size` and `pagination-key`, and the moment the list is cut at. */
  const pagingOf = (ctx: Context, listPath: string, now: number): { paging: Paging; at: number } | string => {
    const number = (name: string, fallback: number) => {
      const raw = ctx.query[name];
      if (raw === undefined) return fallback;
      return typeof raw === 'string' && /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
    };
    const page = number('page', 1);
    const pageSize = number('page-size', DEFAULT_PAGE_SIZE);
    if (!(page >= 1)) return 'page must be an integer from 1';
    if (!(pageSize >= 1) || !(pageSize <= MAX_PAGE_SIZE))
      return `page-size must be an integer from 1 to ${MAX_PAGE_SIZE}`;
    const given = ctx.query['pagination-key'];
    if (given === undefined)
      return { paging: { page, pageSize, key: paginationKey(pagingSecret, listPath, now) }, at: now };
    if (typeof given !== 'string') return 'pagination-key must be given once';
    const at = openPaginationKey(pagingSecret, listPath, given, now);
    if (at === null)
      return 'pagination-key is not one this bank gave for this list, or is older than 10 minutes';
    return { paging: { page, pageSize, key: given }, at };
  };

  /** resources 3.1.0, accounts 2.4.2 and credit cards 2.3.1, for a token of an authorised consent. */
  const dataApi = async (ctx: Context, path: string): Promise<void> => {
    if (ctx.method !== 'GET') return fail(ctx, 405, 'METHOD_NOT_ALLOWED', 'Only GET');
    const token = await bearer(ctx, 'AccessToken');
    if (!token) return;
    const consentId = consentIdOfScope(token.scope);
    const record = consentId ? await loadConsent(consentId) : null;
    if (!record || record.status !== 'AUTHORISED')
      return fail(
        ctx,
        401,
        'UNAUTHORIZED',
        'The consent is not authorised (revoked, rejected or expired)',
        'invalid_token',
      );
    const user = findBrasilUser(record.cpf);
    if (!user) return fail(ctx, 403, 'FORBIDDEN', 'No such customer');
    const rut = user.dataRut;
    const now = clock.now();
    const scopes = new Set(String(token.scope).split(' '));
    const need = (permission: Permission, scope: string) => {
      if (record.permissions.includes(permission) && scopes.has(scope)) return true;
      fail(ctx, 403, 'FORBIDDEN', `The consent does not cover ${permission}`);
      return false;
    };
    const self = new URL(ctx.href.replace(/^http:/, 'https:'));
    const parts = path.split('/').filter(Boolean);
    const family = `/${parts.slice(0, 3).join('/')}`;
    const [collection, id, leaf, extra] = parts.slice(3);
    const listPath = `${family}/${parts.slice(3).join('/')}`;
    const cut = pagingOf(ctx, listPath, now);
    if (typeof cut === 'string') return fail(ctx, 422, 'PAGINACAO_INVALIDA', cut);
    const { paging, at } = cut;
    const answer = (body: unknown) => {
      ctx.status = 200;
      ctx.body = body;
    };
    const window = () =>
      bookingWindow(
        ctx.query.fromBookingDate ? String(ctx.query.fromBookingDate) : null,
        ctx.query.toBookingDate ? String(ctx.query.toBookingDate) : null,
        at,
      );
    if (family === RESOURCES_BASE && collection === 'resources' && id === undefined) {
      if (!need('RESOURCES_READ', 'resources')) return;
      const profile = profileOf(rut);
      const all = profile.accounts
        .filter((spec) =>
          spec.type === 'credit_card'
            ? record.permissions.includes('CREDIT_CARDS_ACCOUNTS_READ')
            : record.permissions.includes('ACCOUNTS_READ'),
        )
        .filter((spec) =>
          spec.type === 'credit_card' ? findCardAccount(rut, spec.ref) : findDepositAccount(rut, spec.ref),
        )
        .map((spec) => ({
          resourceId: spec.ref,
          type: spec.type === 'credit_card' ? 'CREDIT_CARD_ACCOUNT' : 'ACCOUNT',
          status: 'AVAILABLE',
        }));
      const page = all.slice((paging.page - 1) * paging.pageSize, paging.page * paging.pageSize);
      const pages = Math.max(1, Math.ceil(all.length / paging.pageSize));
      return answer({
        data: page,
        links: { self: self.href },
        meta: { totalRecords: all.length, totalPages: pages, requestDateTime: zulu(now) },
      });
    }
    if (collection !== 'accounts' || extra !== undefined)
      return fail(ctx, 404, 'NOT_FOUND', 'No such resource');
    if (family === ACCOUNTS_BASE) {
      if (!need('ACCOUNTS_READ', 'accounts')) return;
      if (id === undefined) return answer(accountsList(rut, self, paging, at, BRASIL_MARKET));
      const spec = findDepositAccount(rut, id);
      if (!spec) return fail(ctx, 404, 'NOT_FOUND', 'No such account');
      if (leaf === undefined) return answer(accountIdentification(spec, self, now, BRASIL_MARKET));
      if (leaf === 'balances')
        return need('ACCOUNTS_BALANCES_READ', 'accounts')
          ? answer(accountBalances(rut, spec, self, now, BRASIL_MARKET))
          : undefined;
      if (leaf === 'transactions') {
        if (!need('ACCOUNTS_TRANSACTIONS_READ', 'accounts')) return;
        const w = window();
        if (!w)
          return fail(
            ctx,
            422,
            'PARAMETRO_INVALIDO',
            'fromBookingDate/toBookingDate must be YYYY-MM-DD, from before to',
          );
        return answer(accountTransactions(rut, spec, w, self, paging, at, BRASIL_MARKET));
      }
    }
    if (family === CREDIT_CARDS_BASE) {
      if (!need('CREDIT_CARDS_ACCOUNTS_READ', 'credit-cards-accounts')) return;
      if (id === undefined) return answer(cardAccountsList(rut, self, paging, at, BRASIL_MARKET));
      const spec = findCardAccount(rut, id);
      if (!spec) return fail(ctx, 404, 'NOT_FOUND', 'No such credit-card account');
      if (leaf === undefined) return answer(cardIdentification(spec, self, now));
      if (leaf === 'limits')
        return need('CREDIT_CARDS_ACCOUNTS_LIMITS_READ', 'credit-cards-accounts')
          ? answer(cardLimits(rut, spec, self, now, BRASIL_MARKET))
          : undefined;
      if (leaf === 'transactions') {
        if (!need('CREDIT_CARDS_ACCOUNTS_TRANSACTIONS_READ', 'credit-cards-accounts')) return;
        const w = window();
        if (!w)
          return fail(
            ctx,
            422,
            'PARAMETRO_INVALIDO',
            'fromBookingDate/toBookingDate must be YYYY-MM-DD, from before to',
          );
        return answer(cardTransactions(rut, spec, w, self, paging, at, BRASIL_MARKET));
      }
    }
    return fail(ctx, 404, 'NOT_FOUND', 'No such resource');
  };

  log.info({ issuer, mtls: mtlsOrigin }, 'consent bank (Brazil) started');
  return {
    issuer,
    mtlsBase,
    browserMiddleware,
    consent: loadConsent,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
