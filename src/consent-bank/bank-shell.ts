/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import { createHash, createPrivateKey, hkdfSync, type KeyObject, type X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import Koa, { type Context, type Middleware } from 'koa';
import {
  altersTokenAnswers,
  authorizationResponseWithFault,
  discoveryWithFaults,
  tokenAnswerWithFaults,
} from './answer-faults.js';
import type { BankOptions, BankProfile, BankRuntime, ProviderContext, ShellContext } from './bank-profile.js';
import { ConsentBankFaults } from './faults.js';
import { interactionStep } from './interactions.js';
import { loadOidcProvider } from './load-provider.js';
import { providerConfiguration } from './provider-setup.js';
import { resourceCall } from './resource-call.js';
import { specRouter } from './resource-server.js';
import { setExpiry, stateAdapterClass, stateKeys, type StateStoreOptions } from './store.js';
import { makeForeignServerCertificate } from './test-ca.js';
import { builtInFaults } from './users.js';

/*
 * The bank shell: what both simulated banks are made of, written once. Two faces share one oidc-provider:
 * the browser face (the authorization endpoint, discovery, the sign-in and consent pages) is mounted by the
 * appliance's HTTP server under the bank's path; the machine face (token, PAR, registration, introspection,
 * the profile's own endpoints and the Open Finance resource APIs) is the bank's own mTLS listener on loopback.
 * A country is a profile (bank-profile.ts): chile/ and brasil/.
 */

export type CallKind = 'token' | 'resources' | 'grant_management' | 'other';

export interface RunningBank {
  issuer: string;
  /** The machine face's base, `https://127.0.0.1:<port><path>`. */
  mtlsBase: string;
  /** The browser face: the appliance's HTTP server mounts it (it answers only under the bank's path). */
  browserMiddleware: Middleware;
  faults: ConsentBankFaults;
  /** Requests the mTLS face answered since the bank started, by kind: what a test counts to bound our calls. */
  calls(): Readonly<Record<CallKind, number>>;
  /**
   * When the mTLS face received each of its latest calls (the bank's clock, ms), their kind and their path
   * (under the issuer, no query; `callName` names it). The last 10,000.
   */
  callLog(): readonly { kind: CallKind; at: number; path: string }[];
  close(): Promise<void>;
  /** The running parts, for a profile's own additions (Brazil's consent reader). */
  context: ProviderContext;
}

/** The models the invalidate-all fault hides: every grant and every token of one. */
const GRANT_MODELS = new Set(['Grant', 'AccessToken', 'RefreshToken']);
const CALL_LOG_SIZE = 10_000;

function peerCertificate(ctx: { req: IncomingMessage }): X509Certificate | undefined {
  const socket = ctx.req.socket as TLSSocket;
  if (!socket.encrypted) return undefined;
  return socket.getPeerX509Certificate() ?? undefined;
}

function derivedHex(secretHex: string, label: string): string {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secretHex, 'hex'), Buffer.alloc(0), label, 32)).toString(
    'hex',
  );
}

