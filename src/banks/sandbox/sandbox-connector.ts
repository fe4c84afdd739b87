import {
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type Connector,
  type DateWindow,
  type HolderType,
  type LoginRequest,
  type LoginResult,
  type MfaChallenge,
} from '../connector.js';
import { BACKFILL_BANK, findInstitution } from '../institutions.js';
import { normaliseRut } from '../../rut/rut.js';
import { MOVEMENTS_REACH_MS, balanceAt, generationContext, rowsBetween } from './generator.js';
import { buildProfile, isPresent, type AccountSpec, type Holder, type Profile } from './profile.js';
import { SANDBOX_MFA_CODE, SANDBOX_PASSWORDS, loginOutcome, scenarioOf } from './scenarios.js';

/**
 * The connector test mode uses: fake banks for all 11 bank codes whose data is a pure function of the
 * bank, the holder (type, RUT, company RUT), the link's sync history and the times passed in. No clock,
 * no randomness and no state of its own: two processes (or the reference gateway) answer identically.
 * Scenarios by password are in `scenarios.ts`; the data patterns in `generator.ts`; docs/sandbox.md is
 * the guide for developers.
 */
export interface SandboxConnectorOptions {
  /** How long a `sandbox-mfa` challenge accepts a code. Default 5 minutes. */
  mfaTtlMs?: number;
}

export const DEFAULT_SANDBOX_MFA_TTL_MS = 5 * 60_000;

/** The JSON a sandbox session or MFA challenge carries: who logged in and how many syncs succeeded before. */
interface SandboxState {
  sandbox: 1;
  bankId: string;
  holderType: HolderType;
  rut: string;
  rutEmpresa: string | null;
  successes: number;
}

export function createSandboxConnector(options: SandboxConnectorOptions = {}): Connector {
  const mfaTtlMs = options.mfaTtlMs ?? DEFAULT_SANDBOX_MFA_TTL_MS;
  if (!Number.isFinite(mfaTtlMs) || mfaTtlMs <= 0)
    throw new RangeError('mfaTtlMs must be a positive number of milliseconds');

  return {
    async login(request: LoginRequest): Promise<LoginResult> {
      const holder = identify(request);
      const scenario = scenarioOf(request.credentials.password);
      if (scenario === null)
        throw new ConnectorError(
          'rejected_credentials',
          `Sandbox password not recognised; use one of ${SANDBOX_PASSWORDS.join(', ')}.`,
        );
      const outcome = loginOutcome(scenario, request.interactive, request.history);
      const state = toState(holder, request.history.successes);
      switch (outcome.kind) {
        case 'fail':
          throw new ConnectorError(
            outcome.code,
            outcome.code === 'bank_unavailable'
              ? 'The sandbox bank is unavailable (scenario).'
              : 'The sandbox bank rejected the credentials (scenario).',
          );
        case 'mfa':
          return { kind: 'mfa', challenge: { expiresAt: request.now + mfaTtlMs, state: { ...state } } };
        case 'session':
          return { kind: 'session', session: sessionOf(state) };
      }
    },

    async submitMfa(request: LoginRequest, challenge: MfaChallenge, code: string): Promise<BankSession> {
      const state = parseState(challenge.state);
      if (!state) throw new ConnectorError('mfa_invalid', 'Not a sandbox MFA challenge.');
      if (request.now > challenge.expiresAt)
        throw new ConnectorError('mfa_expired', 'The sandbox MFA challenge has expired.');
      if (code.trim() !== SANDBOX_MFA_CODE)
        throw new ConnectorError('mfa_invalid', `Wrong code; the sandbox code is ${SANDBOX_MFA_CODE}.`);
      return sessionOf(state);
    },

    async listAccounts(session: BankSession, now: number): Promise<BankAccount[]> {
      const state = sessionState(session);
      const context = generationContext(profileOf(state));
      const { profile } = context;
      return profile.accounts
        .filter((spec) => isPresent(spec.kind, profile.ownerRut, state.successes))
        .map((spec) => toAccount(profile, spec, balanceAt(context, spec, now)));
    },

    async listMovements(
      session: BankSession,
      account: BankAccount,
      window: DateWindow,
      now: number,
    ): Promise<BankMovement[]> {
      const state = sessionState(session);
      const context = generationContext(profileOf(state));
      const spec = context.profile.accounts.find((candidate) => candidate.ref === account.ref);
      if (!spec) return [];
      return rowsBetween(context, spec, Math.max(window.from, now - MOVEMENTS_REACH_MS), window.to, now);
    },

    async statements(
      session: BankSession,
      account: BankAccount,
      window: DateWindow,
      now: number,
    ): Promise<BankMovement[]> {
      const state = sessionState(session);
      if (state.bankId !== BACKFILL_BANK || state.holderType !== 'business')
        throw new ConnectorError(
          'unsupported',
          `Statements are offered by ${BACKFILL_BANK} to business holders only.`,
        );
      const context = generationContext(profileOf(state));
      const spec = context.profile.accounts.find((candidate) => candidate.ref === account.ref);
      if (!spec) return [];
      return rowsBetween(context, spec, window.from, Math.min(window.to, now - MOVEMENTS_REACH_MS), now);
    },
  };
}

