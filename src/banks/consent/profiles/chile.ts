import * as client from 'openid-client';
import { parseAuthorizationDetails, type AuthorizationDetail } from '../authorization-details.js';
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

export const chile: CountryProfile = {
  security: 'fapi2-cl',
  market: 'CL',
  currency: 'CLP',
  zone: 'America/Santiago',
  grantSource: 'Grant Management',
  resourcesFirst: false,
  asksHolderIds: false,
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
    return { ok: true, grantId, details, subject };
  },
};
