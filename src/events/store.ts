import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { newId } from '../ids/ids.js';
import type { Principal } from '../auth/principal.js';
import { fetchPage, type Order } from '../db/paging.js';
import { addToTallies, compactTallies, deleteReturning, sumOfTallies } from '../db/tallies.js';
import type { EventData, EventType } from './catalogue.js';

export interface EventRecord {
  object: 'event';
  id: string;
  type: string;
  created_at: string;
  mode: 'live' | 'test';
  data: Record<string, unknown>;
}

// Microseconds of emission: the millisecond, then a counter, so the events of one transaction (which share
// a millisecond) keep the order they were emitted in. Across processes, ties fall back to the id.
let sequence = 0;
function nextSeq(now: number): number {
  sequence = (sequence + 1) % 1000;
  return now * 1000 + sequence;
}

/** An event of one type with the `data` its builder (payloads.ts) made: a type and a data that disagree do not compile. */
export type EventInput = {
  [T in EventType]: {
    orgId: string;
    mode: 'live' | 'test';
    type: T;
    linkId: string | null;
    data: EventData<T>;
    now: number;
  };
}[EventType];

/**
 * Stores the event in the caller's transaction and returns it as the API presents it. Only the fan-out to
 * webhook endpoints (src/webhooks/fan-out.ts) calls it, beside the delivery rows of the same transaction.
 */
export async function recordEvent(trx: Knex, input: EventInput): Promise<EventRecord> {
  const id = newId('evt');
  await trx('events').insert({
    id,
    org_id: input.orgId,
    mode: input.mode,
    type: input.type,
    link_id: input.linkId,
    data: JSON.stringify(input.data),
    created_at: input.now,
    seq: nextSeq(input.now),
  });
  await addToTallies(trx, 'event_tallies', [{ key: tallyKey(input), n: 1 }]);
  return {
    object: 'event',
    id,
    type: input.type,
    created_at: toIso(input.now)!,
    mode: input.mode,
    data: input.data,
  };
}

export interface EventRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  type: string;
  link_id: string | null;
  data: string;
  created_at: number;
}

/** A link's latest events, newest first in emission order. */
export async function recentEventsOfLink(db: Knex, linkId: string, limit: number): Promise<EventRow[]> {
  return db<EventRow>('events')
    .where({ link_id: linkId })
    .orderBy('seq', 'desc')
    .orderBy('id', 'desc')
    .limit(limit);
}

export interface EventFilter {
  type?: string;
  link_id?: string;
  /** ISO 8601: only events created after it. */
  created_after?: string;
}

/** The caller's events, newest first in emission order. */
export async function listEvents(
  db: Knex,
  principal: Principal,
  filter: EventFilter,
  offset: number,
  limit: number,
) {
  const scoped = () => {
    const query = db<EventRow>('events').where({ org_id: principal.orgId, mode: principal.mode });
    if (filter.type) query.where('type', filter.type);
    if (filter.link_id) query.where('link_id', filter.link_id);
    if (filter.created_after) query.where('created_at', '>', Date.parse(filter.created_after));
    return query;
  };
  const order: Order = [
    ['seq', 'desc'],
    ['id', 'desc'],
  ];
  // The tallies count by type; a filter on a link or a time is counted on its rows (a link's are few).
  const tallied = filter.link_id === undefined && filter.created_after === undefined;
  const { rows, total } = await fetchPage<EventRow>(
    scoped,
    order,
    offset,
    limit,
    tallied
      ? () =>
          sumOfTallies(
            db('event_tallies')
              .where({ org_id: principal.orgId, mode: principal.mode })
              .modify((query) => {
                if (filter.type !== undefined) query.where('type', filter.type);
              }),
          )
      : undefined,
  );
  return { data: rows.map(presentEvent), total };
}

/** The key an event is counted under in `event_tallies`, for the list's total. */
function tallyKey(event: { orgId: string; mode: string; type: string }) {
  return { org_id: event.orgId, mode: event.mode, type: event.type };
}

export function presentEvent(row: EventRow): EventRecord {
  return {
    object: 'event',
    id: row.id,
    type: row.type,
    created_at: toIso(row.created_at)!,
    mode: row.mode,
    data: JSON.parse(row.data) as Record<string, unknown>,
  };
}

/** An event retention looks at: its id and age, and its place in the walk that read it (`key`, `id`). */
export interface RetentionCandidate {
  id: string;
  created_at: number;
  key: number;
}

