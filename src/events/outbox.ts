import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { newId } from '../ids/ids.js';
import { notifyOnCommit } from '../db/notify.js';
import type { EventType } from '../webhooks/event-types.js';
import { subscribes } from '../webhooks/event-types.js';
import type { Principal } from '../auth/principal.js';
import { fetchPage, type Order } from '../db/paging.js';

/** The channel on which new deliveries are announced (see src/db/notify.ts). */
export const DELIVERY_CHANNEL = 'svc_webhook_deliveries';

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

export interface EmitInput {
  orgId: string;
  mode: 'live' | 'test';
  type: EventType;
  linkId: string | null;
  data: Record<string, unknown>;
  now: number;
}

/**
 * The transactional outbox: the event row and one delivery row per subscribed, enabled endpoint are
 * written in the caller's transaction, beside the state change that caused them. The dispatcher reads only
 * delivery rows, so an event is delivered if and only if its change committed.
 */
export async function emitEvent(trx: Knex, input: EmitInput): Promise<EventRecord> {
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
  // FOR SHARE (a no-op on SQLite, whose writers take turns): on Postgres an endpoint deleted or disabled
  // by a concurrent transaction would otherwise get a delivery row after it was gone (a foreign-key error,
  // so a 500 for the request that emitted) or after its deliveries were held (so it would be sent to).
  // The delete or update waits for this transaction instead, and then sees its deliveries.
  // A backed-off endpoint's new deliveries wait for its back-off's end, as its others do (its dispatcher
  // moved them there, so that they are not walked by every claim meanwhile).
  const endpoints: { id: string; enabled_events: string; backoff_until: number | null }[] = await trx(
    'webhook_endpoints',
  )
    .where({ org_id: input.orgId, mode: input.mode, disabled: false })
    .where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', input.now))
    .select('id', 'enabled_events', 'backoff_until')
    .forShare();
  const deliveries = endpoints
    .filter((endpoint) => subscribes(JSON.parse(endpoint.enabled_events) as string[], input.type))
    .map((endpoint) => ({
      id: newId('wd'),
      org_id: input.orgId,
      mode: input.mode,
      event_id: id,
      event_type: input.type,
      endpoint_id: endpoint.id,
      status: 'pending',
      attempts: 0,
      next_attempt_at: Math.max(input.now, Number(endpoint.backoff_until ?? 0)),
      created_at: input.now,
      updated_at: input.now,
    }));
  if (deliveries.length > 0) {
    await trx('webhook_deliveries').insert(deliveries);
    // Postgres wakes the dispatchers when this commits (a no-op on SQLite, whose dispatchers watch the WAL).
    await notifyOnCommit(trx, DELIVERY_CHANNEL);
  }
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
  const { rows, total } = await fetchPage<EventRow>(scoped, order, offset, limit);
  return { data: rows.map(presentEvent), total };
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
