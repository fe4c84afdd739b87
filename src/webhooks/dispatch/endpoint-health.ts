import type { Config } from '../../config/defaults.js';

/**
 * An endpoint's health, as the dispatcher keeps it: how many of its latest attempts in a row got no HTTP
 * answer at all (timed out, refused, cut, address refused), and until when it is backed off.
 *
 * Only unanswered attempts count. One that times out holds a dispatcher slot for the whole deadline (10 s
 * by default), so an endpoint that keeps timing out is what starves everyone else; one that answers 500 in
 * a few milliseconds costs no more than a success, and the retry schedule already spaces its retries. A 2xx
 * answer sets the count back to 0 and ends any back-off; another answer (3xx, 4xx, 5xx) leaves it as it is.
 */
export type BackoffSettings = Pick<
  Config['dispatcher'],
  'backoffAfterUnanswered' | 'backoffInitialSeconds' | 'backoffMaxSeconds'
>;

/**
 * How long an endpoint with `unanswered` attempts in a row without an answer is backed off, in ms; 0 below
 * the threshold. It doubles with every further unanswered attempt, up to the cap: with the defaults (5,
 * 30 s, 1 h) 30 s, 1 min, 2 min, 4 min … 32 min, then 1 h between attempts, so a receiver that is down for a
 * day costs about 30 attempts rather than one per delivery per retry.
 */
export function backoffDelayMs(unanswered: number, settings: BackoffSettings): number {
  if (unanswered < settings.backoffAfterUnanswered) return 0;
  // 2 ** 40 s is far past any cap; bounding the exponent keeps the product finite.
  const doublings = Math.min(unanswered - settings.backoffAfterUnanswered, 40);
  const seconds = Math.min(settings.backoffInitialSeconds * 2 ** doublings, settings.backoffMaxSeconds);
  return Math.round(seconds * 1000);
}

/** What one finished attempt says about its endpoint. */
export interface AttemptHealth {
  endpointId: string;
  /** A 2xx answer. */
  ok: boolean;
  /** No HTTP answer came (and the attempt was really made: not our own failure to sign or send it). */
  unanswered: boolean;
}

/**
 * What a batch of attempts does to each endpoint's count: `reset` when one of them succeeded (the count
 * starts again from it), `added` the unanswered attempts after the last success (or all of them). Endpoints
 * whose attempts only got error answers are left out: nothing changes for them.
 */
export interface HealthChange {
  endpointId: string;
  reset: boolean;
  added: number;
}

/** `attempts` in the order they finished. */
export function healthChanges(attempts: readonly AttemptHealth[]): HealthChange[] {
  const changes = new Map<string, HealthChange>();
  for (const attempt of attempts) {
    if (!attempt.ok && !attempt.unanswered) continue;
    const change = changes.get(attempt.endpointId) ?? {
      endpointId: attempt.endpointId,
      reset: false,
      added: 0,
    };
    if (attempt.ok) {
      change.reset = true;
      change.added = 0;
    } else {
      change.added += 1;
    }
    changes.set(attempt.endpointId, change);
  }
  return [...changes.values()];
}

/**
 * What a batch of attempts says of each endpoint's failing streak (any attempt but a 2xx fails, answered or
 * not): `succeeded` when one of them got a 2xx, and `failingFrom`, when the first failure after the last
 * success (or the batch's first failure) started; null when the batch ended on a success. `attempts` in the
 * order they finished, each with when it started.
 */
export interface FailingChange {
  endpointId: string;
  succeeded: boolean;
  failingFrom: number | null;
}

export function failingChanges(attempts: readonly (AttemptHealth & { at: number })[]): FailingChange[] {
  const changes = new Map<string, FailingChange>();
  for (const attempt of attempts) {
    const change = changes.get(attempt.endpointId) ?? {
      endpointId: attempt.endpointId,
      succeeded: false,
      failingFrom: null,
    };
    if (attempt.ok) {
      change.succeeded = true;
      change.failingFrom = null;
    } else {
      change.failingFrom ??= attempt.at;
    }
    changes.set(attempt.endpointId, change);
  }
  return [...changes.values()];
}

/**
 * Whether an endpoint failing since `failingSince` has failed long enough to be disabled at `now`, after a
 * batch in which it failed again; never with `days` 0.
 */
