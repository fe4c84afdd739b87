import type { RateLimit } from '../../config/defaults.js';
import type { Limits } from '../../banks/budget/budget.js';
import { BudgetWait } from '../../banks/budget/permits.js';
import { ApiError } from '../../errors/api-error.js';
import type { RateLimiter } from '../../ratelimit/limiter.js';
import type { Locale } from '../../html/locale.js';
import { describeProblem } from '../problems.js';

/*
 * How many consent starts reach a bank (issue 43, item 4; docs/open-finance.md, "Bank limits"). Each start is
 * a PAR (at a Brazilian bank also a consent the bank keeps for an hour: three calls), and a publishable key is
 * public by design: one drove 195 starts in 60 s (30 widget tokens a minute and 10 at once, five attempts
 * each), and a real bank counts every one against the appliance's 60 a minute, refusing everyone's syncs
 * after. So a start passes these bounds before anything leaves, the narrowest first, so that a start one of
 * them refuses costs the wider ones nothing:
 *   - the widget session's: `widget.consentStartsPerSession` (3 at once, then 1 a minute), within its five
 *     attempts (MAX_ATTEMPTS, sessions.ts). A person starts again when the bank's window was closed or blocked,
 *     or to pick another bank: two or three starts in a minute; a script holding one session, five at once;
 *   - the key's that issued the widget token (`issued_by`, the publishable key on a web page):
 *     `widget.consentStartsPerKey` (3 at once, then 5 a minute), a third of one bank's start share below, so
 *     one abused key leaves every other key (the organisation's others, other organisations') two thirds;
 *     a token of a build before issue 44 names no key and skips it;
 *   - the organisation's, all its keys of the mode together: `widget.consentStarts` (20 a minute, 10 at once);
 *   - the bank's: starts may use `banks.budget.consentStartShare` of its per-minute budget (a quarter: 15 a
 *     minute at the draft's 60), so syncs and refreshes keep the rest whatever the widgets do;
 * and then takes the bank's permit like any call (bank-calls.ts): a paused bank, or a spent minute, refuses it.
 * A refused start says so in the person's language with when to try again (`session_starts_limited`,
 * `starts_limited`, `bank_busy`), gives its attempt back, and sends nothing to the bank.
 */

/** The starts bucket of a bank: its share of the minute (`banks.budget.consentStartShare`), at most half its second at once. */
export function bankStartsLimit(limits: Limits, share: number): RateLimit {
  return {
    perMinute: Math.max(1, Math.floor(limits.perMinute * share)),
    burst: Math.max(1, Math.floor(limits.perSecond / 2)),
  };
}

/**
 * The start buckets of widget sessions share this prefix: housekeeping removes those of ended sessions
 * (a session lives at most a day, `widget.sessionTtlMinutes`), which would otherwise stay in the database
 * store one row per session for ever.
 */
export const SESSION_STARTS_BUCKET = 'consent_starts:session:';

export interface StartBounds {
  rateLimiter: RateLimiter;
  sessionId: string;
  /** The key that issued the widget token (`key:<id>`); null on a token of a build before issue 44. */
  issuedBy: string | null;
  orgId: string;
  mode: 'live' | 'test';
  bankId: string;
  bankName: string;
  limits: Limits;
  /** `widget.consentStartsPerSession`, `widget.consentStartsPerKey`, `widget.consentStarts`. */
  perSession: RateLimit;
  perKey: RateLimit;
  perOrganisation: RateLimit;
  /** `banks.budget.consentStartShare`. */
  bankShare: number;
  locale: Locale;
  now: number;
}

/** Takes a start from the session's, the key's, the organisation's and the bank's buckets, or throws the refusal the widget words. */
export async function takeStart(bounds: StartBounds): Promise<void> {
  const buckets: [string | null, RateLimit, StartRefusal][] = [
    [`${SESSION_STARTS_BUCKET}${bounds.sessionId}`, bounds.perSession, 'session_starts_limited'],
    [
      bounds.issuedBy === null ? null : `consent_starts:key:${bounds.issuedBy}`,
      bounds.perKey,
      'starts_limited',
    ],
    [`consent_starts:org:${bounds.orgId}:${bounds.mode}`, bounds.perOrganisation, 'starts_limited'],
    [
      `consent_starts:bank:${bounds.bankId}:${bounds.mode}`,
      bankStartsLimit(bounds.limits, bounds.bankShare),
      'bank_busy',
    ],
  ];
  for (const [key, limit, refusal] of buckets) {
    if (key === null) continue;
    const taken = await bounds.rateLimiter.take(key, limit, bounds.now);
    if (!taken.allowed) throw startRefusal(refusal, taken.retryAfter, bounds);
  }
}

/** The bank's budget refused a call of the start (paused, or its minute spent): `bank_busy` until then. */
export function budgetRefusal(
  wait: BudgetWait,
  bounds: Pick<StartBounds, 'bankName' | 'locale' | 'now'>,
): ApiError {
  return startRefusal('bank_busy', Math.max(1, Math.ceil((wait.until - bounds.now) / 1000)), bounds);
}

type StartRefusal = 'bank_busy' | 'starts_limited' | 'session_starts_limited';

function startRefusal(
  code: StartRefusal,
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
