import { DATABASE_RETRY_CAP_MS } from '../../db/errors.js';

/** What a delivery's row becomes once an attempt is recorded. */
export interface NextStep {
  status: 'pending' | 'succeeded' | 'failed';
  /** Attempts made, this one included. */
  attempts: number;
  /** When the next attempt is due; null once the series has ended. */
  nextAttemptAt: number | null;
}

/**
 * The retry policy of a delivery, as a pure function of the attempt and its outcome. `scheduleSeconds` is
 * `dispatcher.retryScheduleSeconds`: the delay before each attempt, its length the number of attempts (the
 * first is 0, checked by the config). A 2xx ends the series; any other outcome (an error answer, no answer,
 * our own failure to send) is retried after the next delay, counted from the end of this attempt, until the
 * schedule runs out and the delivery is `failed`.
 *
 * `attemptsBefore` is the count the row had when claimed: attempts are counted when their result is
 * recorded, so a crash (whose attempts in flight are made again) never uses up one of them, and a wait
 * behind an endpoint's back-off (endpoint-health.ts) is not charged either.
 */
export function afterAttempt(
  attemptsBefore: number,
  ok: boolean,
  finishedAt: number,
  scheduleSeconds: readonly number[],
): NextStep {
  const attempts = attemptsBefore + 1;
  const status = ok ? 'succeeded' : attempts >= scheduleSeconds.length ? 'failed' : 'pending';
  const nextAttemptAt =
    status === 'pending' ? finishedAt + Math.round((scheduleSeconds[attempts] ?? 0) * 1000) : null;
  return { status, attempts, nextAttemptAt };
}

/**
 * How long the dispatcher waits after `failures` failures in a row of its own work (the database, usually)
 * before trying again: doubling from `baseMs`, up to DATABASE_RETRY_CAP_MS. It backs off rather than spin.
 */
export function ownRetryDelayMs(failures: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** failures, DATABASE_RETRY_CAP_MS);
}
