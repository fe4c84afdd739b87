/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import { CONSENT_SCOPE, consentIdOfScope } from './consent-ids.js';
import type { BankPages, BankProfile, ProviderContext, ShellContext } from '../bank-profile.js';
import { stateAdapterClass } from '../store.js';
import { brasilApiHandlers, brasilAuthorize } from './brasil-apis.js';
import { CUSTOMERS_DOCUMENT } from './customers.js';
import { authorise, refuse as refuseConsent, settle, zulu, type ConsentRecord } from './consents.js';
import { findBrasilUser, signInBrasil } from './market.js';
import {
  brasilConsentPage,
  brasilGonePage,
  brasilSignInPage,
  pickBrasilLanguage,
  type BrasilLanguage,
} from './pages.js';
import { isRefusal } from './consents.js';

/*
 * The simulated Open Finance Brasil bank (`fapi1-br`, docs/open-finance.md "Open Finance Brasil"): FAPI 1.0
 * Final on oidc-provider (PAR required, PKCE, JARM for `code`, PS256, `tls_client_auth` or `private_key_jwt`,
 * certificate-bound tokens) and Brazil's APIs beside it on the same mTLS listener: consents 3.3.1, resources
 * 3.1.0, accounts 2.4.2, credit cards 2.3.1, customers 2.2.1's personal identifications (customers.ts), in BRL
 * with CPF and CNPJ. Its own issuer and state keys, so its
 * rows in `consent_bank_state` are invisible to the Chilean bank and the other way round.
 */

export const BRASIL_BANK_PATH = '/sandbox/consent-bank-br';
/** The level of assurance a password sign-in at this bank reaches (Open Finance Brasil's `acr` values). */
export const BRASIL_LOA2 = 'urn:brasil:openbanking:loa2';
/** Brazil's rule for access tokens is 5 to 15 minutes; the bank gives 10, as the Chilean one does. */
export const BRASIL_ACCESS_TOKEN_TTL_S = 600;
/** The scopes of Brazil's data APIs this bank serves (consents table of the file). */
export const DATA_SCOPES = ['customers', 'accounts', 'credit-cards-accounts', 'resources'] as const;

/** The bank's consent records, in its own rows of the state table. */
export function consentStore(context: ShellContext) {
  const records = new (stateAdapterClass(context.store))('OpenFinanceBrasilConsent');
  return {
    async load(consentId: string): Promise<ConsentRecord | null> {
      const found = (await records.find(consentId)) as unknown as ConsentRecord | undefined;
      return found ? settle(found, context.clock.now()) : null;
    },
    save: (record: ConsentRecord) =>
      records.upsert(record.consentId, record as unknown as Record<string, unknown>),
  };
}

