/*
 * Faults on demand (issue 30, item 7): what the simulated bank does wrong when asked, so the connector's
 * handling of each can be tested. Faults are set for every user (`setFaults`) or for one sandbox user by RUT
 * (`setUserFaults`); a sandbox user may also carry faults of its own (users.ts). Faults decided before the
 * user is known (the request_uri's life, the server certificate) are bank-wide only.
 */

/** Faults that can follow one user. */
export interface UserFaults {
  /** The bank refuses the consent (`access_denied`) whatever the user clicks. */
  refuseConsent?: boolean;
  /** A code may be exchanged again: the bank does not stop a replay; the appliance must. */
  acceptReplayedCode?: boolean;
  /** Access tokens are issued without `cnf.x5t#S256`, so any client certificate can use them. */
  unboundTokens?: boolean;
  /** Resource calls answer this status whatever the token (429 and 529 with `Retry-After`). */
  resourceStatus?: 401 | 403 | 429 | 529;
  /** The `Retry-After` of a 429 or 529, in seconds. Default 30 for 429, 2 for 529. */
  retryAfterSeconds?: number;
  /** Resource answers wait this long first (the CMF's budget is 4 s for a page of 100). */
  delayMs?: number;
  /** Resource answers break the Open Finance schema (a required field missing, an amount as a number). */
  breakSchema?: boolean;
}

/** Faults of the whole bank. */
export interface BankFaults extends UserFaults {
  /** A pushed request_uri expires after this many seconds instead of the library's 60 (0: at once). */
  requestUriTtlSeconds?: number;
  /** New TLS connections to the mTLS face get a server certificate from a CA the client does not trust. */
  foreignServerCertificate?: boolean;
  /**
   * Grant Management's revoke (DELETE of a grant) answers this status with `Retry-After` (`retryAfterSeconds`,
   * default as `retryAfterOf`), as a bank rate-limiting (429), down for maintenance (503) or overloaded (529)
   * would; queries (GET) still answer, so a test can see the grant is still there.
   */
  grantManagementStatus?: 429 | 503 | 529;
  /**
   * Every grant and its tokens are gone at once, as at a bank that reset its authorization server or revoked
   * a client's consents in bulk: resource calls answer 401, refreshes `invalid_grant`, Grant Management 404.
   * Nothing is deleted: turning the fault off brings them back.
   */
  invalidateAllGrants?: boolean;
  /**
   * The token endpoint answers after this long: a slow bank between the person's return from its page and
   * the appliance's link (the widget must keep saying the connection is under way meanwhile).
   */
  tokenDelayMs?: number;

  /*
   * The client conformance faults (docs/open-finance.md, "Client conformance"): each is one module of the
   * OpenID Foundation's FAPI 2.0 Security Profile relying-party test plan, or a case the plan leaves out. The
   * bank makes its answer as always, then answer-faults.ts alters it on the way out (the library's own logic
   * is never forked): the discovery document, the authorization response's redirect, the token answer and its
   * ID token, re-signed with the bank's own key.
   */
  /** Discovery names another issuer than the one it is served for (OpenID Connect Discovery 4.3). */
  discoveryIssuerMismatch?: boolean;
  /** Discovery has no `mtls_endpoint_aliases` (RFC 8705 section 5): its top-level endpoints are the mTLS ones. */
  noMtlsEndpointAliases?: boolean;
  /** The authorization response (the redirect back to the client) is altered (RFC 9207, RFC 6749 4.1.2). */
  authorizationResponse?: AuthorizationResponseFault;
  /** Token answers, of every grant, leave out `expires_in` (RFC 6749 5.1 makes it RECOMMENDED only). */
  tokenWithoutExpiresIn?: boolean;
  /** Token answers, of every grant, carry this `token_type` instead of `Bearer` (case-insensitive, 5.1). */
  tokenType?: string;
  /** The ID token of an `authorization_code` grant's answer is altered and signed again (OIDC Core 3.1.3.7). */
  idToken?: IdTokenFault;
  /**
   * Every refresh issues a new refresh token and spends the one presented (oidc-provider's rotation: a spent
   * one presented again is taken for a stolen one, and the whole grant is revoked).
   */
  rotateRefreshTokens?: boolean;
  /**
   * Resource calls answer 401 until the bank has answered this many `refresh_token` grants since the faults
   * were set (the conformance suite's refresh-token test asks for two refreshes).
   */
  unauthorizedUntilRefreshes?: number;
}

/** How the authorization response is altered: the suite's `iss` and `state` modules. */
export type AuthorizationResponseFault = 'invalid-iss' | 'no-iss' | 'invalid-state' | 'no-state';

/**
 * How the ID token is altered, each as the suite's condition of the same name does: a claim changed
 * (`…1` appended, or removed), `aud` as an array (alone, or with an untrusted second audience and no `azp`),
 * `exp` six minutes past, or the token signed with `alg: none` or with RS256 (the bank's key, another
 * algorithm than the PS256 discovery names).
 */
export type IdTokenFault =
  | 'invalid-iss'
  | 'no-iss'
  | 'invalid-aud'
  | 'no-aud'
  | 'aud-array'
  | 'untrusted-second-aud'
  | 'expired-exp'
  | 'no-exp'
  | 'invalid-nonce'
  | 'no-nonce'
  | 'alg-none'
  | 'alg-rs256';

/**
 * The default `Retry-After` of a fault's status (the resource calls' unless given): to the next half-minute
 * (429, 503) or a few seconds (529).
 */
export function retryAfterOf(faults: UserFaults, status: number | undefined = faults.resourceStatus): number {
  return faults.retryAfterSeconds ?? (status === 529 ? 2 : 30);
}

export const SLOW_ANSWER_MS = 4_500;

export class ConsentBankFaults {
  private bank: BankFaults = {};
  private readonly users = new Map<string, UserFaults>();
  private readonly listeners = new Set<() => void>();
  /** `refresh_token` grants answered since the bank-wide faults were last set (`unauthorizedUntilRefreshes`). */
  private refreshes = 0;

  constructor(private readonly builtIn: (rut: string) => UserFaults = () => ({})) {}

  /** Replaces the bank-wide faults. */
  setFaults(faults: BankFaults): void {
    this.bank = { ...faults };
    this.refreshes = 0;
    for (const listener of this.listeners) listener();
  }

  /** Replaces one user's faults (a normalised RUT, `11111111-1`). */
  setUserFaults(rut: string, faults: UserFaults): void {
    this.users.set(rut, { ...faults });
  }

  reset(): void {
    this.users.clear();
    this.setFaults({});
  }

  get bankWide(): Readonly<BankFaults> {
    return this.bank;
  }

  /** A user's faults: the sandbox user's own, then the bank's, then those set for the user, later winning. */
  forUser(rut: string | undefined): UserFaults {
    if (rut === undefined) return { ...this.bank };
    return { ...this.builtIn(rut), ...this.bank, ...this.users.get(rut) };
  }

  /** The bank answered a `refresh_token` grant. */
  noteRefresh(): void {
    this.refreshes += 1;
  }

  /** Whether resource calls still answer 401 under `unauthorizedUntilRefreshes`. */
  awaitingRefreshes(): boolean {
    return this.refreshes < (this.bank.unauthorizedUntilRefreshes ?? 0);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
