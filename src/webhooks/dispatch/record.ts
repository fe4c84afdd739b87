import type { Knex } from 'knex';
import type { Clock } from '../../clock/clock.js';
import type { Config } from '../../config/defaults.js';
import type { Engine } from '../../db/database.js';
import type { Logger } from '../../logging/logger.js';
import {
  countDeliveries,
  holdDeliveriesUntil,
  type DeliveryCountChange,
  type StoredAttempt,
} from '../deliveries.js';
import { backoffUntil, failedTooLong, failingChanges, healthChanges } from './endpoint-health.js';
import { disableFailingEndpoint } from '../endpoints.js';
import {
  backOffEndpoint,
  countUnanswered,
  recordResults,
  type ClaimedRow,
  type DeliveryResult,
} from './queue.js';
import { afterAttempt, ownRetryDelayMs } from './retry-policy.js';
import type { SendOutcome } from './sender.js';

/** An attempt made, waiting for its result to be recorded. */
export interface FinishedAttempt {
  row: ClaimedRow;
  /** The lease it was made under. */
  token: string;
  outcome: SendOutcome;
  /** Made, and no HTTP answer came: counts towards the endpoint's back-off. */
  unanswered: boolean;
  startedAt: number;
  finishedAt: number;
  durationMs: number;
}

export interface RecordContext {
  engine: Engine;
  clock: Clock;
  logger: Logger;
  settings: Pick<
    Config['dispatcher'],
    'retryScheduleSeconds' | 'backoffAfterUnanswered' | 'backoffInitialSeconds' | 'backoffMaxSeconds'
  >;
  /** `webhooks.disableAfterFailingDays`: an endpoint failing every attempt for this long is disabled (0: never). */
  disableAfterFailingDays: number;
  /** Told of each endpoint the batch leaves backed off or disabled: its rows in hand go back. */
  backedOff(endpointId: string): void;
}

/**
 * Records a batch of finished attempts inside a cycle's transaction: their results and the attempts
 * themselves on their delivery rows, as the retry policy says (retry-policy.ts), where the lease is still
 * ours; then, for the rows written, their count by status and their endpoints' health. Three statements for
 * the whole batch (queue.ts, tallies), plus one or two per endpoint it backs off.
 */
export async function recordAttempts(
  trx: Knex,
  batch: readonly FinishedAttempt[],
  context: RecordContext,
): Promise<void> {
  const { engine, logger, settings } = context;
  const results = batch.map(({ row, token, outcome, startedAt, finishedAt, durationMs }): DeliveryResult => {
    const next = afterAttempt(row.attempts, outcome.ok, finishedAt, settings.retryScheduleSeconds);
    const attempt: StoredAttempt = {
      number: next.attempts,
      started_at: startedAt,
      duration_ms: durationMs,
      status_code: outcome.statusCode,
      error: outcome.error,
      response_excerpt: outcome.excerpt,
    };
    return {
      id: row.id,
      token,
      status: next.status,
      attempts: next.attempts,
      nextAttemptAt: next.nextAttemptAt,
      lastAttemptAt: startedAt,
      lastResponseStatus: outcome.statusCode,
      lastError: outcome.error,
      updatedAt: finishedAt,
      attempt: JSON.stringify(attempt),
    };
  });
  const updated = await recordResults(trx, engine, results);
  const kept = batch.filter(({ row }) => {
    if (updated.has(row.id)) return true;
    // Our lease lapsed (we were presumed dead) and another dispatcher owns the row now: its result counts.
    logger.warn({ delivery: row.id }, 'lease lost before the attempt was recorded');
    return false;
  });
  if (kept.length === 0) return;
  // A claimed row was pending; those that finished move from that count to their status's.
  const changes: DeliveryCountChange[] = [];
  for (let i = 0; i < batch.length; i++) {
    const { id, status } = results[i]!;
    if (status === 'pending' || !updated.has(id)) continue;
    const endpointId = batch[i]!.row.endpoint_id;
    changes.push({ endpointId, status: 'pending', n: -1 }, { endpointId, status, n: 1 });
  }
  await countDeliveries(trx, changes);
  await recordHealth(trx, kept, context);
}

/**
 * Counts the batch's unanswered attempts on their endpoints and their failing streaks (one statement for
 * all), disables those that have failed every attempt for `disableAfterFailingDays`, and backs off those
 * that reach the threshold (per endpoint: rarer).
 *
 * A success that arrives while another dispatcher's back-off of the same endpoint is running resets the
 * count but leaves the rows that back-off moved at its end (at most `backoffMaxSeconds`): learning the old
 * end would cost a read per cycle. A tenant's update or a redelivery pulls them back (`endBackoff`).
 */
