/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { Context } from 'koa';
import { formatRut } from '../../rut/rut.js';
import { consentEnd, detailProblem, grantedActions, type AccountAction } from '../authorization-details.js';
import type {
  BankPages,
  BankProfile,
  Caller,
  OperationHandler,
  ProviderContext,
  ShellContext,
} from '../bank-profile.js';
import { consentPage, gonePage, pickLanguage, signInPage, type Language } from '../pages.js';
import { errorAnswer, type Answer, type MatchedOperation } from '../resource-server.js';
import { CHILE_MARKET, resourceAnswers } from '../resources.js';
import { bearerToken, challenge } from '../tokens.js';
import { signIn } from '../users.js';
import { GRANT_MANAGEMENT_PATH, QUERY_SCOPE, REVOKE_SCOPE, grantManagement } from './grant-management.js';

/*
 * The Chilean bank (`fapi2-cl`, the CMF's draft annex): FAPI 2.0 on oidc-provider, PAR required, PKCE,
 * `tls_client_auth` only, Rich Authorization Requests of type `Accounts` (RFC 9396), Grant Management (draft),
 * and Brazil's accounts 2.4.2 and credit-cards 2.3.1 read in CLP with RUTs.
 */

export const CONSENT_BANK_PATH = '/sandbox/consent-bank';
export const CONSENT_BANK_DEFAULT_PORT = 8443;
/** Access tokens are short (the Chilean draft follows Brazil's 5 to 15 minutes); refresh tokens renew them. */
export const ACCESS_TOKEN_TTL_S = 600;

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

/**
 * Whether an authorization request asks for the End-User's `name`: OpenID Connect Core 1.0 §5.5, the `claims`
 * parameter, a JSON object whose `id_token` or `userinfo` member names the claims wanted (§5.1 defines `name`:
 * the full name). Anything unreadable asks for nothing.
 */
export function asksForName(claims: unknown): boolean {
  let parsed: unknown = claims;
  if (typeof claims === 'string')
    try {
      parsed = JSON.parse(claims);
    } catch {
      return false;
    }
  if (parsed === null || typeof parsed !== 'object') return false;
  return (['id_token', 'userinfo'] as const).some((member) => {
    const wanted = (parsed as Record<string, unknown>)[member];
    return wanted !== null && typeof wanted === 'object' && Object.hasOwn(wanted, 'name');
  });
}

function pages(): BankPages {
  return {
    pickLanguage,
    gone: (language) => gonePage(language as Language),
    signIn: (language, action, failed, typed) => signInPage(language as Language, action, failed, typed),
    identityField: 'rut',
    signInAs: (rut, password) => signIn(rut, password)?.rut ?? null,
    admits: async () => true,
    async consent({ details, language, base }, { provider }) {
      const client = await provider.Client.find(details.params.client_id);
      const requested = parseDetails(details.params.authorization_details);
      const validTo = requested.map((d) => d.validTo).find((v): v is string => typeof v === 'string');
      return consentPage(language as Language, {
        clientName: client?.clientName ?? details.params.client_id,
        rut: formatRut(details.session?.accountId ?? ''),
        actions: [...grantedActions(requested)] as AccountAction[],
        name: asksForName(details.params.claims),
        validTo: validTo ?? null,
        approveAction: `${base}/confirm`,
        refuseAction: `${base}/abort`,
      });
    },
    refuse: async () => undefined,
    async confirm({ details }, accountId, { provider, faults }) {
      if (faults.forUser(accountId).refuseConsent)
        return { error: 'access_denied', description: 'The bank refused the consent' };
      const grant = new provider.Grant({ accountId, clientId: details.params.client_id });
      // What the library left of the asked scope: `offline_access` only with prompt=consent (OIDC Core 11).
      const scope = String(details.params.scope ?? 'openid')
        .split(' ')
        .filter((s) => s === 'openid' || s === 'offline_access');
      grant.addOIDCScope(scope.join(' '));
      // The page listed the name when it was asked: approving grants it (the library puts it in the ID token).
      if (asksForName(details.params.claims)) grant.addOIDCClaims(['name']);
      for (const detail of parseDetails(details.params.authorization_details)) grant.addRar(detail);
      return { grantId: await grant.save() };
    },
  };
}

