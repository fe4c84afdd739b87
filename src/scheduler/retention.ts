import type { Knex } from 'knex';
import type { Config, RetentionConfig } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { pruneExpiredIdempotencyKeys } from '../api/idempotency.js';
import { pruneAuditLog } from '../audit/audit-log.js';
import { pruneSyncOutcomes } from '../banks/health.js';
import {
  deleteEvents,
  heldCandidatesDue,
  holdEvents,
  prunableCandidates,
  releaseEvents,
  type RetentionCandidate,
} from '../events/store.js';
import { pruneExpiredExchangeTokens } from '../exchange/exchange.js';
import { jobsOfIntent, pruneFinishedJobs } from '../jobs/jobs.js';
import { pruneRevokedGrants } from '../links/consent/revocations.js';
import { pruneFinishedIntents } from '../refresh/store.js';
import {
  deleteDeliveriesOfEvents,
  eventsWithPendingDeliveries,
  pendingDeliveriesOf,
} from '../webhooks/deliveries.js';
import { pruneEndedSessions, pruneExpiredWidgetTokens } from '../widget/sessions.js';
import { saveWalkPosition, walkPosition } from './retention-walks.js';

/**
 * Retention: what housekeeping removes by age, kind by kind. Each owner's store deletes its own rows (one
 * statement per batch, `DELETE ... WHERE id IN (SELECT id ... ORDER BY age LIMIT n)`, the same SQL on both
 * engines, walking an index on the age column); this file only decides the cut-offs and the pace.
 *
 * The pace is what keeps it out of the way: every batch is its own short write transaction (on SQLite the
 * one writer lock is held for one batch of 500 rows, a few milliseconds, and a request or a claim waiting
 * for it is served between batches; on PostgreSQL the row locks of a batch are released at its commit), a
 * pause follows each full batch, and one pass stops after `maxRowsPerPass` rows of a kind or PASS_BUDGET_MS
 * overall, leaving the rest to the next tick. A backlog (a first pass over a year of history) drains over
 * several ticks instead of in one long pass.
 *
 * Movements are customer data: they are never pruned by age.
 */
export const RETENTION_KINDS = [
  'idempotency_keys',
  'events',
  'webhook_deliveries',
  'webhook_attempts',
  'jobs',
  'bank_sync_outcomes',
  'refresh_intents',
  'widget_sessions',
  'widget_tokens',
  'exchange_tokens',
  'audit_log',
  'grant_revocations',
] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];
export type RetentionCounts = Record<RetentionKind, number>;

const DAY_MS = 86_400_000;
/** Pause after a full batch: lets waiting writers (requests, claims, the dispatcher's records) in. */
export const BATCH_PAUSE_MS = 25;
/** One pass's time budget across kinds; the next tick goes on where this one stopped. */
export const PASS_BUDGET_MS = 20_000;

type RetentionSettings = {
  retention: Readonly<RetentionConfig>;
  idempotency: Pick<Config['idempotency'], 'ttlHours'>;
};

interface Pruner {
  kind: RetentionKind;
  /**
   * One batch, in its own transaction: looks at up to `limit` rows and removes them, counted per kind.
   * `seen` paces the batches: one that saw fewer than `limit` rows was the last of the pass.
   */
  batch(trx: Knex, limit: number): Promise<{ removed: Partial<RetentionCounts>; seen: number }>;
  /** Rows removed with each item (default 1): a batch takes `batchSize / rowsPerItem` items. */
  rowsPerItem?: number;
}