export function failedTooLong(failingSince: number | null, now: number, days: number): boolean {
  return days > 0 && failingSince !== null && now - failingSince >= days * 86_400_000;
}

/**
 * When an endpoint whose count is now `unanswered` is backed off until, after a batch that added unanswered
 * attempts and was recorded at `now`; null when it is under the threshold. Never earlier than a back-off
 * already running: attempts made before it began (in flight when it started) only lengthen it.
 */
export function backoffUntil(
  unanswered: number,
  current: number | null,
  now: number,
  settings: BackoffSettings,
): number | null {
  const delay = backoffDelayMs(unanswered, settings);
  if (delay === 0) return null;
  return Math.max(now + delay, current ?? 0);
}

/**
 * What one dispatcher process knows of endpoints' health: unanswered attempts in a row, as the last claim
 * read them plus its own attempts since (only endpoints with some); and the endpoints it has seen reach the
 * back-off threshold, whose queued rows it gives back rather than starts. A claim of an endpoint's row says
 * it is claimable again (claims skip backed-off endpoints). At most `bound` endpoints are remembered.
 *
 * So an endpoint whose latest attempt got no answer gets one attempt at a time, and after
 * `backoffAfterUnanswered` such attempts in a row it is backed off: the cycle that records the last of them
 * sets its `backoff_until` and moves its pending rows there, uncharged, so claims neither take nor walk them
 * (record.ts); rows of it in hand go back. At the end one attempt tries it again: unanswered, the back-off
 * doubles; answered with a 2xx, it is over and its rows flow at the full per-endpoint limit.
 */
export class KnownHealth {
  private readonly unanswered = new Map<string, number>();
  private readonly backedOff = new Set<string>();

  constructor(
    private readonly settings: Pick<
      Config['dispatcher'],
      'perEndpointConcurrency' | 'backoffAfterUnanswered'
    >,
    private readonly bound: number,
  ) {}

  /**
   * Attempts one endpoint may have in flight: none while backed off, one while its latest attempt went
   * unanswered (a receiver that stopped answering holds one slot, not four, until it answers or is backed
   * off), otherwise `perEndpointConcurrency`.
   */
  limit(endpointId: string): number {
    if (this.backedOff.has(endpointId)) return 0;
    return this.unanswered.has(endpointId) ? 1 : this.settings.perEndpointConcurrency;
  }

  anyBackedOff(): boolean {
    return this.backedOff.size > 0;
  }

  isBackedOff(endpointId: string): boolean {
    return this.backedOff.has(endpointId);
  }

  /**
   * The claim read each endpoint's health, and claims skip backed-off endpoints: this is newer than ours.
   * (Entries of endpoints since deleted would stay: past the bound, knowledge starts again.)
   */
  claimed(rows: readonly { endpoint_id: string; endpoint_unanswered: number | null }[]): void {
    if (this.unanswered.size + this.backedOff.size > this.bound) {
      this.unanswered.clear();
      this.backedOff.clear();
    }
    for (const row of rows) {
      this.backedOff.delete(row.endpoint_id);
      const unanswered = Number(row.endpoint_unanswered ?? 0);
      if (unanswered > 0) this.unanswered.set(row.endpoint_id, unanswered);
      else this.unanswered.delete(row.endpoint_id);
    }
  }

  /**
   * Our own attempts update what we know of their endpoint at once, before they are recorded: the next
   * queued row of an endpoint that has just gone unanswered waits for the one in flight, and one that has
   * reached the back-off threshold gets no more attempts from us (its queued rows go back at the next cycle).
   */
  attempted({ endpointId, ok, unanswered }: AttemptHealth): void {
    if (ok) {
      this.unanswered.delete(endpointId);
      this.backedOff.delete(endpointId);
    } else if (unanswered) {
      const count = (this.unanswered.get(endpointId) ?? 0) + 1;
      this.unanswered.set(endpointId, count);
      if (count >= this.settings.backoffAfterUnanswered) this.backedOff.add(endpointId);
    }
  }

  /** The record of a batch found the endpoint backed off (by us, or by another dispatcher). */
  backOff(endpointId: string): void {
    this.backedOff.add(endpointId);
  }
}
