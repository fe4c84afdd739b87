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

/**
 * Retention: the ids of up to `limit` events created before `cutoff`, oldest first, leaving out those
 * `kept` finds rows for (housekeeping passes the event's pending deliveries). Walks `events_created_at_idx`.
 */
export async function prunableEventIds(
  trx: Knex,
  cutoff: number,
  limit: number,
  kept: (eventIdColumn: string) => Knex.QueryBuilder,
): Promise<string[]> {
  const rows: { id: string }[] = await trx('events')
    .select('id')
    .where('created_at', '<', cutoff)
    .whereNotExists(kept('events.id'))
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .limit(limit);
  return rows.map((row) => row.id);
}

/** Retention: removes these events, unless `kept` finds rows for one (a delivery appeared since). */
export async function deleteEvents(
  trx: Knex,
  ids: string[],
  kept: (eventIdColumn: string) => Knex.QueryBuilder,
): Promise<number> {
  if (ids.length === 0) return 0;
  const removed = await deleteReturning<{ org_id: string; mode: string; type: string }>(
    trx,
    trx('events').whereIn('id', ids).whereNotExists(kept('events.id')),
    ['org_id', 'mode', 'type'],
  );
  await addToTallies(
    trx,
    'event_tallies',
    removed.map((row) => ({ key: tallyKey({ orgId: row.org_id, mode: row.mode, type: row.type }), n: -1 })),
  );
  return removed.length;
}

/** Housekeeping: folds the changes recorded in `event_tallies` into one row per key (src/db/tallies.ts). */
export function compactEventTallies(trx: Knex, limit: number) {
  return compactTallies(trx, 'event_tallies', ['org_id', 'mode', 'type'], limit);
}
