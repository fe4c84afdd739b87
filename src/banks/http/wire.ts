import {
  CONNECTOR_ERROR_CODES,
  type AccountType,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type ConnectorErrorCode,
  type DateWindow,
  type HolderType,
  type LoginRequest,
  type LoginResult,
  type MfaChallenge,
  type MovementType,
} from '../connector.js';

/**
 * The wire format of the HTTP connector protocol (docs/connector-protocol.md) and its conversion to and from
 * the connector contract, shared by the client (http-connector.ts) and the reference gateway. Wire fields
 * are snake_case, times are ISO 8601 strings, money is integer minor units. Decoders check every field and
 * throw WireFormatError naming the field, never its value (a value may be a password).
 */
export class WireFormatError extends Error {
  override name = 'WireFormatError';
}

export interface WireCredentials {
  rut: string;
  password: string;
  rut_empresa: string | null;
}

export interface WireLoginRequest {
  bank_id: string;
  holder_type: HolderType;
  credentials: WireCredentials;
  now: string;
  interactive: boolean;
  history: { attempts: number; successes: number };
}

export interface WireSession {
  holder_name: string;
  state: Record<string, unknown>;
}

export interface WireChallenge {
  expires_at: string;
  state: Record<string, unknown>;
}

export type WireLoginResult =
  { kind: 'session'; session: WireSession } | { kind: 'mfa'; challenge: WireChallenge };

export interface WireMfaRequest extends WireLoginRequest {
  challenge: WireChallenge;
  code: string;
}

export interface WireAccount {
  ref: string;
  name: string;
  type: AccountType;
  currency: string;
  last_4: string;
  holder_name: string;
  /**
   * The protocol carries integers for `available` and `current` (accountFromWire refuses null): only a
   * consent connector leaves them null (BankAccount), and no gateway serves one.
   */
  balance: { available: number | null; current: number | null; limit: number | null };
}

export interface WireMovement {
  ref: string | null;
  amount: number;
  currency: string;
  description: string;
  type: MovementType;
  reference_id: string | null;
  counterparty: {
    name: string;
    rut: string | null;
    bank_id: string | null;
    account_last_4: string | null;
  } | null;
  posted_at: string;
  transaction_date: string;
  pending: boolean;
}

export interface WireAccountsRequest {
  bank_id: string;
  session: WireSession;
  now: string;
}

export interface WireMovementsRequest extends WireAccountsRequest {
  account: WireAccount;
  from: string;
  to: string;
}

export interface WireError {
  error: { code: string; message: string };
}

const HOLDER_TYPES: readonly HolderType[] = ['individual', 'business'];
const ACCOUNT_TYPES: readonly AccountType[] = ['checking', 'savings', 'credit_card'];
const MOVEMENT_TYPES: readonly MovementType[] = [
  'transfer',
  'card_purchase',
  'deposit',
  'withdrawal',
  'fee',
  'interest',
  'salary',
  'other',
];

// ---------------------------------------------------------------------------------------------------------
// Contract -> wire

export function toIsoTime(ms: number): string {
  return new Date(ms).toISOString();
}

export function loginRequestToWire(bankId: string, request: LoginRequest): WireLoginRequest {
  return {
    bank_id: bankId,
    holder_type: request.holderType,
    credentials: {
      rut: request.credentials.rut,
      password: request.credentials.password,
      rut_empresa: request.credentials.rutEmpresa,
    },
    now: toIsoTime(request.now),
    interactive: request.interactive,
    history: { attempts: request.history.attempts, successes: request.history.successes },
  };
}

export function sessionToWire(session: BankSession): WireSession {
  return { holder_name: session.holderName, state: session.state };
}

export function challengeToWire(challenge: MfaChallenge): WireChallenge {
  return { expires_at: toIsoTime(challenge.expiresAt), state: challenge.state };
}

export function loginResultToWire(result: LoginResult): WireLoginResult {
  return result.kind === 'session'
    ? { kind: 'session', session: sessionToWire(result.session) }
    : { kind: 'mfa', challenge: challengeToWire(result.challenge) };
}

export function accountToWire(account: BankAccount): WireAccount {
  return {
    ref: account.ref,
    name: account.name,
    type: account.type,
    currency: account.currency,
    last_4: account.last4,
    holder_name: account.holderName,
    balance: {
      available: account.balance.available,
      current: account.balance.current,
      limit: account.balance.limit,
    },
  };
}

