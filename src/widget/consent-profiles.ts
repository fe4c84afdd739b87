import { createHash } from 'node:crypto';
import * as client from 'openid-client';
import type { HolderType } from '../banks/connector.js';
import {
  parseAuthorizationDetails,
  type AccountAction,
  type AuthorizationDetail,
} from '../banks/consent/authorization-details.js';
import {
  brasilScope,
  consentIdOfScope,
  createBrasilConsent,
  detailsOfConsent,
  readBrasilConsent,
} from '../banks/consent/brasil-consents.js';
import type { ConsentClient } from '../banks/consent/client.js';
import type { SecurityProfile } from '../banks/institutions.js';
import { normaliseCnpj, normaliseCpf } from '../cpf/cpf.js';
import { errors } from '../errors/api-error.js';
import type { Locale } from './messages.js';

/*
 * What differs between the consent profiles on the widget's trip to a bank, so consent-flow.ts reads the same
 * for both (docs/open-finance.md):
 *
 * - `fapi2-cl` (Chile's draft): PAR with `authorization_details` (RAR) and `grant_management_action`; the
 *   callback carries `code`, `state`, `iss`; the token answer names the grant and what it allows.
 * - `fapi1-br` (Open Finance Brasil): the customer's CPF first; a consent created with a
 *   `client_credentials` token; PAR naming it by the scope `consent:<id>`, with a nonce and
 *   `response_mode=jwt`; the callback carries one signed `response` (JARM); what was authorised is read
 *   back from the consent, whose id is the link's grant.
 *
 * Each `details` is `authorization_details`-shaped, whatever the profile: the consent screen words them and
 * the link keeps them; a Brazilian entry's `identifier` is its consent id.
 */

/** The holder's ids a profile asks for before the trip (Brazil: the customer's CPF, a company's CNPJ). */
export interface HolderIds {
  cpf: string | null;
  cnpj: string | null;
}

export interface TripInput {
  actions: AccountAction[];
  /** The consent's end, ms since the epoch. */
  validTo: number;
  state: string;
  verifier: string;
  redirectUri: string;
  locale: Locale;
  holder: HolderIds;
}

export interface Trip {
  url: URL;
  details: AuthorizationDetail[];
}

/** What the bank granted, as a link keeps it; or why it cannot be used, with the grant to revoke if any. */
export type Granted =
  | { ok: true; grantId: string; details: AuthorizationDetail[]; subject: string }
  | { ok: false; grantId: string | null };

export interface ProfileFlow {
  /** The holder ids the start needs, checked (a 400 before any call to the bank). */
  holderIds(input: { cpf?: string; cnpj?: string }, holderType: HolderType, bankName: string): HolderIds;
  start(bank: ConsentClient, input: TripInput): Promise<Trip>;
  /** What `authorizationCodeGrant` also checks beyond state and PKCE. */
  exchangeChecks(state: string): { expectedNonce?: string };
  granted(
    bank: ConsentClient,
    tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers,
    requested: AuthorizationDetail[],
  ): Promise<Granted>;
}

const uiLocales = (locale: Locale) => (locale === 'es' ? 'es-CL es' : 'en');

const chile: ProfileFlow = {
  holderIds: () => ({ cpf: null, cnpj: null }),

  async start(bank, input) {
    const details: AuthorizationDetail[] = [
      { type: 'Accounts', actions: input.actions, validTo: new Date(input.validTo).toISOString() },
    ];
    const url = await client.buildAuthorizationUrlWithPAR(bank.configuration, {
      redirect_uri: input.redirectUri,
      scope: 'openid',
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
    if (!details || details.length === 0 || grantId === null || !subject) return { ok: false, grantId };
    return { ok: true, grantId, details, subject };
  },
};

/**
 * The ID token's nonce, from the trip's state: FAPI 1.0 wants one with `openid`, and a value only this trip
 * can name needs no column of its own (the state is 24 random bytes, kept only as its hash).
 */
export function nonceOf(state: string): string {
  return createHash('sha256').update(`nonce:${state}`).digest('base64url');
}

/** The `state` claim of a JARM `response`, unverified: only to find the trip, whose check verifies it. */
export function jarmState(response: string | undefined): string | undefined {
  const payload = response?.split('.')[1];
  if (!payload || response!.split('.').length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { state?: unknown };
    return typeof claims.state === 'string' ? claims.state : undefined;
  } catch {
    return undefined;
  }
}

const brasil: ProfileFlow = {
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
        'This is not a valid CNPJ: 14 digits whose last two are its check digits (12.345.678/0001-95).',
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
    const url = await client.buildAuthorizationUrlWithPAR(bank.configuration, {
      redirect_uri: input.redirectUri,
      scope: brasilScope(consent.consentId),
      response_type: 'code',
      response_mode: 'jwt',
      code_challenge: await client.calculatePKCECodeChallenge(input.verifier),
      code_challenge_method: 'S256',
      state: input.state,
      nonce: nonceOf(input.state),
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
    const grantId = consentIdOfScope(tokens.scope);
    const asked = requested[0]?.identifier;
    const subject = tokens.claims()?.sub;
    // The code's consent must be the one this trip created, and the bank must say it is authorised.
    if (grantId === null || grantId !== asked || !subject) return { ok: false, grantId };
    const consent = await readBrasilConsent(bank, grantId).catch(() => null);
    if (!consent || consent.status !== 'AUTHORISED') return { ok: false, grantId };
    const details = detailsOfConsent(consent);
    if ((details[0]?.actions ?? []).length === 0) return { ok: false, grantId };
    return { ok: true, grantId, details, subject };
  },
};

export function profileFlow(security: SecurityProfile): ProfileFlow {
  return security === 'fapi1-br' ? brasil : chile;
}