/** Checks what a real bank would check before the password: the bank, the holder type and the RUTs. */
function identify(request: LoginRequest): Holder {
  const institution = findInstitution(request.bankId);
  if (!institution) throw new ConnectorError('unsupported', `The sandbox has no bank "${request.bankId}".`);
  if (!institution.holderTypes.includes(request.holderType))
    throw new ConnectorError('unsupported', `${institution.name} has no ${request.holderType} holders.`);
  const rut = normaliseRut(request.credentials.rut ?? '');
  if (!rut) throw new ConnectorError('rejected_credentials', 'The RUT is not valid (check digit).');
  let rutEmpresa: string | null = null;
  if (request.holderType === 'business') {
    rutEmpresa = normaliseRut(request.credentials.rutEmpresa ?? '');
    if (!rutEmpresa)
      throw new ConnectorError(
        'rejected_credentials',
        'A business login needs a valid company RUT (rutEmpresa).',
      );
  }
  return { bankId: request.bankId, holderType: request.holderType, rut, rutEmpresa };
}

function toState(holder: Holder, successes: number): SandboxState {
  return { sandbox: 1, ...holder, successes };
}

function sessionOf(state: SandboxState): BankSession {
  return { holderName: buildProfile(state).holderName, state: { ...state } };
}

function parseState(raw: Record<string, unknown>): SandboxState | null {
  const { sandbox, bankId, holderType, rut, rutEmpresa, successes } = raw;
  if (sandbox !== 1 || typeof bankId !== 'string' || !findInstitution(bankId)) return null;
  if (holderType !== 'individual' && holderType !== 'business') return null;
  if (typeof rut !== 'string' || normaliseRut(rut) !== rut) return null;
  if (
    holderType === 'business'
      ? typeof rutEmpresa !== 'string' || normaliseRut(rutEmpresa) !== rutEmpresa
      : rutEmpresa !== null
  )
    return null;
  if (typeof successes !== 'number' || !Number.isInteger(successes) || successes < 0) return null;
  return { sandbox, bankId, holderType, rut, rutEmpresa: rutEmpresa as string | null, successes };
}

function sessionState(session: BankSession): SandboxState {
  const state = parseState(session.state);
  if (!state) throw new TypeError('Not a sandbox session.');
  return state;
}

function profileOf(state: SandboxState): Profile {
  return buildProfile({
    bankId: state.bankId,
    holderType: state.holderType,
    rut: state.rut,
    rutEmpresa: state.rutEmpresa,
  });
}

/**
 * Balances in minor units. Deposit accounts: `current` = `available` = opening balance plus posted
 * movements. Cards follow the usual convention: `current` is the amount owed (positive), `available` the
 * limit minus what is owed and what pending charges hold.
 */
function toAccount(
  profile: Profile,
  spec: AccountSpec,
  balance: { posted: number; pending: number },
): BankAccount {
  let current: number;
  let available: number;
  if (spec.type === 'credit_card') {
    current = spec.opening - balance.posted;
    available = Math.max(0, (spec.limit ?? 0) - current + balance.pending);
  } else {
    current = spec.opening + balance.posted;
    available = current;
  }
  return {
    ref: spec.ref,
    name: spec.name,
    type: spec.type,
    currency: spec.currency,
    last4: spec.last4,
    holderName: profile.holderName,
    balance: { available, current, limit: spec.limit },
  };
}