/** Sign-in with a CPF, the consent page, and their answers; the consent resource follows the decision. */
function pages(context: ShellContext): BankPages {
  const consents = consentStore(context);
  const recordOf = async (details: any) => {
    const consentId = consentIdOfScope(details.params.scope);
    const record = consentId ? await consents.load(consentId) : null;
    // The PAR's scope names the consent; one that is gone, not this client's, or no longer awaiting ends here.
    return record &&
      record.clientId === details.params.client_id &&
      record.status === 'AWAITING_AUTHORISATION'
      ? record
      : null;
  };
  return {
    pickLanguage: pickBrasilLanguage,
    gone: (language) => brasilGonePage(language as BrasilLanguage),
    signIn: (language, action, failed, typed) =>
      brasilSignInPage(language as BrasilLanguage, action, failed, typed),
    identityField: 'cpf',
    signInAcr: BRASIL_LOA2,
    signInAs: (cpf, password) => signInBrasil(cpf, password)?.cpf ?? null,
    admits: async ({ details }) => (await recordOf(details)) !== null,
    async consent({ details, language, base }, { provider }) {
      const record = (await recordOf(details))!;
      const client = await provider.Client.find(details.params.client_id);
      return brasilConsentPage(language as BrasilLanguage, {
        clientName: client?.clientName ?? details.params.client_id,
        cpf: details.session?.accountId ?? '',
        permissions: record.permissions,
        expires: record.expirationDateTime === null ? null : zulu(record.expirationDateTime).slice(0, 10),
        approveAction: `${base}/confirm`,
        refuseAction: `${base}/abort`,
      });
    },
    async refuse({ details }) {
      const record = (await recordOf(details))!;
      await consents.save(refuseConsent(record, 'USER', 'CUSTOMER_MANUALLY_REJECTED', context.clock.now()));
    },
    async confirm({ details }, cpf, { provider, mtlsBase }: ProviderContext) {
      const record = (await recordOf(details))!;
      const now = context.clock.now();
      if (findBrasilUser(cpf)?.refusesConsent) {
        await consents.save(refuseConsent(record, 'ASPSP', 'INTERNAL_SECURITY_REASON', now));
        return { error: 'access_denied', description: 'The bank refused the consent' };
      }
      const authorised = authorise(record, cpf, now);
      if (isRefusal(authorised)) {
        // Signed in as someone else than the consent's customer: Brazil's banks reject such a consent.
        await consents.save(refuseConsent(record, 'ASPSP', 'INTERNAL_SECURITY_REASON', now));
        return { error: 'access_denied', description: authorised.detail };
      }
      await consents.save(authorised);
      const grant = new provider.Grant({ accountId: cpf, clientId: details.params.client_id });
      const asked = String(details.params.scope ?? '').split(' ');
      // The data scopes asked, and this consent's own, on the data APIs' resource (the static ones are also
      // the library's OIDC scopes, so they go on both): a token reads only what its consent allows.
      const data = DATA_SCOPES.filter((s) => asked.includes(s));
      grant.addOIDCScope([...(asked.includes('openid') ? ['openid'] : []), ...data].join(' '));
      grant.addResourceScope(mtlsBase, [...data, `consent:${record.consentId}`].join(' '));
      return { grantId: await grant.save() };
    },
  };
}

/**
 * FAPI 1.0 Advanced §5.2.2 clause 13 and Open Finance Brasil's profile: a request object carries `exp` and
 * `nbf` at most 60 minutes apart, an `aud` (the library checks it is the issuer, and `iss` the client id) and a
 * `jti`; oidc-provider's own check asks the first three only.
 */
function assertRequestObjectClaims(errors: any) {
  return async (_ctx: unknown, claims: Record<string, unknown>) => {
    for (const claim of ['iss', 'aud', 'exp', 'nbf', 'jti'])
      if (claims[claim] === undefined)
        throw new errors.InvalidRequestObject(`Request Object is missing the '${claim}' claim`);
    const lifetime = Number(claims.exp) - Number(claims.nbf);
    if (!(lifetime > 0 && lifetime <= 3600))
      throw new errors.InvalidRequestObject("Request Object 'exp' claim too far from 'nbf' claim");
  };
}

/** The response types and JARM of a bank's configuration (`authorizationResponses`, both unless said). */
function responseSettings(responses: ShellContext['options']['authorizationResponses']) {
  if (responses === 'code id_token')
    return { responseTypes: ['code id_token'], jarm: false, defaults: { response_types: ['code id_token'] } };
  if (responses === 'jarm')
    return {
      responseTypes: ['code'],
      jarm: true,
      defaults: { response_types: ['code'], authorization_signed_response_alg: 'PS256' },
    };
  return {
    responseTypes: ['code id_token', 'code'],
    jarm: true,
    defaults: { response_types: ['code'], authorization_signed_response_alg: 'PS256' },
  };
}

