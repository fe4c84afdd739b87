import * as client from 'openid-client';
import { parseAuthorizationDetails, type AuthorizationDetail } from '../authorization-details.js';
import { holderNameOf } from '../data-mapping.js';
import { queryGrant, revokeGrant } from '../grant-management.js';
import type { CountryProfile } from '../profile.js';
import { offlineScope, uiLocales } from './trip.js';

/*
 * Chile: the CMF's draft technical annex (docs/open-finance.md). FAPI 2.0 Security Profile with PAR
 * (RFC 9126), PKCE (RFC 7636), `tls_client_auth` and certificate-bound tokens (RFC 8705), Rich Authorization
 * Requests (RFC 9396) of type `Accounts`, and Grant Management: the token answer names the grant
 * (`grant_id`) and what it allows (`authorization_details`). Answers follow Open Finance Brasil's files with
 * Chile's adaptation (RUT, CLP).
 */

/** The RAR type the appliance asks for (RFC 9396 §2); registered as `authorization_details_types` (§10.2). */
export const ACCOUNTS_DETAIL_TYPE = 'Accounts';

/**
 * The holder's name, as the bank vouches for it: the draft defines no customers API, but its FAPI 2.0 profile is
 * OpenID Connect (`scope=openid`, an ID token at every token answer), whose Standard Claim `name` (OpenID
 * Connect Core 1.0 §5.1) is the End-User's full name. The `claims` parameter (§5.5) asks for it alone, in the ID
 * token, as a voluntary claim (`null`, §5.5.1), rather than the `profile` scope (§5.4), which would also release
 * the birth date, gender and picture the appliance has no use for. A bank that does not support the parameter
 * ignores it (§5.5: `claims_parameter_supported`), and the link keeps no name.
 */
export const NAME_CLAIMS = JSON.stringify({ id_token: { name: null } });

export const chile: CountryProfile = {
  security: 'fapi2-cl',
  market: 'CL',
  currency: 'CLP',
  zone: 'America/Santiago',
  grantSource: 'Grant Management',
  resourcesFirst: false,
  asksHolderIds: false,
  // A business link's holder is the company; the ID token's `name` would be the person who signed in.
  holderData: (holderType) => (holderType === 'individual' ? 'name' : null),
  // The token answer's `authorization_details` do not say; an ID token names the holder or does not.
  readsHolderName: () => true,
  registrationMetadata: {
    // client_credentials: Grant Management's query and revoke take such a token (Grant Management §6.1).
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    response_types: ['code'],
    // RFC 8705 §3.4: tokens bound to the certificate only when asked; the default is false.
    tls_client_certificate_bound_access_tokens: true,
    // RFC 9396 §10.2: a bank may refuse RAR types the client did not register.
    authorization_details_types: [ACCOUNTS_DETAIL_TYPE],
  },
  clientMetadata: {},
  // The CMF's draft: mutual TLS only; no request object (FAPI 2.0 sends the request through PAR over mTLS).
  clientAuthMethods: ['tls_client_auth'],
  signsRequests: false,
  responseShape: () => 'query',

  queryGrant,
  revokeGrant,

  holderIds: () => ({ cpf: null, cnpj: null }),

  async start(bank, input) {
    const details: AuthorizationDetail[] = [
      { type: ACCOUNTS_DETAIL_TYPE, actions: input.actions, validTo: new Date(input.validTo).toISOString() },
    ];
    const { scope, prompt } = offlineScope(bank.configuration);
    const url = await client.buildAuthorizationUrlWithPAR(bank.configuration, {
      redirect_uri: input.redirectUri,
      scope,
      ...(prompt ? { prompt } : {}),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(input.verifier),
      code_challenge_method: 'S256',
      state: input.state,
      grant_management_action: 'create',
      authorization_details: JSON.stringify(details),
      ...(input.holderData === 'name' ? { claims: NAME_CLAIMS } : {}),
      ui_locales: uiLocales(input.locale),
    });
    return { url, details };
  },

  exchangeChecks: () => ({}),

  async granted(_bank, tokens) {
    const details = parseAuthorizationDetails(tokens.authorization_details ?? []);
    const grantId = typeof tokens.grant_id === 'string' ? tokens.grant_id : null;
    const subject = tokens.claims()?.sub;
    if (grantId === null) return { ok: false, grantId, reason: 'the token answer names no grant_id' };
    if (!details || details.length === 0)
      return { ok: false, grantId, reason: 'the token answer carries no readable authorization_details' };
    if (!subject) return { ok: false, grantId, reason: 'the ID token names no subject' };
    // The ID token of the code exchange names the holder when the consent asked (`NAME_CLAIMS`): the link is
    // named at once, and its first sync need not refresh for a new one.
    return { ok: true, grantId, details, subject, holderName: holderNameOf(tokens.claims()?.name) };
  },
};