/** The mTLS listener, started first: the port (0 in tests) must be known before discovery names the aliases. */
async function listen(options: BankOptions, profile: BankProfile, faults: ConsentBankFaults) {
  const { ca } = options;
  const context = {
    key: ca.server.key,
    cert: ca.server.cert,
    ca: [ca.caCert],
    minVersion: profile.tlsMinVersion,
  };
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server: Server = createServer(
    { ...context, requestCert: true, rejectUnauthorized: true },
    (req, res) => handler(req, res),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? profile.defaultPort, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const foreign = await makeForeignServerCertificate(options.clock.now());
  // A fault that swaps the server certificate applies to new TLS connections.
  const unsubscribe = faults.onChange(() =>
    server.setSecureContext(
      faults.bankWide.foreignServerCertificate ? { ...context, ...foreign, ca: [] } : context,
    ),
  );
  return {
    origin: `https://${options.host ?? '127.0.0.1'}:${port}`,
    serve: (next: typeof handler) => {
      handler = next;
    },
    async close() {
      unsubscribe();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** The state store, with the faults' hooks (unbound tokens, replayed codes, every grant gone at once). */
function stateStore(
  options: BankOptions,
  profile: BankProfile,
  faults: ConsentBankFaults,
): StateStoreOptions {
  const secret = options.ca.stateSecret;
  return {
    db: options.db,
    // Each bank's own keys: its rows in the shared table are found and opened by that bank only.
    keys: stateKeys(profile.stateLabel === null ? secret : derivedHex(secret, profile.stateLabel)),
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
      shouldConsume: (model, payload) =>
        !(
          model === 'AuthorizationCode' &&
          faults.forUser(payload.accountId as string | undefined).acceptReplayedCode
        ),
    },
  };
}

/**
 * Hooks on the library's own answers: discovery's aliases, a token answer's extras, a PAR's fault, and the
 * client conformance faults (answer-faults.ts), applied last to what the bank would otherwise have sent.
 */
function providerHooks(
  provider: any,
  context: ShellContext,
  aliases: Record<string, string>,
  extra: Record<string, unknown>,
  signingKey: KeyObject,
) {
  const { faults } = context;
  return (runtime: () => BankRuntime) =>
    provider.use(async (ctx: any, next: () => Promise<void>) => {
      await next();
      const route = ctx.oidc?.route;
      if (route === 'discovery' && ctx.status === 200) {
        const named: Record<string, string> = {};
        for (const [name, path] of Object.entries(aliases)) named[name] = `${context.mtlsBase}${path}`;
        // Every machine endpoint needs the client certificate: the top-level names point at the mTLS face too.
        Object.assign(
          ctx.body,
          named,
          { mtls_endpoint_aliases: named, code_challenge_methods_supported: ['S256'] },
          extra,
        );
        ctx.body = discoveryWithFaults(ctx.body, faults.bankWide);
      }
      if ((route === 'authorization' || route === 'resume') && ctx.status === 303) {
        const location = authorizationResponseWithFault(
          ctx.response.get('location'),
          context.issuer,
          faults.bankWide.authorizationResponse,
        );
        if (location !== null) ctx.redirect(location);
      }
      if (route === 'token' && ctx.status === 200) {
        const token = ctx.oidc.entities?.AccessToken;
        const more = token ? runtime().tokenAnswer?.(token) : undefined;
        if (more) ctx.body = { ...ctx.body, ...more };
        const grantType = ctx.oidc.params?.grant_type;
        if (grantType === 'refresh_token') faults.noteRefresh();
        if (altersTokenAnswers(faults.bankWide))
          ctx.body = await tokenAnswerWithFaults(ctx.body, grantType, faults.bankWide, signingKey);
      }
      const ttl = context.faults.bankWide.requestUriTtlSeconds;
      if (route === 'pushed_authorization_request' && ctx.status === 201 && ttl !== undefined) {
        const id = String(ctx.body.request_uri).split(':').pop() as string;
        await setExpiry(
          context.store,
          'PushedAuthorizationRequest',
          id,
          Date.now() + ttl * 1000 - (ttl === 0 ? 1 : 0),
        );
        ctx.body = { ...ctx.body, expires_in: ttl };
      }
    });
}

/**
 * What a call asked for, by its path under the issuer: `token`, `accounts list`, `balances`, `account`,
 * `transactions`, `cards list`, `card`, `card limits`, `card transactions`, `resources list`, `customers`, `consents`,
 * `grant management`, or `other`. The benches and tests count a sync's calls by it.
 */
export function callName(path: string): string {
  if (path === '/token') return 'token';
  if (path.startsWith('/grants/')) return 'grant management';
  if (path.startsWith('/open-banking/consents/')) return 'consents';
  if (path.startsWith('/open-banking/resources/')) return 'resources list';
  if (path.startsWith('/open-banking/customers/')) return 'customers';
  const account = /^\/open-banking\/accounts\/v\d+\/accounts(?:\/[^/]+(\/[a-z-]+)?)?$/.exec(path);
  if (account) {
    if (path.endsWith('/accounts')) return 'accounts list';
    if (account[1] === undefined) return 'account';
    return account[1] === '/transactions' ? 'transactions' : account[1].slice(1);
  }
  const card = /^\/open-banking\/credit-cards-accounts\/v\d+\/accounts(?:\/[^/]+(\/[a-z-]+)?)?$/.exec(path);
  if (card) {
    if (path.endsWith('/accounts')) return 'cards list';
    if (card[1] === undefined) return 'card';
    return card[1] === '/limits'
      ? 'card limits'
      : card[1] === '/transactions'
        ? 'card transactions'
        : `card ${card[1].slice(1)}`;
  }
  return 'other';
}

function callKind(path: string, token: string): CallKind {
  if (path.startsWith('/open-banking/')) return 'resources';
  if (path.startsWith('/grants/')) return 'grant_management';
  return path === token ? 'token' : 'other';
}

/**
 * oidc-provider refuses an `http:` redirect URI to a client that registers an ID token in the front channel
 * (`code id_token`, OAuth 2.0 Multiple Response Types §3), as OpenID Connect Registration §2 says for web
 * clients. The simulated bank's clients are the appliance on its own loopback address (`http://127.0.0.1`, the
 * software statement names each URI), so it lets those two checks pass, as the library's documentation shows;
 * a real bank, and the appliance in production, use https.
 */
function allowLoopbackHybridRedirects(provider: { Client: { Schema: { prototype: any } } }): void {
  const schema = provider.Client.Schema.prototype;
  const invalidate = schema.invalidate as (message: string, code?: string) => void;
  schema.invalidate = function (this: unknown, message: string, code?: string) {
    if (code === 'implicit-force-https' || code === 'implicit-forbid-localhost') return;
    invalidate.call(this, message, code);
  };
}

/** Starts one simulated bank of `profile`. */
export async function startBank(options: BankOptions, profile: BankProfile): Promise<RunningBank> {
  const { ca, clock } = options;
  const log = options.logger.child({ component: profile.component });
  const faults = options.faults ?? new ConsentBankFaults(builtInFaults);
  const publicBase = new URL(options.publicBaseUrl);
  const issuer = `${publicBase.origin}${publicBase.pathname.replace(/\/$/, '')}${profile.path}`;
  const issuerPath = new URL(issuer).pathname;
  const listener = await listen(options, profile, faults);
  const [{ Provider, errors, defaults }, router] = await Promise.all([
    loadOidcProvider(log),
    specRouter(profile.files, profile.market, profile.documents),
  ]).catch(async (error) => {
    await listener.close();
    throw error;
  });
  const context: ShellContext = {
    issuer,
    issuerPath,
    mtlsOrigin: listener.origin,
    mtlsBase: `${listener.origin}${issuerPath}`,
    clock,
    log,
    faults,
    data: options.data,
    store: stateStore(options, profile, faults),
    errors,
    peerCertificate,
    options: {
      authorizationResponses: options.authorizationResponses,
      clientAuthMethods: options.clientAuthMethods,
    },
  };
  const parts = profile.parts(context);
  const signingJwk = {
    ...createPrivateKey(ca.bankSigningKey).export({ format: 'jwk' }),
    alg: 'PS256',
    use: 'sig',
  };
  const provider = new Provider(
    issuer,
    providerConfiguration(context, profile, parts, {
      refreshTokens: options.refreshTokens ?? profile.refreshTokens,
      signingJwk: {
        ...signingJwk,
        kid: createHash('sha256')
          .update(`${profile.keyLabel}${String(signingJwk.n)}`)
          .digest('base64url')
          .slice(0, 16),
      },
      cookieKey: createHash('sha256')
        .update(`cookies${profile.keyLabel}:${ca.stateSecret}`)
        .digest('base64url'),
      adapter: stateAdapterClass(context.store),
      directoryKeyPem: ca.directoryKey,
      libraryRotateRefreshToken: defaults.rotateRefreshToken,
    }),
  );
  // The faces set the forwarded headers themselves (below), from the configured bases, never the client's.
  provider.proxy = true;
  provider.silent = true;
  allowLoopbackHybridRedirects(provider);
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    log.error({ err: { message: error.message } }, 'consent bank: server error'),
  );
  const running: ProviderContext = { ...context, provider };
  const runtime = profile.runtime(running);
  providerHooks(
    provider,
    context,
    parts.aliases,
    parts.discovery,
    createPrivateKey(ca.bankSigningKey),
  )(() => runtime);

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
    // The access line and the metrics name the bank's route, as the API's router does for its own: without
    // it, the discovery and JWKS reads of the start-up registration logged `GET unmatched 200`.
    ctx.state.routePath = `${issuerPath}${browserRoute(path)}`;
    if (
      path === '/auth' ||
      /^\/auth\/[\w-]+$/.test(path) ||
      path === '/.well-known/openid-configuration' ||
      path === '/jwks'
    )
      return delegate(ctx, publicBase);
    if (/^\/interaction\/[\w-]+(\/(login|confirm|abort))?$/.test(path))
      return interactionStep(ctx, path, running, parts.pages);
    ctx.status = 404;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      error: 'invalid_request',
      error_description: `No browser endpoint here; machine endpoints are at ${context.mtlsBase} (mtls_endpoint_aliases)`,
    };
  };

  const calls: Record<CallKind, number> = { token: 0, resources: 0, grant_management: 0, other: 0 };
  const callLog: { kind: CallKind; at: number; path: string }[] = [];
  const machine = new Koa();
  machine.silent = true;
  machine.use(async (ctx) => {
    if (ctx.path !== issuerPath && !ctx.path.startsWith(`${issuerPath}/`)) {
      ctx.status = 404;
      ctx.body = { error: 'invalid_request', error_description: 'Not an endpoint of the consent bank' };
      return;
    }
    const path = ctx.path.slice(issuerPath.length);
    const kind = callKind(path, '/token');
    calls[kind] += 1;
    callLog.push({ kind, at: clock.now(), path });
    if (callLog.length > CALL_LOG_SIZE) callLog.splice(0, callLog.length - CALL_LOG_SIZE);
    if (kind === 'resources') return resourceCall(ctx, path, running, runtime, router, profile.keyLabel);
    if (runtime.machine && (await runtime.machine(ctx, path))) return;
    const delay = faults.bankWide.tokenDelayMs;
    if (delay && kind === 'token') await sleep(delay);
    return delegate(ctx, new URL(listener.origin));
  });
  listener.serve(machine.callback());

  log.info({ issuer, mtls: listener.origin }, 'consent bank started');
  return {
    issuer,
    mtlsBase: context.mtlsBase,
    browserMiddleware,
    faults,
    calls: () => ({ ...calls }),
    callLog: () => [...callLog],
    close: () => listener.close(),
    context: running,
  };
}

/** A browser path of the bank as a route template (`/interaction/:uid/login`): a bounded set of labels. */
export function browserRoute(path: string): string {
  if (path === '/auth' || path === '/.well-known/openid-configuration' || path === '/jwks') return path;
  if (/^\/auth\/[\w-]+$/.test(path)) return '/auth/:uid';
  const interaction = /^\/interaction\/[\w-]+(\/(login|confirm|abort))?$/.exec(path);
  if (interaction) return `/interaction/:uid${interaction[1] ?? ''}`;
  return '/*';
}