async function recordHealth(
  trx: Knex,
  batch: readonly FinishedAttempt[],
  context: RecordContext,
): Promise<void> {
  const attempts = batch.map(({ row, outcome, unanswered, startedAt }) => ({
    endpointId: row.endpoint_id,
    ok: outcome.ok,
    unanswered,
    at: startedAt,
  }));
  const changes = healthChanges(attempts);
  const failing = failingChanges(attempts);
  if (changes.length === 0 && failing.length === 0) return;
  const now = context.clock.now();
  const days = context.disableAfterFailingDays;
  const counted = await countUnanswered(
    trx,
    context.engine,
    changes,
    failing,
    days > 0 ? now - days * 86_400_000 : null,
  );
  // Failed every attempt for too long, this batch's last included: disabled, its pending deliveries failed.
  const failedAgain = new Set(
    failing.filter((change) => change.failingFrom !== null).map((c) => c.endpointId),
  );
  for (const row of counted) {
    const since = row.failing_since === null ? null : Number(row.failing_since);
    if (!failedAgain.has(row.id) || !failedTooLong(since, now, days)) continue;
    if (await disableFailingEndpoint(trx, row.id, now)) {
      context.backedOff(row.id);
      context.logger.warn(
        { endpoint: row.id, failing_since: new Date(since!).toISOString() },
        'webhook endpoint disabled: every attempt failed for too long',
      );
    }
  }
  const added = new Map(changes.map((change) => [change.endpointId, change.added]));
  for (const row of counted) {
    if ((added.get(row.id) ?? 0) === 0) continue;
    const unanswered = Number(row.unanswered_attempts);
    const current = row.backoff_until === null ? null : Number(row.backoff_until);
    const until = backoffUntil(unanswered, current, now, context.settings);
    if (until === null) continue;
    context.backedOff(row.id);
    if (until === current) {
      // Backed off already, by an earlier cycle or another dispatcher: the rows this batch just recorded got
      // their retry time, so they join the back-off's end as its other rows did (else a tenant's update,
      // which pulls back only the rows at that end, would leave them waiting).
      await holdDeliveriesUntil(trx, row.id, until, now);
      continue;
    }
    await backOffEndpoint(trx, row.id, until, now);
    context.logger.warn(
      { endpoint: row.id, unanswered_attempts: unanswered, backoff_until: new Date(until).toISOString() },
      'webhook endpoint backed off: its attempts go unanswered',
    );
  }
}

/** Results written per transaction at most: enough for a cycle at full speed. */
const FLUSH_BATCH = 500;

/** How long a finished attempt may wait for others to be recorded with it when no claim is due to carry it. */
const FLUSH_WINDOW_MS = 10;

/**
 * Finished attempts waiting for a cycle to record them, and when it should. Results not carried by a claim
 * are recorded together, at most FLUSH_WINDOW_MS late: fewer, larger transactions on a writer connection that
 * the claims need too (on SQLite there is one per process). A crash loses at most the results of that
 * window, whose attempts are then made again. `kick` starts a cycle.
 */
export class PendingResults {
  private items: FinishedAttempt[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** Cycles in a row that could not record their results. */
  failures = 0;

  constructor(
    private readonly logger: Logger,
    private readonly kick: () => void,
  ) {}

  get count(): number {
    return this.items.length;
  }

  push(item: FinishedAttempt): void {
    this.items.push(item);
  }

  /** The oldest, up to FLUSH_BATCH, for a cycle; `putBack` if it fails. */
  take(): FinishedAttempt[] {
    return this.items.splice(0, FLUSH_BATCH);
  }

  putBack(batch: readonly FinishedAttempt[]): void {
    this.items.unshift(...batch);
  }

  /** All of them, given up (on shutdown): their leases lapse and whoever claims the rows makes them again. */
  giveUp(): FinishedAttempt[] {
    return this.items.splice(0);
  }

  /** A cycle soon: at once for a full batch, otherwise within the window. */
  soon(): void {
    if (this.items.length >= FLUSH_BATCH) this.kick();
    else this.timer ??= setTimeout(this.kick, FLUSH_WINDOW_MS);
  }

  /** A cycle is starting (or the dispatcher stopping): no timer is needed. */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Counts and logs a cycle that could not record them; returns how long to wait before trying again. */
  failed(error: unknown): number {
    const retryMs = ownRetryDelayMs((this.failures += 1), 100);
    const results = this.items.length;
    this.logger.error({ err: error, results, retry_ms: retryMs }, 'could not record webhook attempts');
    return retryMs;
  }

  retryIn(ms: number): void {
    this.timer ??= setTimeout(this.kick, ms);
  }
}
