import type * as client from 'openid-client';
import type { HolderData } from '../../open-finance/consent-wording.js';
import type { Market } from '../../open-finance/schemas.js';
import type { HolderType } from '../connector.js';
import type { SecurityProfile } from '../institutions.js';
import type { AccountAction, AuthorizationDetail } from './authorization-details.js';
import type { StatementZone } from './data-mapping.js';
import type { MtlsFetch } from './mtls.js';
import type { ConsentClientRow } from './registrations.js';
import type { ClientAuthMethod } from './request-signing.js';

/*
 * What the consent path needs to know about a country, behind one interface (docs/architecture.md, "The
 * path of a consent"): how the appliance registers, discovers, sends the end user to the bank, reads back
 * what was granted, asks whether a grant still holds and revokes it, and in which time zone the holder reads
 * a statement. `profiles/chile.ts` (the CMF's draft: FAPI 2.0, RAR, Grant Management) and
 * `profiles/brasil.ts` (Open Finance Brasil: FAPI 1.0 Advanced, consents API) implement it; the connector,
 * the widget and the revoke outbox call it and never test which country they are in. A third country is a
 * new file here plus its tests.
 */

export interface ConsentClient {
  registration: ConsentClientRow;
  configuration: client.Configuration;
  /** Fetch over mutual TLS with the registration's certificate (the bank's CA trusted when it has one). */
  fetch: MtlsFetch;
  /** The bank's resource API base, without a trailing slash. */
  apiBase: string;
  /** The bank's country profile: how a consent is made, checked, queried and revoked there. */
  profile: CountryProfile;
  /** The request-object signing key (PS256), when the profile signs and the registration holds one. */
  signingKey: client.PrivateKey | null;
  /** How the bank answers at the callback, as its discovery offers it; `refused` says why no way fits. */
  responseShape: ResponseShape | { refused: string };
}

/**
 * How the authorization response comes back (docs/open-finance.md, "What the appliance sends"). `query`: a
 * plain `code` with `iss` (FAPI 2.0, RFC 9207). `jarm`: `code` in a signed JWT (`response_mode=jwt`, JARM
 * §2.3.1). `hybrid`: `code id_token` posted to the callback (`response_mode=form_post`), the ID token a
 * detached signature whose `c_hash` and `s_hash` cover the code and state (FAPI 1.0 Advanced §5.2.2.1).
 */
export type ResponseShape = 'query' | 'jarm' | 'hybrid';

export type RevokeOutcome =
  | { kind: 'revoked' }
  | { kind: 'gone' }
  /** Try again later: `retryAt` when the bank said when (429, 529; 503 with `Retry-After`). No secret in `reason`. */
  | { kind: 'failed'; reason: string; retryAt: number | null };

/**
 * What the bank says of a grant. `ended`: it no longer honours it (`status` in the appliance's words:
 * revoked, not found, expired). `unknown`: it did not say (unreachable, another status, no endpoint), with
 * why, no secret in it.
 */
export type GrantQuery =
  | { kind: 'authorised' }
  | { kind: 'ended'; status: 'revoked' | 'not found' | 'expired' }
  | { kind: 'unknown'; reason: string };

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
  locale: 'es' | 'en';
  holder: HolderIds;
  /** What names the holder, as the consent screen promised it (`holderData`); null: the name is not asked. */
  holderData: HolderData | null;
}

export interface Trip {
  url: URL;
  /** `authorization_details`-shaped, whatever the profile: the consent screen words them, the link keeps them. */
  details: AuthorizationDetail[];
}

/** What the bank granted, as a link keeps it; or why it cannot be used, with the grant to revoke if any. */
export type Granted =
  | {
      ok: true;
      grantId: string;
      details: AuthorizationDetail[];
      subject: string;
      /**
       * The holder's name as the token answer gives it, where the profile reads it there (Chile: the ID token's
       * `name`), null when it names no one; absent where a sync reads it (Brazil's customers API).
       */
      holderName?: string | null;
    }
  | { ok: false; grantId: string | null; reason: string };

export interface CountryProfile {
  security: SecurityProfile;
  /** Whose reading of the Open Finance files the bank's answers follow (src/open-finance/schemas.ts). */
  market: Market;
  /** The national currency: a card whose limits list is empty is in it (credit cards 2.3.1). */
  currency: 'CLP' | 'BRL';
  /** Where the holder reads their statement and the consent's dates. */
  zone: StatementZone;
  /** Where the bank keeps its word on a grant, as reasons name it. */
  grantSource: 'Grant Management' | 'consents API';
  /** Whether the bank's resources API says first which accounts and cards may be read now. */
  resourcesFirst: boolean;
  /** Whether the widget asks the person for their tax ids before the trip (Brazil's CPF). */
  asksHolderIds: boolean;
  /**
   * What a consent of this holder type asks for to name the holder (the widget's screen and the bank's page list
   * it first), or null: none. The connector reads the name from it on a link's first sync and daily full pass
   * (consent-connector.ts `readHolderName`).
   */
  holderData(holderType: HolderType): HolderData | null;
  /**
   * Whether a link's consent, as the link keeps it, lets the holder's name be read: Brazil's holds the
   * identification permission or not; a Chilean one cannot say (its ID tokens do).
   */
  readsHolderName(details: readonly AuthorizationDetail[]): boolean;
  /**
   * RFC 7591 client metadata the registration always asks for, beyond the client authentication, the redirect
   * URI and what discovery decides (`registrationFor`); a registered answer without one of them is a gap.
   */
  registrationMetadata: Record<string, unknown>;
  /** What openid-client is told at discovery (the algorithms the bank signs with). */
  clientMetadata: Partial<client.ClientMetadata>;
  /** Client authentication methods this country allows, the appliance's preference first (request-signing.ts). */
  clientAuthMethods: readonly ClientAuthMethod[];
  /** Whether the client signs its authorization requests (FAPI 1.0 Advanced §5.2.2 clause 10): a signing key. */
  signsRequests: boolean;
  /** How the bank will answer at the callback, from its discovery; `refused` says why no way fits. */
  responseShape(metadata: client.ServerMetadata): ResponseShape | { refused: string };

  queryGrant(bank: ConsentClient, grantId: string): Promise<GrantQuery>;
  revokeGrant(bank: ConsentClient, grantId: string, now: number): Promise<RevokeOutcome>;

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
