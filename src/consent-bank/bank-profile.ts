/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { X509Certificate } from 'node:crypto';
import type { Context } from 'koa';
import type { Clock } from '../clock/clock.js';
import type { Database } from '../db/database.js';
import type { Html } from '../html/html.js';
import type { Logger } from '../logging/logger.js';
import type { BrasilFile, Market as FileMarket } from '../open-finance/schemas.js';
import type { CustomerData } from './customer-data.js';
import type { ConsentBankFaults, UserFaults } from './faults.js';
import type { Answer, MatchedOperation, WrittenDocument } from './resource-server.js';
import type { Paging, Window } from './resources.js';
import type { StateStoreOptions } from './store.js';
import type { TestCaMaterial } from './test-ca.js';

/*
 * What one country's simulated bank is, as the bank shell (bank-shell.ts) reads it: the shell owns the HTTP and
 * mTLS listeners, oidc-provider's set-up, routing, the sign-in and consent pages' plumbing, call counting and
 * faults, once; a profile says what differs: its security profile's provider settings, its pages, its
 * machine endpoints (Grant Management in Chile, the consents API in Brazil) and its resource handlers.
 */

/**
 * When the bank issues refresh tokens. `as-requested` is oidc-provider's own rule (OpenID Connect Core
 * section 11: only when `offline_access` was granted, which the library grants only with `prompt=consent`, and
 * only to a client registered for the `refresh_token` grant); `always` gives one to every client registered
 * for the grant; `never` gives none.
 */
export type RefreshTokenPolicy = 'as-requested' | 'always' | 'never';

export interface BankOptions {
  db: Database;
  ca: TestCaMaterial;
  clock: Clock;
  logger: Logger;
  /** The appliance's public base URL: the issuer is `${publicBaseUrl}${profile.path}`. */
  publicBaseUrl: string;
  /** The customers' accounts and entries (test mode: the credential sandbox's, src/test-mode/). */
  data: CustomerData;
  /** The mTLS listener's address: 127.0.0.1 unless a test says otherwise; nothing beyond loopback. */
  host?: string;
  /** The mTLS listener's port; 0 picks a free one. */
  port?: number;
  faults?: ConsentBankFaults;
  /** The profile's own rule unless said. */
  refreshTokens?: RefreshTokenPolicy;
  /**
   * Which authorization responses a bank that has a choice offers (Brazil): `code` with JARM, `code id_token`
   * (the hybrid flow, FAPI 1.0 Advanced §5.2.2.1), or both (the default); a test starts a bank of each kind.
   */
  authorizationResponses?: AuthorizationResponses;
  /** The client authentication methods a bank that has a choice offers (Brazil: both unless said). */
  clientAuthMethods?: readonly ('tls_client_auth' | 'private_key_jwt')[];
}

export type AuthorizationResponses = 'jarm' | 'code id_token' | 'both';

/** What the shell has made when a profile is asked for its parts. */
export interface ShellContext {
  issuer: string;
  issuerPath: string;
  mtlsOrigin: string;
  mtlsBase: string;
  clock: Clock;
  log: Logger;
  faults: ConsentBankFaults;
  data: CustomerData;
  store: StateStoreOptions;
  /** oidc-provider's error classes. */
  errors: any;
  peerCertificate(ctx: { req: Context['req'] }): X509Certificate | undefined;
  /** The options a profile reads itself (`authorizationResponses`, `clientAuthMethods`). */
  options: Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'>;
}

export interface ProviderContext extends ShellContext {
  provider: any;
}

/** One step of the bank's pages, handed to the profile with the library's interaction details. */
export interface InteractionStep {
  details: any;
  language: string;
  /** The page's own base path (`…/interaction/<uid>`). */
  base: string;
}

export type InteractionOutcome =
  | { grantId: string }
  | { error: 'access_denied'; description: string }
  /** The trip cannot go on: the bank's "no longer valid" page. */
  | { gone: true };