/** Where a walk goes on from: after this `(key, id)` in its index's order. */
export interface WalkAfter {
  key: number;
  id: string;
}

/**
 * Rows of an index on `(column, id)` after a place in it: a row-value comparison, which both engines read as
 * where the index's range starts (PostgreSQL, and SQLite since 3.15), so that the rows before it, dead
 * index entries on PostgreSQL included, are not read again. (`column >= key AND (column > key OR id > id)`
 * read every tie on `column` again, and the events of one instant can be many.)
 */
function after(query: Knex.QueryBuilder, column: string, from: WalkAfter | null): Knex.QueryBuilder {
  if (!from) return query;
  return query.whereRaw('(??, ??) > (?, ?)', [column, 'id', from.key, from.id]);
}

/**
 * Retention's walk: up to `limit` events created before `cutoff` that are not held, oldest first, after
 * `from` (where the last batch stopped). Reads `events_walk_idx`, a partial index of the events that are
 * not held, and filters nothing row by row: what it reads is what it returns. Which of them a pending
 * delivery holds is asked afterwards, of these ids only (webhooks/deliveries.ts); those are held
 * (`holdEvents`) and leave this index. (The walk used to skip them in SQL, a NOT EXISTS per row, from the
 * start of the index: every batch read every held event again, and enough of them made a pass spend its
 * time budget and prune nothing.)
 */
export async function prunableCandidates(
  trx: Knex,
  cutoff: number,
  from: WalkAfter | null,
  limit: number,
): Promise<RetentionCandidate[]> {
  const rows: { id: string; created_at: number | string }[] = await after(
    trx('events').select('id', 'created_at').whereNull('held_until').where('created_at', '<', cutoff),
    'created_at',
    from,
  )
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .limit(limit);
  return rows.map((row) => ({ id: row.id, created_at: Number(row.created_at), key: Number(row.created_at) }));
}

/**
 * Retention: up to `limit` held events whose time to be looked at again has come, after `from`
 * (`events_held_idx`).
 */
export async function heldCandidatesDue(
  trx: Knex,
  now: number,
  from: WalkAfter | null,
  limit: number,
): Promise<RetentionCandidate[]> {
  const rows: { id: string; created_at: number | string; held_until: number | string }[] = await after(
    trx('events')
      .select('id', 'created_at', 'held_until')
      .whereNotNull('held_until')
      .where('held_until', '<=', now),
    'held_until',
    from,
  )
    .orderBy([{ column: 'held_until' }, { column: 'id' }])
    .limit(limit);
  return rows.map((row) => ({ id: row.id, created_at: Number(row.created_at), key: Number(row.held_until) }));
}

/**
 * Retention: these events, past their retention, are held by a pending delivery; the walk passes them by
 * until `until`, when `heldCandidatesDue` returns them.
 */
export async function holdEvents(trx: Knex, ids: readonly string[], until: number): Promise<void> {
  if (ids.length === 0) return;
  await trx('events')
    .whereIn('id', [...ids])
    .update({ held_until: until });
}

/** Retention: held events that are within retention again (it was lengthened) go back to the walk. */
export async function releaseEvents(trx: Knex, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await trx('events')
    .whereIn('id', [...ids])
    .update({ held_until: null });
}

/**
 * Retention: removes these events, unless `kept` finds rows for one (a delivery appeared since); returns
 * the ids removed.
 */
export async function deleteEvents(
  trx: Knex,
  ids: string[],
  kept: (eventIdColumn: string) => Knex.QueryBuilder,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const removed = await deleteReturning<{ id: string; org_id: string; mode: string; type: string }>(
    trx,
    trx('events').whereIn('id', ids).whereNotExists(kept('events.id')),
    ['id', 'org_id', 'mode', 'type'],
  );
  await addToTallies(
    trx,
    'event_tallies',
    removed.map((row) => ({ key: tallyKey({ orgId: row.org_id, mode: row.mode, type: row.type }), n: -1 })),
  );
  return removed.map((row) => row.id);
}

/** Housekeeping: folds the changes recorded in `event_tallies` into one row per key (src/db/tallies.ts). */
export function compactEventTallies(trx: Knex, limit: number) {
  return compactTallies(trx, 'event_tallies', ['org_id', 'mode', 'type'], limit);
}