/** The pruners that the settings turn on; a kind set to 0 days is kept forever and has none. */
function pruners(config: RetentionSettings, now: number): Pruner[] {
  const settings = config.retention;
  const cutoff = (days: number) => now - days * DAY_MS;
  // Idempotency keys answer a retry for `idempotency.ttlHours` (the spec's window), then always go.
  const keysCutoff = now - config.idempotency.ttlHours * 3_600_000;
  const list: (Pruner | false)[] = [
    single('idempotency_keys', (trx, limit) => pruneExpiredIdempotencyKeys(trx, keysCutoff, limit)),
    settings.eventsDays > 0 && eventsPruner(cutoff(settings.eventsDays), now),
    settings.jobsDays > 0 &&
      single('jobs', (trx, limit) => pruneFinishedJobs(trx, cutoff(settings.jobsDays), limit)),
    settings.bankOutcomesDays > 0 &&
      single('bank_sync_outcomes', (trx, limit) =>
        pruneSyncOutcomes(trx, now, settings.bankOutcomesDays * DAY_MS, limit),
      ),
    settings.refreshIntentsDays > 0 &&
      single('refresh_intents', (trx, limit) =>
        pruneFinishedIntents(trx, cutoff(settings.refreshIntentsDays), limit, (column) =>
          jobsOfIntent(trx, column),
        ),
      ),
    // Ended widget sessions have always gone a day after they end (widget/sessions.ts); not a setting.
    single('widget_sessions', (trx, limit) => pruneEndedSessions(trx, now, limit)),
    settings.widgetTokensDays > 0 &&
      single('widget_tokens', (trx, limit) =>
        pruneExpiredWidgetTokens(trx, cutoff(settings.widgetTokensDays), limit),
      ),
    settings.widgetTokensDays > 0 &&
      single('exchange_tokens', (trx, limit) =>
        pruneExpiredExchangeTokens(trx, cutoff(settings.widgetTokensDays), limit),
      ),
    settings.auditLogDays > 0 &&
      single('audit_log', (trx, limit) => pruneAuditLog(trx, cutoff(settings.auditLogDays), limit)),
    settings.grantRevocationsDays > 0 &&
      single('grant_revocations', (trx, limit) =>
        pruneRevokedGrants(trx, cutoff(settings.grantRevocationsDays), limit),
      ),
  ];
  return list.filter((pruner): pruner is Pruner => pruner !== false);
}

/** How long a held event is passed by before it is looked at again: as long as it has been held, within these. */
export const HOLD_MIN_MS = 3_600_000;
export const HOLD_MAX_MS = DAY_MS;

/**
 * When events past the cut-off and held by a pending delivery are looked at again: after as long as the
 * youngest of them has been past it (so the looks at an event that stays held double apart), at least an
 * hour and at most a day. A day at most is how late an event goes after its last delivery ends; a million
 * held events cost about 700 rows of each minute's pass.
 */
export function holdUntil(cutoff: number, held: readonly RetentionCandidate[], now: number): number {
  const youngest = Math.max(...held.map((event) => event.created_at));
  return now + Math.min(Math.max(cutoff - youngest, HOLD_MIN_MS), HOLD_MAX_MS);
}

/**
 * Events: those past the cut-off that are not held, oldest first; when there are fewer than a batch, the
 * held ones whose time to be looked at again has come. Every event a batch reads leaves the walk: it goes,
 * or a pending delivery holds it and it is passed by until `holdUntil`, or (held, and within retention
 * again after the setting grew) it goes back to the walk. So what a pass reads is what it prunes, plus each
 * held event once per look; `seen` counts all of it against the pass's `maxRowsPerPass`. Each walk goes on
 * where the last batch stopped (retention-walks.ts), not from the start of its index.
 *
 * An event goes with its deliveries (their attempts are in their rows), and was measured when the attempts
 * were rows of their own, about three rows an event: 500 events (1,500 rows) held SQLite's writer ~25 ms,
 * and a dispatcher's claim waited behind it (claim p99 35 ms against 8 quiet, bench/growth.ts). A third as
 * many events kept a batch near `batchSize` rows; with two rows an event now, batches are a third smaller
 * than that, which only shortens the lock.
 */
