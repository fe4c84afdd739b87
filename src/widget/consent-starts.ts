import type { RateLimit } from '../config/defaults.js';
import type { Limits } from '../banks/budget/budget.js';
import { BudgetWait } from '../banks/budget/permits.js';
import { ApiError } from '../errors/api-error.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import type { Locale } from './messages.js';
import { describeProblem } from './problems.js';

/*
 * How many consent starts reach a bank (issue 43, item 4; docs/open-finance.md, "Bank limits"). Each start is
 * a PAR (at a Brazilian bank also a consent the bank keeps for an hour: three calls), and a publishable key is
 * public by design: one drove 195 starts in 60 s, and a real bank counts every one against the appliance's 60
 * a minute, refusing everyone's syncs after. So a start passes three bounds before anything leaves:
 *   - the widget session's attempts (MAX_ATTEMPTS, flows.ts), as before;
 *   - the publishable key's: `widget.consentStarts` (20 a minute, 10 at once). A widget token does not record the key that made it, and the API
 *     charges a publishable key to its organisation's bucket already (auth/authenticator.ts), so the bound is
 *     per organisation and mode, which is at least as tight as per key;
 *   - the bank's: starts may use `banks.budget.consentStartShare` of its per-minute budget (a quarter: 15 a
 *     minute at the draft's 60), so
 *     syncs and refreshes keep the rest whatever the widgets do;
 * and then takes the bank's permit like any call (bank-calls.ts): a paused bank, or a spent minute, refuses it.
 * A refused start says so in the person's language with when to try again (`bank_busy`, `starts_limited`),
 * gives its attempt back, and sends nothing to the bank.
 */

/** The starts bucket of a bank: its share of the minute (`banks.budget.consentStartShare`), at most half its second at once. */
export function bankStartsLimit(limits: Limits, share: number): RateLimit {
  return {
    perMinute: Math.max(1, Math.floor(limits.perMinute * share)),
    burst: Math.max(1, Math.floor(limits.perSecond / 2)),
  };
}

export interface StartBounds {
  rateLimiter: RateLimiter;
  orgId: string;
  mode: 'live' | 'test';
  bankId: string;
  bankName: string;
  limits: Limits;
  /** `widget.consentStarts` and `banks.budget.consentStartShare`. */
  perKey: RateLimit;
  bankShare: number;
  locale: Locale;
  now: number;
}

/** Takes a start from the key's and the bank's buckets, or throws the refusal the widget words. */
export async function takeStart(bounds: StartBounds): Promise<void> {
  const key = await bounds.rateLimiter.take(
    `consent_starts:org:${bounds.orgId}:${bounds.mode}`,
    bounds.perKey,
    bounds.now,
  );
  if (!key.allowed) throw startRefusal('starts_limited', key.retryAfter, bounds);
  const bank = await bounds.rateLimiter.take(
    `consent_starts:bank:${bounds.bankId}:${bounds.mode}`,
    bankStartsLimit(bounds.limits, bounds.bankShare),
    bounds.now,
  );
  if (!bank.allowed) throw startRefusal('bank_busy', bank.retryAfter, bounds);
}

/** The bank's budget refused a call of the start (paused, or its minute spent): `bank_busy` until then. */
export function budgetRefusal(
  wait: BudgetWait,
  bounds: Pick<StartBounds, 'bankName' | 'locale' | 'now'>,
): ApiError {
  return startRefusal('bank_busy', Math.max(1, Math.ceil((wait.until - bounds.now) / 1000)), bounds);
}

function startRefusal(
  code: 'bank_busy' | 'starts_limited',
  retryAfterSeconds: number,
  bounds: Pick<StartBounds, 'bankName' | 'locale'>,
): ApiError {
  const seconds = Math.max(1, retryAfterSeconds);
  const words = describeProblem(
    code,
    { bankName: bounds.bankName, retryAfterSeconds: seconds },
    bounds.locale,
  ).message;
  return new ApiError(429, 'rate_limit_error', code, words, undefined, { 'Retry-After': String(seconds) });
}