export function movementToWire(movement: BankMovement): WireMovement {
  const counterparty = movement.counterparty;
  return {
    ref: movement.ref,
    amount: movement.amount,
    currency: movement.currency,
    description: movement.description,
    type: movement.type,
    reference_id: movement.referenceId,
    counterparty: counterparty && {
      name: counterparty.name,
      rut: counterparty.rut,
      bank_id: counterparty.bankId,
      account_last_4: counterparty.accountLast4,
    },
    posted_at: toIsoTime(movement.postedAt),
    transaction_date: movement.transactionDate,
    pending: movement.pending,
  };
}

export function movementsRequestToWire(
  bankId: string,
  session: BankSession,
  account: BankAccount,
  window: DateWindow,
  now: number,
): WireMovementsRequest {
  return {
    bank_id: bankId,
    session: sessionToWire(session),
    account: accountToWire(account),
    from: toIsoTime(window.from),
    to: toIsoTime(window.to),
    now: toIsoTime(now),
  };
}

export function errorToWire(code: string, message: string): WireError {
  return { error: { code, message } };
}

// ---------------------------------------------------------------------------------------------------------
// Wire -> contract

function fail(path: string, expected: string): never {
  throw new WireFormatError(`${path} must be ${expected}`);
}

function object(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(path, 'an object');
  return value as Record<string, unknown>;
}

function string(value: unknown, path: string): string {
  if (typeof value !== 'string') fail(path, 'a string');
  return value;
}

function nullableString(value: unknown, path: string): string | null {
  return value === null || value === undefined ? null : string(value, path);
}

function boolean(value: unknown, path: string): boolean {
  if (typeof value !== 'boolean') fail(path, 'true or false');
  return value;
}

/** Money and counters: integers that JSON carries exactly (at most 2^53 - 1 in magnitude). */
function integer(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) fail(path, 'an integer');
  return value;
}

function nullableInteger(value: unknown, path: string): number | null {
  return value === null || value === undefined ? null : integer(value, path);
}

function oneOf<T extends string>(values: readonly T[], value: unknown, path: string): T {
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) {
    fail(path, `one of ${values.join(', ')}`);
  }
  return value as T;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** An ISO 8601 date-time with a zone (`Z` or an offset), as milliseconds since the epoch. */
function isoTime(value: unknown, path: string): number {
  if (typeof value !== 'string' || !ISO_TIME.test(value)) fail(path, 'an ISO 8601 date-time with a zone');
  // Date.parse keeps milliseconds and drops finer digits, which the contract does not carry either.
  const ms = Date.parse(value.replace(/(\.\d{3})\d+/, '$1'));
  if (!Number.isFinite(ms)) fail(path, 'a valid ISO 8601 date-time');
  return ms;
}

function calendarDate(value: unknown, path: string): string {
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(value)) fail(path, 'a date (YYYY-MM-DD)');
  return value;
}

function state(value: unknown, path: string): Record<string, unknown> {
  return object(value, path);
}

export function sessionFromWire(value: unknown, path = 'session'): BankSession {
  const session = object(value, path);
  return {
    holderName: string(session.holder_name, `${path}.holder_name`),
    state: state(session.state, `${path}.state`),
  };
}

export function challengeFromWire(value: unknown, path = 'challenge'): MfaChallenge {
  const challenge = object(value, path);
  return {
    expiresAt: isoTime(challenge.expires_at, `${path}.expires_at`),
    state: state(challenge.state, `${path}.state`),
  };
}

export function loginResultFromWire(value: unknown): LoginResult {
  const body = object(value, 'body');
  const kind = oneOf(['session', 'mfa'] as const, body.kind, 'kind');
  return kind === 'session'
    ? { kind, session: sessionFromWire(body.session) }
    : { kind, challenge: challengeFromWire(body.challenge) };
}

/** The body of `/v1/mfa`'s answer: `{session}`. */
export function mfaResultFromWire(value: unknown): BankSession {
  return sessionFromWire(object(value, 'body').session);
}

export function loginRequestFromWire(value: unknown): LoginRequest {
  const body = object(value, 'body');
  const bankId = string(body.bank_id, 'bank_id');
  const holderType = oneOf(HOLDER_TYPES, body.holder_type, 'holder_type');
  const credentials = object(body.credentials, 'credentials');
  const rut = string(credentials.rut, 'credentials.rut');
  const password = string(credentials.password, 'credentials.password');
  const rutEmpresa = nullableString(credentials.rut_empresa, 'credentials.rut_empresa');
  const now = isoTime(body.now, 'now');
  const interactive = boolean(body.interactive, 'interactive');
  const history = object(body.history, 'history');
  return {
    bankId,
    holderType,
    credentials: { rut, password, rutEmpresa },
    now,
    interactive,
    history: {
      attempts: integer(history.attempts, 'history.attempts'),
      successes: integer(history.successes, 'history.successes'),
    },
  };
}

