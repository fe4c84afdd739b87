/**
 * The only code that talks to a bank is a connector. It logs in (perhaps asking for an MFA code), lists
 * accounts, lists movements for a date window and, where the bank has them, downloads statements for
 * backfill. It raises typed errors; the sync engine owns everything else (dedup, reversals, pending to
 * posted, removed accounts, failure counting, events).
 */
import type { AuthorizationDetail } from './consent/authorization-details.js';

export type HolderType = 'individual' | 'business';
export type AccountType = 'checking' | 'savings' | 'credit_card';
export type MovementType =
  'transfer' | 'card_purchase' | 'deposit' | 'withdrawal' | 'fee' | 'interest' | 'salary' | 'other';

export interface BankCredentials {
  /** Normalised RUT: digits, a hyphen and the check digit (`12345678-5`). */
  rut: string;
  password: string;
  /** The company's RUT, for business holders. */
  rutEmpresa: string | null;
}

/**
 * A consent bank's login: the grant the end user authorised at the bank and its tokens. RFC 6749 calls
 * tokens credentials too, so a consent connector receives this where a credential connector receives a
 * password. The sync engine opens it from the link's grant (links/consent/) as it opens sealed passwords.
 */
export interface GrantCredentials {
  kind: 'grant';
  grantId: string;
  accessToken: string;
  /** Ms since the epoch; null when the bank did not say. */
  accessTokenExpiresAt: number | null;
  refreshToken: string | null;
  /** What was authorised (RFC 9396), as the bank confirmed it. */
  authorizationDetails: AuthorizationDetail[];
}

/** What a connector logs in with: a bank login, or a consent grant. */
export type LoginCredentials = BankCredentials | GrantCredentials;

export function isGrant(credentials: LoginCredentials): credentials is GrantCredentials {
  return 'kind' in credentials && credentials.kind === 'grant';
}

/**
 * `C` is what the connector logs in with: a password (the default, so every credential connector reads
 * as before) or a grant (`ConsentConnector`).
 */
export interface LoginRequest<C extends LoginCredentials = BankCredentials> {
  bankId: string;
  holderType: HolderType;
  credentials: C;
  /** Milliseconds since the epoch, from the caller's clock (sandbox data is a function of it). */
  now: number;
  /**
   * True when a person can answer an MFA prompt (an on-demand refresh or the widget); a scheduled sync is
   * not interactive, and a bank that would ask for a code fails it with `mfa_required`.
   */
  interactive: boolean;
  /**
   * The link's sync history before this attempt. Real banks ignore it; the sandbox's scenarios use it
   * (`sandbox-flaky` fails every other attempt, `sandbox-expiring` rejects every login after the first
   * success, and some accounts appear or disappear after a number of successful syncs).
   */
  history: { attempts: number; successes: number };
}

/** An opaque, JSON-serialisable session: the sync engine stores nothing of it beyond the sync. */
export interface BankSession {
  holderName: string;
  state: Record<string, unknown>;
  /**
   * Accounts (refs) the bank says still exist but cannot be read now, set by `listAccounts`: Open Finance
   * Brasil's resources `TEMPORARILY_UNAVAILABLE` (a block) or `PENDING_AUTHORISATION` (a co-holder has not
   * consented yet). The engine keeps them as they are rather than removing them; only an account the bank
   * no longer lists, or lists `UNAVAILABLE` (closed), is removed.
   */
  unavailableRefs?: readonly string[];
}

/** The bank waits for a code; `state` is JSON the engine keeps (encrypted) so any process can resume. */
export interface MfaChallenge {
  expiresAt: number;
  state: Record<string, unknown>;
}

export type LoginResult =
  { kind: 'session'; session: BankSession } | { kind: 'mfa'; challenge: MfaChallenge };

export interface BankAccount {
  /** The bank's stable id of the account. */
  ref: string;
  name: string;
  type: AccountType;
  currency: string;
  last4: string;
  holderName: string;
  /**
   * Minor units. `limit` only for credit cards. A figure the bank does not state is null, never a guessed 0:
   * an Open Finance card with a flexible limit has no limit and may give no available amount, and an empty
   * limits list is "the absence of the information" (credit cards 2.3.1). The accounts table and the API
   * already hold null for each.
   */
  balance: { available: number | null; current: number | null; limit: number | null };
}

export interface BankMovement {
  /** The bank's id of the row, when it gives one; a pending row and its posted row may differ. */
  ref: string | null;
  /** Signed minor units: negative is money out. */
  amount: number;
  currency: string;
  description: string;
  type: MovementType;
  /** The transaction's reference number, shared by a pending row, its posted row and a repeated row. */
  referenceId: string | null;
  counterparty: {
    name: string;
    rut: string | null;
    bankId: string | null;
    accountLast4: string | null;
  } | null;
  /** Booking time, ms since the epoch (may be earlier than a previous sync: banks book retroactively). */
  postedAt: number;
  /** The day of the transaction, `YYYY-MM-DD`. */
  transactionDate: string;
  pending: boolean;
}

export interface DateWindow {
  /** Inclusive, ms since the epoch. */
  from: number;
  /** Exclusive, ms since the epoch. */
  to: number;
}

