import { createHash } from 'node:crypto';
import * as client from 'openid-client';
import { normaliseCnpj, normaliseCpf } from '../../../cpf/cpf.js';
import { errors } from '../../../errors/api-error.js';
import {
  brasilScope,
  consentIdOfScope,
  createBrasilConsent,
  detailsOfConsent,
  queryBrasilConsent,
  readBrasilConsent,
  revokeBrasilConsent,
} from '../brasil-consents.js';
import type { CountryProfile } from '../profile.js';
import { offlineScope, uiLocales } from './trip.js';

/*
 * Brazil: Open Finance Brasil (docs/open-finance.md, "Open Finance Brasil"). FAPI 1.0 Advanced with PAR,
 * PKCE, `tls_client_auth`, certificate-bound tokens and PS256; the customer's CPF first; a consent created
 * with a `client_credentials` token (consents 3.3.1) and authorised with the scope `consent:<id>`, with a
 * nonce and, where the bank answers that way, a signed authorisation answer (JARM). What was authorised is
 * read back from the consent, whose id is the link's grant; revoking is `DELETE` of it. Answers follow the
 * files as published (CPF, CNPJ, BRL); the holder reads statements in Brasília time.
 */

/**
 * The ID token's nonce, from the trip's state: FAPI 1.0 wants one with `openid`, and a value only this trip
 * can name needs no column of its own (the state is 24 random bytes, kept only as its hash).
 */
export function nonceOf(state: string): string {
  return createHash('sha256').update(`nonce:${state}`).digest('base64url');
}

/**
 * Open Finance Brasil's levels of assurance: its security profile has the client ask for `acr` as an essential
 * claim with these values (OpenID Connect Core §5.5.1.1) and check the ID token's against them.
 */
export const BRASIL_ACR_VALUES = ['urn:brasil:openbanking:loa2', 'urn:brasil:openbanking:loa3'];

export const brasil: CountryProfile = {
  security: 'fapi1-br',
  market: 'BR',
  currency: 'BRL',
  zone: 'America/Sao_Paulo',
  grantSource: 'consents API',
  resourcesFirst: true,
  asksHolderIds: true,
  registrationMetadata: {
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    response_types: ['code'],
    authorization_signed_response_alg: 'PS256',
    id_token_signed_response_alg: 'PS256',
    tls_client_certificate_bound_access_tokens: true,
  },
  // Brazil's FAPI 1.0 signs ID tokens and authorisation answers (JARM) with PS256 only; openid-client
  // expects RS256 unless told.
  clientMetadata: { id_token_signed_response_alg: 'PS256', authorization_signed_response_alg: 'PS256' },
  // openid-client checks the JARM `response` only in JWT response mode.
  configure: (configuration) => client.useJwtResponseMode(configuration),

  queryGrant: queryBrasilConsent,
  revokeGrant: revokeBrasilConsent,

  holderIds(input, holderType, bankName) {
    if (input.cpf === undefined)
      throw errors.missingParameter('cpf', `${bankName} asks for the CPF of the person who consents.`);
    const cpf = normaliseCpf(input.cpf);
    if (!cpf)
      throw errors.invalidParameter(
        'cpf',
        'This is not a valid CPF: 11 digits whose last two are its check digits (123.456.789-09).',
      );
    if (holderType !== 'business') return { cpf, cnpj: null };
    if (input.cnpj === undefined)
      throw errors.missingParameter('cnpj', `${bankName} asks for the company's CNPJ.`);
    const cnpj = normaliseCnpj(input.cnpj);
    if (!cnpj)
      throw errors.invalidParameter(
        'cnpj',
        'This is not a valid CNPJ: 12 letters or digits, then its two check digits (12.345.678/0001-95, 12.ABC.345/01DE-35).',
      );
    return { cpf, cnpj };
  },

  async start(bank, input) {
    const consent = await createBrasilConsent(bank, {
      cpf: input.holder.cpf!,
      cnpj: input.holder.cnpj,
      actions: input.actions,
      expiresAt: input.validTo,
    });
    const offline = offlineScope(bank.configuration).prompt ? ' offline_access' : '';
    const url = await client.buildAuthorizationUrlWithPAR(bank.configuration, {
      redirect_uri: input.redirectUri,
      scope: `${brasilScope(consent.consentId)}${offline}`,
      ...(offline ? { prompt: 'consent' } : {}),
      response_type: 'code',
      response_mode: 'jwt',
      code_challenge: await client.calculatePKCECodeChallenge(input.verifier),
      code_challenge_method: 'S256',
      state: input.state,
      nonce: nonceOf(input.state),
      claims: JSON.stringify({ id_token: { acr: { essential: true, values: BRASIL_ACR_VALUES } } }),
      ui_locales: uiLocales(input.locale),
    });
    return {
      url,
      details: detailsOfConsent({
        consentId: consent.consentId,
        permissions: consent.permissions,
        expiresAt: input.validTo,
      }),
    };
  },

  exchangeChecks: (state) => ({ expectedNonce: nonceOf(state) }),

  async granted(bank, tokens, requested) {
    const asked = requested[0]?.identifier ?? null;
    // The token answer's scope names the consent; a bank may leave `scope` out when it is the one asked
    // (RFC 6749 §5.1), and then the consent is the trip's own.
    const grantId = tokens.scope === undefined ? asked : consentIdOfScope(tokens.scope);
    const claims = tokens.claims();
    const subject = claims?.sub;
    if (grantId === null || grantId !== asked)
      return {
        ok: false,
        grantId: asked,
        reason: "the token's scope names another consent than the one created",
      };
    if (!subject) return { ok: false, grantId, reason: 'the ID token names no subject' };
    if (typeof claims?.acr !== 'string' || !BRASIL_ACR_VALUES.includes(claims.acr))
      return { ok: false, grantId, reason: 'the ID token carries no acr of the essential values asked' };
    const consent = await readBrasilConsent(bank, grantId).catch(() => null);
    if (!consent || consent.status !== 'AUTHORISED')
      return {
        ok: false,
        grantId,
        reason: `the consent is ${consent ? consent.status.slice(0, 40) : 'unreadable'} at the bank`,
      };
    const details = detailsOfConsent(consent);
    if ((details[0]?.actions ?? []).length === 0)
      return { ok: false, grantId, reason: 'the consent allows nothing the appliance reads' };
    return { ok: true, grantId, details, subject };
  },
};