function eventsPruner(cutoff: number, now: number): Pruner {
  return {
    kind: 'events',
    rowsPerItem: 3,
    async batch(trx, limit) {
      // Each walk records where it stopped; one that read all it could now records the end of its range
      // (the cut-off, or now), which rows added later are past, so the next batch does not walk it again.
      const walk = await walkPosition(trx, 'events', now, cutoff);
      const candidates = await prunableCandidates(trx, cutoff, walk.after, limit);
      const end = candidates.length < limit ? { key: cutoff, id: '' } : candidates.at(-1)!;
      await saveWalkPosition(trx, 'events', end, walk.startedAt);
      if (candidates.length < limit) {
        const recheck = await walkPosition(trx, 'events_held', now);
        const due = await heldCandidatesDue(trx, now, recheck.after, limit - candidates.length);
        const dueEnd = due.length < limit - candidates.length ? { key: now, id: '' } : due.at(-1)!;
        await saveWalkPosition(trx, 'events_held', dueEnd, recheck.startedAt);
        candidates.push(...due);
      }
      const pending = await eventsWithPendingDeliveries(
        trx,
        candidates.map((event) => event.id),
      );
      const past = candidates.filter((event) => event.created_at < cutoff);
      const ids = past.filter((event) => !pending.has(event.id)).map((event) => event.id);
      const { deliveries, attempts } = await deleteDeliveriesOfEvents(trx, ids);
      // A delivery made since the look above (a redelivery) keeps its event: held like the others.
      const removed = new Set(await deleteEvents(trx, ids, (column) => pendingDeliveriesOf(trx, column)));
      const held = past.filter((event) => !removed.has(event.id));
      if (held.length > 0) {
        await holdEvents(
          trx,
          held.map((event) => event.id),
          holdUntil(cutoff, held, now),
        );
      }
      await releaseEvents(
        trx,
        candidates.filter((event) => event.created_at >= cutoff).map((event) => event.id),
      );
      return {
        removed: { events: removed.size, webhook_deliveries: deliveries, webhook_attempts: attempts },
        seen: candidates.length,
      };
    },
  };
}

/** A kind whose batch removes rows of its own table only: what it removed is what it saw. */
function single(kind: RetentionKind, prune: (trx: Knex, limit: number) => Promise<number>): Pruner {
  return {
    kind,
    async batch(trx, limit) {
      const removed = await prune(trx, limit);
      return { removed: { [kind]: removed }, seen: removed };
    },
  };
}

export function zeroCounts(): RetentionCounts {
  return Object.fromEntries(RETENTION_KINDS.map((kind) => [kind, 0])) as RetentionCounts;
}

/**
 * One retention pass at `now`: each kind in batches until it has nothing past its retention, or its
 * `maxRowsPerPass`, or the pass's time budget is spent. Returns the rows removed per kind.
 */
export async function pruneByAge(
  services: { db: Database; config: RetentionSettings },
  now: number,
  options: { pauseMs?: number; budgetMs?: number } = {},
): Promise<RetentionCounts> {
  const settings = services.config.retention;
  const pauseMs = options.pauseMs ?? BATCH_PAUSE_MS;
  // Wall time, not the service clock: the budget is about how long this process holds the writer.
  const deadline = Date.now() + (options.budgetMs ?? PASS_BUDGET_MS);
  const counts = zeroCounts();
  for (const pruner of pruners(services.config, now)) {
    let seen = 0;
    while (seen < settings.maxRowsPerPass && Date.now() < deadline) {
      const rows = Math.min(settings.batchSize, settings.maxRowsPerPass - seen);
      const limit = Math.max(1, Math.ceil(rows / (pruner.rowsPerItem ?? 1)));
      const batch = await services.db.transaction((trx) => pruner.batch(trx, limit));
      for (const kind of RETENTION_KINDS) counts[kind] += batch.removed[kind] ?? 0;
      seen += batch.seen;
      if (batch.seen < limit) break;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
  return counts;
}