export interface Connector<C extends LoginCredentials = BankCredentials> {
  /**
   * A consent connector's login checks the grant (and refreshes its access token when it is due) instead
   * of typing a password; it never asks for MFA, which happened at the bank.
   */
  login(request: LoginRequest<C>): Promise<LoginResult>;
  /** Completes a login that asked for a code; a wrong code raises `mfa_invalid`, a late one `mfa_expired`. */
  submitMfa(request: LoginRequest<C>, challenge: MfaChallenge, code: string): Promise<BankSession>;
  listAccounts(session: BankSession, now: number): Promise<BankAccount[]>;
  /** Movements booked in the window; for credit cards, unbilled charges come with `pending: true`. */
  listMovements(
    session: BankSession,
    account: BankAccount,
    window: DateWindow,
    now: number,
  ): Promise<BankMovement[]>;
  /**
   * A consent bank only: an account the link already has, read with one call (a deposit account's balances,
   * a card's limits), for a steady-state scheduled sync that asks for movements only where a figure moved
   * (docs/open-finance.md, "Calls per sync"). `gone`: the bank says there is no such account now (404, 403):
   * the sync reads the lists again at once. `unknown`: the consent does not cover balances, so nothing can
   * say whether it moved.
   */
  readBalance?(
    session: BankSession,
    account: BankAccount,
    now: number,
  ): Promise<{ kind: 'read'; balance: BankAccount['balance'] } | { kind: 'gone' } | { kind: 'unknown' }>;
  /**
   * A consent bank only: the holder's name as the bank vouches for it (docs/open-finance.md, "The holder's
   * name"), which the engine asks for on a link's first sync and daily full pass only, never on a steady-state
   * scheduled sync. It may cost one call (a refresh, a customers read). Throws only what ends the sync anyway
   * (the consent is over); anything else is `failed`, and the link keeps the name it has.
   */
  readHolderName?(session: BankSession, now: number): Promise<HolderNameRead>;
  /** Statement rows older than the movements API reaches, for backfill; absent where the bank has none. */
  statements?(
    session: BankSession,
    account: BankAccount,
    window: DateWindow,
    now: number,
  ): Promise<BankMovement[]>;
}

/**
 * What a consent bank said of the holder's name. `named`: its name; `unnamed`: the bank names no one (the
 * consent does not cover the name, or the bank keeps none); `failed`: it could not be read now, and why (no
 * secret in it).
 */
export type HolderNameRead =
  { kind: 'named'; name: string } | { kind: 'unnamed'; reason: string } | { kind: 'failed'; reason: string };

/** A connector that logs in with the grant of a consent link (docs/open-finance.md). */
export type ConsentConnector = Connector<GrantCredentials>;

export const CONNECTOR_ERROR_CODES = [
  'rejected_credentials',
  'account_locked',
  'action_required',
  'mfa_required',
  'mfa_invalid',
  'mfa_expired',
  'bank_unavailable',
  'timeout',
  'unsupported',
  // A consent bank's answer did not match the schema we expect (src/banks/consent/data-schemas.ts): the
  // sync fails with the reason, writes nothing, and is tried again at the next one.
  'invalid_bank_data',
  // A consent bank ended the grant (revoked at the bank, or gone from its Grant Management): no retry can
  // help, so the link expires at once (ENDING_FAILURES) and the user must consent again.
  'consent_revoked',
] as const;
export type ConnectorErrorCode = (typeof CONNECTOR_ERROR_CODES)[number];

/**
 * Whether an error says something about the credentials (and so counts towards expiring the link after
 * three in a row) or about the bank's availability (retried, never expires a link).
 */
export const CREDENTIAL_FAILURES: ReadonlySet<ConnectorErrorCode> = new Set([
  'rejected_credentials',
  'account_locked',
  'action_required',
  'consent_revoked',
]);

/**
 * Failures the bank states as final: the link expires at the first one, not after three in a row. A consent
 * bank that refuses to refresh the grant's tokens (`invalid_grant`) or says in Grant Management that the
 * grant is revoked, gone or expired will say the same at every retry; retrying only costs the bank calls.
 */
export const ENDING_FAILURES: ReadonlySet<ConnectorErrorCode> = new Set(['consent_revoked']);

export interface ConnectorErrorOptions {
  /**
   * The bank said when to call again (429 or 529 with `Retry-After`), as ms since the epoch: the sync engine
   * tries the job again then, not before.
   */
  retryAt?: number;
  /**
   * Why, in the appliance's own words (no bank's text, no value, no secret): the failed job keeps it, so
   * `svc links inspect` shows it. A gateway's messages are not ours to vouch for and never set it.
   */
  reason?: string;
}

export class ConnectorError extends Error {
  override name = 'ConnectorError';
  readonly retryAt: number | undefined;
  readonly reason: string | undefined;
  constructor(
    readonly code: ConnectorErrorCode,
    message: string,
    options: ConnectorErrorOptions = {},
  ) {
    super(message);
    this.retryAt = options.retryAt;
    this.reason = options.reason;
  }

  get retryable(): boolean {
    return this.code === 'bank_unavailable' || this.code === 'timeout';
  }
}
