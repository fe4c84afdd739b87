import type { RateLimit } from '../config/defaults.js';

export interface BucketState {
  tokens: number;
  updatedAt: number;
}

export interface Decision {
  allowed: boolean;
  state: BucketState;
  limit: number;
  remaining: number;
  /** Unix seconds at which the bucket is full again. */
  resetAt: number;
  /** Whole seconds until one request is allowed again (0 when allowed). */
  retryAfter: number;
}

/**
 * A token bucket: `burst` tokens at most, refilled at `perMinute / 60` per second. A fresh bucket starts
 * full, so a client may send `burst` requests at once and then `perMinute` per minute.
 */
export function take(state: BucketState | undefined, limit: RateLimit, now: number): Decision {
  const ratePerMs = limit.perMinute / 60_000;
  const refilled = state
    ? Math.min(limit.burst, state.tokens + Math.max(0, now - state.updatedAt) * ratePerMs)
    : limit.burst;
  const allowed = refilled >= 1;
  const tokens = allowed ? refilled - 1 : refilled;
  return describe(allowed, { tokens, updatedAt: now }, limit, ratePerMs);
}

/**
 * Splits one grant of `granted` tokens among `count` requests charged together, in arrival order: the
 * first `granted` are allowed, each seeing the bucket as if the requests had been charged one by one.
 * `after` is the bucket once the whole grant was taken.
 */
export function shareGrant(granted: number, after: BucketState, count: number, limit: RateLimit): Decision[] {
  return Array.from({ length: count }, (_, index) =>
    index < granted
      ? describe(true, { tokens: after.tokens + (granted - 1 - index), updatedAt: after.updatedAt }, limit)
      : describe(false, after, limit),
  );
}

/**
 * How many tokens beyond its waiting requests a process may take from a shared bucket and spend from memory,
 * so a busy key costs a database statement per batch of requests rather than per request. Only from a
 * bucket known to be more than half full, and at most 0.1% of its burst (none under a burst of 1,000), so a
 * spare token left unspent when it lapses never decides whether a client near its limit is refused.
 */
export function spareTokensToTake(lastKnown: BucketState | undefined, limit: RateLimit): number {
  if (!lastKnown || lastKnown.tokens <= limit.burst / 2) return 0;
  return Math.min(MAX_SPARE_TOKENS, Math.floor(limit.burst / 1000));
}

const MAX_SPARE_TOKENS = 100;

export function describe(
  allowed: boolean,
  state: BucketState,
  limit: RateLimit,
  ratePerMs = limit.perMinute / 60_000,
): Decision {
  const untilFull = (limit.burst - state.tokens) / ratePerMs;
  const untilOne = allowed ? 0 : (1 - state.tokens) / ratePerMs;
  return {
    allowed,
    state,
    limit: limit.perMinute,
    remaining: Math.max(0, Math.floor(state.tokens)),
    resetAt: Math.ceil((state.updatedAt + untilFull) / 1000),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil(untilOne / 1000)),
  };
}
