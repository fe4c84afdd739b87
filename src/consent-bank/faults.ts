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
}

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

  constructor(private readonly builtIn: (rut: string) => UserFaults = () => ({})) {}

  /** Replaces the bank-wide faults. */
  setFaults(faults: BankFaults): void {
    this.bank = { ...faults };
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

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