function providerSettings(context: ShellContext) {
  const { errors } = context;
  const responses = responseSettings(context.options.authorizationResponses);
  return {
    clientAuthMethods: [...(context.options.clientAuthMethods ?? ['tls_client_auth', 'private_key_jwt'])],
    responseTypes: responses.responseTypes,
    scopes: ['openid', 'consents', ...DATA_SCOPES],
    enabledJWA: {
      idTokenSigningAlgValues: ['PS256'],
      authorizationSigningAlgValues: ['PS256'],
      clientAuthSigningAlgValues: ['PS256'],
      requestObjectSigningAlgValues: ['PS256'],
    },
    clientDefaults: {
      ...responses.defaults,
      token_endpoint_auth_method: context.options.clientAuthMethods?.[0] ?? 'tls_client_auth',
      id_token_signed_response_alg: 'PS256',
    },
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
    // Open Finance Brasil's levels of assurance (its security profile: `acr` values loa2 and loa3, which a
    // client requests as an essential claim, OpenID Connect Core §5.5.1.1); a password sign-in here is LoA2.
    acrValues: [BRASIL_LOA2, 'urn:brasil:openbanking:loa3'],
    features: {
      fapi: { enabled: true, profile: '1.0 Final' },
      claimsParameter: { enabled: true },
      jwtResponseModes: { enabled: responses.jarm },
      // FAPI 1.0 Advanced §5.2.2 clause 10 (and Open Finance Brasil's profile): every authorization request,
      // pushed ones included (RFC 9126 §3), is a request object signed with a key the client registered
      // (`jwks` or `jwks_uri`, RFC 7591 §2) and the registered `request_object_signing_alg`; PS256 only.
      requestObjects: {
        enabled: true,
        requireSignedRequestObject: true,
        assertJwtClaimsAndHeader: assertRequestObjectClaims(errors),
      },
      clientCredentials: { enabled: true },
    },
    registrationPolicy(metadata: any) {
      // FAPI 1.0 Advanced 5.2.2-5 and Brazil's profile: access tokens are sender-constrained, so a client
      // registers for certificate-bound tokens (RFC 8705 3.4) or not at all.
      if (metadata.tls_client_certificate_bound_access_tokens !== true)
        throw new errors.InvalidClientMetadata(
          'tls_client_certificate_bound_access_tokens must be true (FAPI 1.0 Advanced 5.2.2-5)',
        );
    },
  };
}

export const brasilProfile: BankProfile = {
  component: 'consent-bank-br',
  path: BRASIL_BANK_PATH,
  defaultPort: 0,
  tlsMinVersion: 'TLSv1.2',
  stateLabel: 'brasil',
  keyLabel: 'br:',
  // Brazil's flows ask no offline_access (the scope is `openid consent:<id> …`) and its clients sync for the
  // consent's life: every client registered for the refresh_token grant gets one.
  refreshTokens: 'always',
  files: ['consents-3.3.1', 'resources-3.1.0', 'accounts-2.4.2', 'credit-cards-2.3.1'],
  documents: [CUSTOMERS_DOCUMENT],
  market: 'BR',
  parts: (context) => {
    const { registrationPolicy, ...provider } = providerSettings(context);
    return {
      pages: pages(context),
      provider,
      registrationPolicy,
      aliases: {
        token_endpoint: '/token',
        pushed_authorization_request_endpoint: '/par',
        registration_endpoint: '/reg',
        introspection_endpoint: '/token/introspection',
      },
      discovery: {},
      // The static scopes plus the `consent:<id>` a request, code or refresh token carries.
      resourceScopes: (ctx: any) => {
        const carried = [
          ctx.oidc?.params?.scope,
          ctx.oidc?.entities?.AuthorizationCode?.scope,
          ctx.oidc?.entities?.RefreshToken?.scope,
        ];
        const dynamic = carried.flatMap((scope) =>
          typeof scope === 'string' ? scope.split(' ').filter((s) => CONSENT_SCOPE.test(s)) : [],
        );
        return ['consents', ...DATA_SCOPES, ...new Set(dynamic)].join(' ');
      },
    };
  },
  runtime: (context) => ({
    authorize: (ctx, operation) => brasilAuthorize(context, consentStore(context), ctx, operation),
    handlers: brasilApiHandlers(context, consentStore(context)),
  }),
};
