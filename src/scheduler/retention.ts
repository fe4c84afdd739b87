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
  type WalkAfter,
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
import { pruneEndedSessions } from '../widget/sessions.js';
import { pruneExpiredWidgetTokens } from '../widget/widget-tokens.js';
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
   * `seen` counts against `maxRowsPerPass`; the pass stops after a batch that says it is `done`, or,
   * saying nothing, saw fewer than `limit` rows.
   */
  batch(
    trx: Knex,
    limit: number,
  ): Promise<{ removed: Partial<RetentionCounts>; seen: number; done?: boolean }>;
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
 * Held events one batch reads past, besides the `limit` it prunes, and one batch sets aside afterwards (one
 * UPDATE of their `held_until`). They do not count against `maxRowsPerPass`; the time budget bounds them.
 * 100,000 held events in front of 10,000 due ones used to take five one-minute passes to walk past,
 * pruning nothing meanwhile; reading them costs ~75 µs each on a loaded PostgreSQL, setting them aside
 * ~100 µs (a row rewritten with four index entries), so a pass reads past them first and prunes what is
 * behind, then sets them aside.
 */
export const HELD_PER_BATCH = 2_000;
/** Held events a pass remembers to set aside after its walk (about 100 bytes each): 25 MB at most. */
export const HELD_REMEMBERED = 250_000;

/**
 * Events: those past the cut-off that are not held, oldest first; once that walk is done, the held ones it
 * passed are set aside, then the held ones whose time to be looked at again has come are walked. Every
 * event a batch reads leaves its walk: it goes, or a pending delivery holds it and it is passed by (set
 * aside until `holdUntil` at the end of the walk), or (held, and within retention again after the setting
 * grew) it goes back to the walk. A batch reads its walk `limit` events at a time, each read as many as it
 * still needs, until it has `limit` to prune (or release) or has passed HELD_PER_BATCH held ones: so it
 * reads nothing it does not act on, and a run of held events of any length costs a few batches of one
 * pass, not the pass's `maxRowsPerPass` (which counts what is pruned). Held events a pass read but had no
 * time to set aside are behind the walk's place; its daily restart (retention-walks.ts) reads them again.
 * Each walk goes on where the last batch stopped, not from the start of its index.
 *
 * An event goes with its deliveries (their attempts are in their rows), and was measured when the attempts
 * were rows of their own, about three rows an event: 500 events (1,500 rows) held SQLite's writer ~25 ms,
 * and a dispatcher's claim waited behind it (claim p99 35 ms against 8 quiet, bench/growth.ts). A third as
 * many events kept a batch near `batchSize` rows; with two rows an event now, batches are a third smaller
 * than that, which only shortens the lock.
 */
function eventsPruner(cutoff: number, now: number): Pruner {
  let walk: 'events' | 'hold' | 'events_held' = 'events';
  const passed: RetentionCandidate[] = [];
  let ahead: RetentionCandidate[] = [];
  const setAside = async (trx: Knex, held: RetentionCandidate[]) => {
    if (held.length === 0) return;
    await holdEvents(
      trx,
      held.map((event) => event.id),
      holdUntil(cutoff, held, now),
    );
  };
  return {
    kind: 'events',
    rowsPerItem: 3,
    async batch(trx, limit) {
      if (walk === 'hold') {
        await setAside(trx, passed.splice(0, HELD_PER_BATCH));
        if (passed.length === 0) walk = 'events_held';
        return { removed: {}, seen: 0, done: false };
      }
      const name = walk;
      // Each walk records where it stopped; one that read all it could now records the end of its range
      // (the cut-off, or now), which rows added later are past, so the next batch does not walk it again.
      const position =
        name === 'events' ? await walkPosition(trx, name, now, cutoff) : await walkPosition(trx, name, now);
      const read = (after: WalkAfter | null, n: number) =>
        name === 'events' ? prunableCandidates(trx, cutoff, after, n) : heldCandidatesDue(trx, now, after, n);
      const candidates: RetentionCandidate[] = [];
      const held = new Set<string>();
      let acted = 0;
      let exhausted = false;
      // Within a run of held events each read asks for more (up to 3 x `limit` beyond what the batch still
      // needs): fewer round trips. What a read returned past where the batch stops is the next batch's
      // first (`ahead`), looked at again in its transaction but not read again.
      let extra = 0;
      while (acted < limit && held.size < HELD_PER_BATCH) {
        const carried = ahead.length > 0;
        const asked = carried ? 0 : limit - acted + extra;
        const next = carried ? ahead.splice(0) : await read(candidates.at(-1) ?? position.after, asked);
        const pending = await eventsWithPendingDeliveries(
          trx,
          next.map((event) => event.id),
        );
        let taken = 0;
        for (const event of next) {
          if (acted === limit) break;
          taken++;
          if (event.created_at < cutoff && pending.has(event.id)) held.add(event.id);
          else acted++;
        }
        candidates.push(...next.slice(0, taken));
        ahead = next.slice(taken);
        if (!carried && taken === next.length && next.length < asked) {
          exhausted = true;
          break;
        }
        const allHeld = next.every((event) => held.has(event.id));
        extra = allHeld ? Math.min(3 * limit, Math.max(limit, 2 * extra)) : 0;
      }
      const end = exhausted ? { key: name === 'events' ? cutoff : now, id: '' } : candidates.at(-1)!;
      await saveWalkPosition(trx, name, end, position.startedAt);

      const past = candidates.filter((event) => event.created_at < cutoff);
      const ids = past.filter((event) => !held.has(event.id)).map((event) => event.id);
      const { deliveries, attempts } = await deleteDeliveriesOfEvents(trx, ids);
      // A delivery made since the look above (a redelivery) keeps its event: held like the others.
      const removed = new Set(await deleteEvents(trx, ids, (column) => pendingDeliveriesOf(trx, column)));
      const kept = past.filter((event) => !removed.has(event.id));
      // The first walk's held events are set aside once it is done (what is behind them goes first); the
      // second walk's, which nothing is behind, at once.
      if (name === 'events' && passed.length + kept.length <= HELD_REMEMBERED) passed.push(...kept);
      else await setAside(trx, kept);
      await releaseEvents(
        trx,
        candidates.filter((event) => event.created_at >= cutoff).map((event) => event.id),
      );
      if (exhausted && name === 'events') walk = passed.length > 0 ? 'hold' : 'events_held';
      return {
        removed: { events: removed.size, webhook_deliveries: deliveries, webhook_attempts: attempts },
        seen: acted,
        done: exhausted && name === 'events_held',
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
      if (batch.done ?? batch.seen < limit) break;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
  return counts;
}