export function mfaRequestFromWire(value: unknown): {
  request: LoginRequest;
  challenge: MfaChallenge;
  code: string;
} {
  const body = object(value, 'body');
  return {
    request: loginRequestFromWire(body),
    challenge: challengeFromWire(body.challenge),
    code: string(body.code, 'code'),
  };
}

export function accountFromWire(value: unknown, path = 'account'): BankAccount {
  const account = object(value, path);
  const balance = object(account.balance, `${path}.balance`);
  return {
    ref: string(account.ref, `${path}.ref`),
    name: string(account.name, `${path}.name`),
    type: oneOf(ACCOUNT_TYPES, account.type, `${path}.type`),
    currency: string(account.currency, `${path}.currency`),
    last4: string(account.last_4, `${path}.last_4`),
    holderName: string(account.holder_name, `${path}.holder_name`),
    balance: {
      available: integer(balance.available, `${path}.balance.available`),
      current: integer(balance.current, `${path}.balance.current`),
      limit: nullableInteger(balance.limit, `${path}.balance.limit`),
    },
  };
}

export function movementFromWire(value: unknown, path = 'movement'): BankMovement {
  const movement = object(value, path);
  const rawCounterparty = movement.counterparty;
  let counterparty: BankMovement['counterparty'] = null;
  if (rawCounterparty !== null && rawCounterparty !== undefined) {
    const c = object(rawCounterparty, `${path}.counterparty`);
    counterparty = {
      name: string(c.name, `${path}.counterparty.name`),
      rut: nullableString(c.rut, `${path}.counterparty.rut`),
      bankId: nullableString(c.bank_id, `${path}.counterparty.bank_id`),
      accountLast4: nullableString(c.account_last_4, `${path}.counterparty.account_last_4`),
    };
  }
  return {
    ref: nullableString(movement.ref, `${path}.ref`),
    amount: integer(movement.amount, `${path}.amount`),
    currency: string(movement.currency, `${path}.currency`),
    description: string(movement.description, `${path}.description`),
    type: oneOf(MOVEMENT_TYPES, movement.type, `${path}.type`),
    referenceId: nullableString(movement.reference_id, `${path}.reference_id`),
    counterparty,
    postedAt: isoTime(movement.posted_at, `${path}.posted_at`),
    transactionDate: calendarDate(movement.transaction_date, `${path}.transaction_date`),
    pending: boolean(movement.pending, `${path}.pending`),
  };
}

function list<T>(value: unknown, path: string, item: (value: unknown, path: string) => T): T[] {
  if (!Array.isArray(value)) fail(path, 'an array');
  return value.map((entry, index) => item(entry, `${path}[${index}]`));
}

export function accountsFromWire(value: unknown): BankAccount[] {
  return list(object(value, 'body').accounts, 'accounts', accountFromWire);
}

export function movementsFromWire(value: unknown): BankMovement[] {
  return list(object(value, 'body').movements, 'movements', movementFromWire);
}

export function accountsRequestFromWire(value: unknown): {
  bankId: string;
  session: BankSession;
  now: number;
} {
  const body = object(value, 'body');
  return {
    bankId: string(body.bank_id, 'bank_id'),
    session: sessionFromWire(body.session),
    now: isoTime(body.now, 'now'),
  };
}

export function movementsRequestFromWire(value: unknown): {
  bankId: string;
  session: BankSession;
  account: BankAccount;
  window: DateWindow;
  now: number;
} {
  const body = object(value, 'body');
  return {
    ...accountsRequestFromWire(body),
    account: accountFromWire(body.account),
    window: { from: isoTime(body.from, 'from'), to: isoTime(body.to, 'to') },
  };
}

/** The `{error: {code, message}}` of a non-2xx answer, or null when the body is not one. */
export function errorFromWire(value: unknown): { code: string; message: string } | null {
  if (typeof value !== 'object' || value === null) return null;
  const error = (value as Record<string, unknown>).error;
  if (typeof error !== 'object' || error === null) return null;
  const { code, message } = error as Record<string, unknown>;
  if (typeof code !== 'string') return null;
  return { code, message: typeof message === 'string' ? message : '' };
}

export function isConnectorErrorCode(code: string): code is ConnectorErrorCode {
  return (CONNECTOR_ERROR_CODES as readonly string[]).includes(code);
}
