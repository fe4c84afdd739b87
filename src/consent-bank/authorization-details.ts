/*
 * Rich Authorization Requests (RFC 9396) of type `Accounts`, as the Chilean draft asks for data consents:
 * `actions` among the four below, an optional `validTo`. Other members the draft names (identifier,
 * privileges, purpose, frequency) are kept as sent and not acted on.
 */

/**
 * The actions of an `Accounts` detail this bank grants, as it reads the Chilean draft (issue 41: the bank
 * states its own reading and never imports the connector's, so a misreading on one side shows as a failure).
 */
export const ACCOUNT_ACTIONS = [
  'ReadAccounts',
  'ReadBalances',
  'ReadTransactions',
  'ReadCreditCards',
] as const;
export type AccountAction = (typeof ACCOUNT_ACTIONS)[number];

/** The longest consent the draft allows: 36 months. */
export const MAX_CONSENT_MS = 36 * 30 * 86_400_000;
/** A consent without `validTo` lasts a year. */
export const DEFAULT_CONSENT_MS = 365 * 86_400_000;

export interface AccountsDetail {
  type: 'Accounts';
  actions: AccountAction[];
  validTo?: string;
  [member: string]: unknown;
}

/** Why a detail is refused (an OAuth `invalid_authorization_details` description), or null. */
export function detailProblem(detail: Record<string, unknown>, now: number): string | null {
  if (detail.type !== 'Accounts') return `authorization_details type must be Accounts`;
  const actions = detail.actions;
  if (!Array.isArray(actions) || actions.length === 0)
    return 'Accounts details need a non-empty actions array';
  for (const action of actions)
    if (!(ACCOUNT_ACTIONS as readonly unknown[]).includes(action))
      return `Accounts actions must be among ${ACCOUNT_ACTIONS.join(', ')}`;
  if (detail.validTo !== undefined) {
    const at = typeof detail.validTo === 'string' ? Date.parse(detail.validTo) : NaN;
    if (!Number.isFinite(at)) return 'validTo must be an RFC 3339 date-time';
    if (at <= now) return 'validTo must be in the future';
    if (at > now + MAX_CONSENT_MS) return 'validTo must be within 36 months';
  }
  return null;
}

/** The end of a consent: the earliest `validTo`, else a year from now. */
export function consentEnd(details: readonly Record<string, unknown>[], now: number): number {
  const ends = details
    .map((detail) => (typeof detail.validTo === 'string' ? Date.parse(detail.validTo) : NaN))
    .filter(Number.isFinite);
  return ends.length > 0 ? Math.min(...ends) : now + DEFAULT_CONSENT_MS;
}

/** Every action the details grant. */
export function grantedActions(details: readonly Record<string, unknown>[] | undefined): Set<AccountAction> {
  const granted = new Set<AccountAction>();
  for (const detail of details ?? [])
    if (detail.type === 'Accounts' && Array.isArray(detail.actions))
      for (const action of detail.actions)
        if ((ACCOUNT_ACTIONS as readonly unknown[]).includes(action)) granted.add(action as AccountAction);
  return granted;
}