export interface BankPages {
  pickLanguage(uiLocales: unknown, acceptLanguage: string | undefined): string;
  gone(language: string): Html;
  signIn(language: string, action: string, failed: boolean, typed: string): Html;
  /** The sign-in form's identity field (`rut`, `cpf`). */
  identityField: string;
  /**
   * The authentication context a sign-in with password reaches (OpenID Connect Core §2 `acr`), when the
   * country names one (Brazil: `urn:brasil:openbanking:loa2`); the ID token carries it.
   */
  signInAcr?: string;
  /** The account id a sign-in names, or null (an unknown identity and a wrong password are one answer). */
  signInAs(identity: string, password: string): string | null;
  /** False when the trip must end on the gone page before any step (Brazil: its consent is gone). */
  admits(step: InteractionStep, ctx: ProviderContext): Promise<boolean>;
  consent(step: InteractionStep, ctx: ProviderContext): Promise<Html>;
  refuse(step: InteractionStep, ctx: ProviderContext): Promise<void>;
  confirm(step: InteractionStep, accountId: string, ctx: ProviderContext): Promise<InteractionOutcome>;
}

/** Who a resource call is from, once its token was checked. */
export interface Caller {
  /** The customer whose data the call reads (a sandbox RUT). */
  customer: string;
  /** Whose faults apply (the account id the token was issued for). */
  faultsOf: string;
  token: any;
  /** What the profile found on the way (Brazil: the consent the token is of). */
  consent?: any;
}

export interface ResourceRequest {
  operation: MatchedOperation;
  caller: Caller;
  faults: UserFaults;
  self: URL;
  now: number;
  /** The moment the list is cut at (a `pagination-key`'s, else now). */
  at: number;
  paging: Paging;
  /** The request's date window (transactions only), as the file says a missing date reads. */
  window: () => Window | Answer;
  body: unknown;
  ctx: Context;
}

export type OperationHandler = (request: ResourceRequest) => Promise<Answer> | Answer;

export interface ProfileParts {
  pages: BankPages;
  /** oidc-provider settings of this profile, merged over the shell's (features are merged one level deep). */
  provider: Record<string, any>;
  /** Extra discovery members (beside the mTLS aliases the shell adds). */
  discovery: Record<string, unknown>;
  /** Machine endpoints besides the library's, relative to the base: named in discovery and its aliases. */
  aliases: Record<string, string>;
  /** Checks a registration further (after the shell's software-statement checks); throws the library's errors. */
  registrationPolicy?(metadata: any): void;
  /** Scopes of the resource (the mTLS base) a token may carry besides the grant's. */
  resourceScopes(ctx: any): string;
}

export interface BankRuntime {
  /** Machine endpoints the profile answers itself (Grant Management): true when it answered. */
  machine?(ctx: Context, path: string): Promise<boolean>;
  /** Checks the bearer of a resource call: who it is, or the answer that refuses it. */
  authorize(ctx: Context, operation: MatchedOperation): Promise<Caller | Answer>;
  handlers: Record<string, OperationHandler>;
  /** Extra members of a token answer (Chile: `grant_id`). */
  tokenAnswer?(token: any): Record<string, unknown>;
}

export interface BankProfile {
  /** Logs' component (`consent-bank`, `consent-bank-br`). */
  component: string;
  /** Where the bank lives under the appliance's base URL (and on its mTLS listener). */
  path: string;
  defaultPort: number;
  tlsMinVersion: 'TLSv1.2' | 'TLSv1.3';
  /** Label of the state keys (null: the test CA's own secret, as the Chilean bank always had). */
  stateLabel: string | null;
  /** Salt of the signing key's id and the cookie key: each bank's own. */
  keyLabel: string;
  refreshTokens: RefreshTokenPolicy;
  /** The Open Finance files the resource server serves, and whose reading of them. */
  files: readonly BrasilFile[];
  /** APIs it serves whose file is not in the tree, written from the standard's text (resource-server.ts). */
  documents?: readonly WrittenDocument[];
  market: FileMarket;
  parts(context: ShellContext): ProfileParts;
  runtime(context: ProviderContext): BankRuntime;
}