function providerSettings(context: ShellContext) {
  const { errors, clock, data } = context;
  return {
    // The customer's `name` (OpenID Connect Core §5.1) beside the library's own claims; it goes into an ID
    // token only when the request asked for it with the `claims` parameter and the person approved.
    claims: { acr: null, auth_time: null, iss: null, sid: null, openid: ['sub'], name: null },
    async findAccount(_ctx: unknown, sub: string) {
      return {
        accountId: sub,
        claims: async () => {
          const name = data.name(sub);
          return name === null ? { sub } : { sub, name };
        },
      };
    },
    clientAuthMethods: ['tls_client_auth'],
    responseTypes: ['code'],
    // Discovery's scopes_supported: Grant Management's two (draft section 6.1) beside OpenID Connect's.
    scopes: ['openid', 'offline_access', QUERY_SCOPE, REVOKE_SCOPE],
    enabledJWA: { idTokenSigningAlgValues: ['PS256'] },
    // Only what no registration can leave out: the one authentication method and the profile's algorithm.
    clientDefaults: { token_endpoint_auth_method: 'tls_client_auth', id_token_signed_response_alg: 'PS256' },
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      ClientCredentials: ACCESS_TOKEN_TTL_S,
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
      // Chile's draft: every authorization creates a grant (Grant Management); update/replace later.
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
    discovery: {
      grant_management_actions_supported: ['create', 'query', 'revoke'],
      grant_management_action_required: true,
    },
    features: {
      fapi: { enabled: true, profile: '2.0' },
      // OpenID Connect Core §5.5: discovery says `claims_parameter_supported: true`.
      claimsParameter: { enabled: true },
      clientCredentials: { enabled: true },
      richAuthorizationRequests: {
        enabled: true,
        // The types a client may name are those it registered (authorization_details_types, RFC 9396 10.2):
        // the library refuses any other with invalid_authorization_details.
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
  };
}

/** The operations of the two files this bank serves, each behind the action that grants it. */
function handlers(context: ProviderContext): Record<string, OperationHandler> {
  const answers = resourceAnswers(context.data, CHILE_MARKET);
  const granted = (caller: Caller) => grantedActions(caller.token.rar);
  const needs =
    (action: AccountAction, handler: OperationHandler): OperationHandler =>
    (request) =>
      granted(request.caller).has(action)
        ? handler(request)
        : errorAnswer(403, 'FORBIDDEN', `The consent does not cover ${action}`, request.now);
  const ok = (body: unknown): Answer => ({ status: 200, body });
  const deposit = (request: Parameters<OperationHandler>[0]) =>
    answers.findDeposit(request.caller.customer, request.operation.params.accountId!, request.at);
  const card = (request: Parameters<OperationHandler>[0]) =>
    answers.findCard(request.caller.customer, request.operation.params.creditCardAccountId!, request.at);
  const noAccount = (now: number) => errorAnswer(404, 'NOT_FOUND', 'No such account', now);
  return {
    accountsGetAccounts: needs('ReadAccounts', (r) =>
      ok(answers.accountsList(r.caller.customer, r.operation.query.accountType, r.self, r.paging, r.at)),
    ),
    accountsGetAccountsAccountId: needs('ReadAccounts', (r) => {
      const account = deposit(r);
      return account ? ok(answers.accountIdentification(account, r.self, r.now)) : noAccount(r.now);
    }),
    accountsGetAccountsAccountIdBalances: needs('ReadBalances', (r) => {
      const account = deposit(r);
      return account
        ? ok(answers.accountBalances(r.caller.customer, account, r.self, r.now))
        : noAccount(r.now);
    }),
    accountsGetAccountsAccountIdTransactions: needs('ReadTransactions', (r) => {
      const account = deposit(r);
      if (!account) return noAccount(r.now);
      const window = r.window();
      if ('status' in window) return window;
      const filter = { creditDebitIndicator: r.operation.query.creditDebitIndicator };
      return ok(
        answers.accountTransactions(r.caller.customer, account, window, filter, r.self, r.paging, r.at),
      );
    }),
    creditCardsGetAccounts: needs('ReadCreditCards', (r) =>
      ok(answers.cardAccountsList(r.caller.customer, r.self, r.paging, r.at)),
    ),
    creditCardsGetAccountsCreditCardAccountId: needs('ReadCreditCards', (r) => {
      const account = card(r);
      return account ? ok(answers.cardIdentification(account, r.self, r.now)) : noAccount(r.now);
    }),
    creditCardsGetAccountsCreditCardAccountIdLimits: needs('ReadCreditCards', (r) => {
      const account = card(r);
      return account ? ok(answers.cardLimits(r.caller.customer, account, r.self, r.now)) : noAccount(r.now);
    }),
    creditCardsGetAccountsCreditCardAccountIdTransactions: needs('ReadCreditCards', (r) => {
      const account = card(r);
      if (!account) return noAccount(r.now);
      const window = r.window();
      if ('status' in window) return window;
      const { transactionType, payeeMCC } = r.operation.query;
      return ok(
        answers.cardTransactions(
          r.caller.customer,
          account,
          window,
          { transactionType, payeeMCC },
          r.self,
          r.paging,
          r.at,
        ),
      );
    }),
  };
}

/** An access token of a live grant, bound to the caller's certificate when it was issued bound. */
async function authorize(
  context: ProviderContext,
  ctx: Context,
  _operation: MatchedOperation,
): Promise<Caller | Answer> {
  const now = context.clock.now();
  const refuse = (description: string): Answer =>
    errorAnswer(401, 'UNAUTHORIZED', description, now, {
      'WWW-Authenticate': challenge('invalid_token', description),
    });
  const bearer = await bearerToken(ctx, context, 'AccessToken');
  if ('status' in bearer) return refuse(bearer.description);
  const grant = await context.provider.Grant.find(bearer.token.grantId);
  if (!grant || grant.isExpired) return refuse('The consent was revoked or has expired');
  return { customer: bearer.token.accountId, faultsOf: bearer.token.accountId, token: bearer.token };
}

export const chileProfile: BankProfile = {
  component: 'consent-bank',
  path: CONSENT_BANK_PATH,
  defaultPort: CONSENT_BANK_DEFAULT_PORT,
  tlsMinVersion: 'TLSv1.3',
  stateLabel: null,
  keyLabel: '',
  refreshTokens: 'as-requested',
  files: ['accounts-2.4.2', 'credit-cards-2.3.1'],
  market: 'CL',
  parts: (context) => ({
    pages: pages(),
    provider: providerSettings(context),
    aliases: {
      token_endpoint: '/token',
      pushed_authorization_request_endpoint: '/par',
      registration_endpoint: '/reg',
      grant_management_endpoint: GRANT_MANAGEMENT_PATH,
      introspection_endpoint: '/token/introspection',
    },
    discovery: { token_endpoint_auth_methods_supported: ['tls_client_auth'] },
    // Grant Management's scopes live on the one resource, for client_credentials tokens; an authorization's
    // tokens carry only what its grant holds for the resource (none: RAR says what they may read).
    resourceScopes: () => `${QUERY_SCOPE} ${REVOKE_SCOPE}`,
  }),
  runtime: (context) => ({
    machine: grantManagement(context),
    authorize: (ctx, operation) => authorize(context, ctx, operation),
    handlers: handlers(context),
    tokenAnswer: (token) => (token.grantId ? { grant_id: token.grantId } : {}),
  }),
};
