import { createHash } from 'node:crypto';
import * as client from 'openid-client';
import { normaliseCnpj, normaliseCpf } from '../../../cpf/cpf.js';
import { errors } from '../../../errors/api-error.js';
import {
  BrasilConsentError,
  brasilScope,
  consentIdOfScope,
  createBrasilConsent,
  detailsOfConsent,
  IDENTIFICATION_PERMISSION,
  queryBrasilConsent,
  readBrasilConsent,
  readsIdentification,
  revokeBrasilConsent,
} from '../brasil-consents.js';
import type { CountryProfile, ResponseShape } from '../profile.js';
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

/** A response type's words in one order: `id_token code` is `code id_token` (OAuth 2.0 Multiple Response Types §3). */
function sameResponseType(a: string, b: string): boolean {
  const words = (value: string) => value.split(' ').filter(Boolean).sort().join(' ');
  return words(a) === words(b);
}

/**
 * How a Brazilian bank answers, from its discovery (RFC 8414 §2): `code` with JARM when it offers both
 * (`response_types_supported` has `code`, `response_modes_supported` has `jwt`); otherwise `code id_token`,
 * the hybrid flow every Brazilian bank must support (FAPI 1.0 Advanced §5.2.2 clause 2, later Brazilian
 * versions drop JARM), answered by `form_post` (OAuth 2.0 Form Post Response Mode) so that the appliance's
 * callback, a server route, reads it; the fragment (the hybrid flow's default) never reaches a server. A
 * string says why neither fits. An absent `response_modes_supported` means `query` and `fragment` (§2).
 */
export function brasilResponseShape(metadata: client.ServerMetadata): ResponseShape | { refused: string } {
  const types = metadata.response_types_supported ?? [];
  const modes = metadata.response_modes_supported ?? ['query', 'fragment'];
  if (types.some((type) => sameResponseType(type, 'code')) && modes.includes('jwt')) return 'jarm';
  if (types.some((type) => sameResponseType(type, 'code id_token'))) {
    if (modes.includes('form_post')) return 'hybrid';
    return {
      refused:
        "the bank offers code id_token only with a fragment response (no form_post in response_modes_supported), which the appliance's callback cannot read",
    };
  }
  return {
    refused: `the bank offers neither code with JARM nor code id_token (response_types_supported: ${types.join(', ').slice(0, 80) || 'none'}; response_modes_supported: ${modes.join(', ').slice(0, 80)})`,
  };
}

export const brasil: CountryProfile = {
  security: 'fapi1-br',
  market: 'BR',
  currency: 'BRL',
  zone: 'America/Sao_Paulo',
  grantSource: 'consents API',
  resourcesFirst: true,
  asksHolderIds: true,
  // customers 2.2.1: a person's identification record; a company's (`/business/identifications`) is not read.
  holderData: (holderType) => (holderType === 'individual' ? 'identification' : null),
  readsHolderName: readsIdentification,
  registrationMetadata: {
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    id_token_signed_response_alg: 'PS256',
    // FAPI 1.0 Advanced §5.2.2 clause 10 and §8.6: request objects signed with PS256, and the bank may hold
    // the client to the registered algorithm (OpenID Connect Registration §2).
    request_object_signing_alg: 'PS256',
    tls_client_certificate_bound_access_tokens: true,
  },
  // Brazil's FAPI 1.0 signs ID tokens and authorisation answers (JARM) with PS256 only; openid-client
  // expects RS256 unless told.
  clientMetadata: { id_token_signed_response_alg: 'PS256', authorization_signed_response_alg: 'PS256' },
  // Open Finance Brasil's security profile allows both; tls_client_auth first (request-signing.ts says why).
  clientAuthMethods: ['tls_client_auth', 'private_key_jwt'],
  signsRequests: true,
  responseShape: brasilResponseShape,

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
    // Checked before the consent is created at the bank, so a trip that cannot go leaves nothing there.
    // The widget says its plain words; the log line carries these (consent-flow.ts `bankSaid`).
    if (typeof bank.responseShape !== 'string')
      throw new BrasilConsentError(bank.responseShape.refused, null);
    if (!bank.signingKey)
      throw new BrasilConsentError(
        'the registration holds no request-object signing key (FAPI 1.0 Advanced §5.2.2 clause 10): run svc banks register again',
        null,
      );
    const consent = await createBrasilConsent(bank, {
      cpf: input.holder.cpf!,
      cnpj: input.holder.cnpj,
      actions: input.actions,
      expiresAt: input.validTo,
      identification: input.holderData === 'identification',
    });
    const offline = offlineScope(bank.configuration).prompt ? ' offline_access' : '';
    // The customers scope only when the bank kept the permission (it drops those of products it does not offer).
    const identification = consent.permissions.includes(IDENTIFICATION_PERMISSION);
    const parameters = {
      redirect_uri: input.redirectUri,
      scope: `${brasilScope(consent.consentId, identification)}${offline}`,
      ...(offline ? { prompt: 'consent' } : {}),
      ...(bank.responseShape === 'hybrid'
        ? { response_type: 'code id_token', response_mode: 'form_post' }
        : { response_type: 'code', response_mode: 'jwt' }),
      code_challenge: await client.calculatePKCECodeChallenge(input.verifier),
      code_challenge_method: 'S256',
      state: input.state,
      nonce: nonceOf(input.state),
      claims: JSON.stringify({ id_token: { acr: { essential: true, values: BRASIL_ACR_VALUES } } }),
      ui_locales: uiLocales(input.locale),
    };
    // FAPI 1.0 Advanced §5.2.2 clause 10 with PAR (RFC 9126 §3): every parameter goes inside a request object
    // signed PS256 (openid-client adds `iss`, `aud`, `exp`, `nbf`, `iat`, `jti`: §5.2.2 clause 13 and 17 and
    // RFC 9101 §4), and the pushed request carries only `client_id` and `request=<JWS>`.
    const signed = await client.buildAuthorizationUrlWithJAR(
      bank.configuration,
      parameters,
      bank.signingKey!,
    );
    const url = await client.buildAuthorizationUrlWithPAR(bank.configuration, signed.searchParams);
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
