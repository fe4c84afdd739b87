import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { auditChange } from '../audit/audit-log.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { fetchPage, NEWEST_FIRST } from '../db/paging.js';
import { addToTallies, compactTallies, deleteReturning, sumOfTallies } from '../db/tallies.js';
import { notifyOnCommit } from '../db/notify.js';

/** The channel on which new deliveries are announced (see src/db/notify.ts). */
export const DELIVERY_CHANNEL = 'svc_webhook_deliveries';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'succeeded', 'failed'];

export interface DeliveryRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  last_response_status: number | null;
  last_error: string | null;
  locked_by: string | null;
  locked_until: number | null;
  created_at: number;
  updated_at: number;
  /** Its attempts, oldest first: a JSON array of `StoredAttempt` (null before the first). */
  attempt_history?: string | null;
}

/**
 * A delivery's columns but its attempt history, for lists and joins: the history is read only with the one
 * delivery it belongs to.
 */
export const DELIVERY_COLUMNS = [
  'id',
  'org_id',
  'mode',
  'event_id',
  'event_type',
  'endpoint_id',
  'status',
  'attempts',
  'next_attempt_at',
  'last_attempt_at',
  'last_response_status',
  'last_error',
  'locked_by',
  'locked_until',
  'created_at',
  'updated_at',
] as const;

/** How many deliveries wait to be sent (due or backing off), for metrics and `svc status`. */
export async function pendingDeliveryCount(db: Knex): Promise<number> {
  return sumOfTallies(db('webhook_delivery_tallies').where('status', 'pending'));
}

/** A change in the number of an endpoint's deliveries of a status (`webhook_delivery_tallies`). */
export interface DeliveryCountChange {
  endpointId: string;
  status: DeliveryStatus;
  n: number;
}

/** Housekeeping: folds the changes recorded in `webhook_delivery_tallies` into one row per key. */
export function compactDeliveryTallies(trx: Knex, limit: number) {
  return compactTallies(trx, 'webhook_delivery_tallies', ['endpoint_id', 'status'], limit);
}

/**
 * Records changes in the deliveries' counts in the caller's transaction, which writes the deliveries
 * (src/db/tallies.ts): the delivery list's total and the pending count read them, not the rows.
 */
export async function countDeliveries(trx: Knex, changes: readonly DeliveryCountChange[]): Promise<void> {
  await addToTallies(
    trx,
    'webhook_delivery_tallies',
    changes.map((change) => ({
      key: { endpoint_id: change.endpointId, status: change.status },
      n: change.n,
    })),
  );
}

/** The latest deliveries of a link's events, newest first. */
export async function recentDeliveriesOfLink(
  db: Knex,
  linkId: string,
  limit: number,
): Promise<DeliveryRow[]> {
  return db('webhook_deliveries')
    .join('events', 'events.id', 'webhook_deliveries.event_id')
    .where('events.link_id', linkId)
    .orderBy('webhook_deliveries.created_at', 'desc')
    .limit(limit)
    .select(DELIVERY_COLUMNS.map((column) => `webhook_deliveries.${column}`));
}

/** One attempt as `attempt_history` keeps it (record.ts appends them). */
export interface StoredAttempt {
  number: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
}

export interface WebhookAttempt {
  object: 'webhook_attempt';
  number: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_excerpt: string | null;
}

export interface WebhookDelivery {
  object: 'webhook_delivery';
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_response_status: number | null;
  last_error: string | null;
  created_at: string;
  mode: 'live' | 'test';
  /** Only on the single-delivery read. */
  attempt_history?: WebhookAttempt[];
}

export function presentDelivery(row: DeliveryRow): WebhookDelivery {
  return {
    object: 'webhook_delivery',
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    endpoint_id: row.endpoint_id,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: row.status === 'pending' ? toIso(row.next_attempt_at) : null,
    last_attempt_at: toIso(row.last_attempt_at),
    last_response_status: row.last_response_status,
    last_error: row.last_error,
    created_at: toIso(row.created_at)!,
    mode: row.mode,
  };
}

export function presentAttempt(row: StoredAttempt): WebhookAttempt {
  return {
    object: 'webhook_attempt',
    number: row.number,
    started_at: toIso(row.started_at)!,
    duration_ms: row.duration_ms,
    status_code: row.status_code,
    error: row.error,
    response_excerpt: row.response_excerpt,
  };
}

export interface DeliveryFilter {
  /** Absent for operators (the CLI), who see every organisation. */
  orgId?: string;
  mode?: 'live' | 'test';
  eventId?: string;
  endpointId?: string;
  status?: DeliveryStatus;
}

/** Newest first, as every list. */
export async function listDeliveries(
  db: Knex,
  filter: DeliveryFilter,
  offset: number,
  limit: number,
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const scoped = () => {
    const query = db<DeliveryRow>('webhook_deliveries').select(DELIVERY_COLUMNS);
    if (filter.orgId) query.where('org_id', filter.orgId);
    if (filter.mode) query.where('mode', filter.mode);
    if (filter.eventId) query.where('event_id', filter.eventId);
    if (filter.endpointId) query.where('endpoint_id', filter.endpointId);
    if (filter.status) query.where('status', filter.status);
    return query;
  };
  // The tallies count by endpoint and status; an event's deliveries (one per endpoint) are counted on the rows.
  const tallied = () =>
    sumOfTallies(
      db('webhook_delivery_tallies')
        .join('webhook_endpoints', 'webhook_endpoints.id', 'webhook_delivery_tallies.endpoint_id')
        .modify((query) => {
          if (filter.orgId) query.where('webhook_endpoints.org_id', filter.orgId);
          if (filter.mode) query.where('webhook_endpoints.mode', filter.mode);
          if (filter.endpointId) query.where('webhook_delivery_tallies.endpoint_id', filter.endpointId);
          if (filter.status) query.where('webhook_delivery_tallies.status', filter.status);
        }),
    );
  return fetchPage<DeliveryRow>(scoped, NEWEST_FIRST, offset, limit, filter.eventId ? undefined : tallied);
}

export async function getDelivery(db: Knex, principal: Principal, id: string): Promise<WebhookDelivery> {
  const row = await findOwned<DeliveryRow>(db, 'webhook_deliveries', id, principal, 'webhook delivery');
  return withHistory(row);
}

export function withHistory(row: DeliveryRow): WebhookDelivery {
  const attempts: StoredAttempt[] = row.attempt_history ? JSON.parse(row.attempt_history) : [];
  return { ...presentDelivery(row), attempt_history: attempts.map(presentAttempt) };
}

/**
 * Redelivery starts a new attempt series: a new delivery row (new `wd_` id, `attempts` 0, due now) for the
 * same event and endpoint, with the full retry schedule ahead of it. The original row is left as it was, so
 * the history of what happened stays readable, and a pending original keeps its own schedule. A disabled
 * endpoint cannot be redelivered to (409 `endpoint_disabled`): nothing would be sent. A backed-off endpoint's
 * back-off ends, so its waiting deliveries are due again too.
 */
export async function redeliver(
  trx: Knex,
  principal: Principal,
  id: string,
  now: number,
): Promise<WebhookDelivery> {
  const original = await findOwned<DeliveryRow>(trx, 'webhook_deliveries', id, principal, 'webhook delivery');
  const endpoint: { disabled: boolean | number } | undefined = await trx('webhook_endpoints')
    .where({ id: original.endpoint_id })
    .first('disabled');
  if (!endpoint) throw errors.notFound(`The endpoint of ${id} no longer exists.`, 'id');
  if (endpoint.disabled) {
    throw errors.conflict(
      'endpoint_disabled',
      `The endpoint ${original.endpoint_id} is disabled; enable it (PATCH disabled=false) before redelivering.`,
    );
  }
  // Asking for a delivery now is asking to try the endpoint now: a back-off ends (docs/webhooks.md).
  await endBackoff(trx, original.endpoint_id, now);
  const row: DeliveryRow = {
    id: newId('wd'),
    org_id: original.org_id,
    mode: original.mode,
    event_id: original.event_id,
    event_type: original.event_type,
    endpoint_id: original.endpoint_id,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    last_attempt_at: null,
    last_response_status: null,
    last_error: null,
    locked_by: null,
    locked_until: null,
    created_at: now,
    updated_at: now,
  };
  await trx('webhook_deliveries').insert(row);
  await countDeliveries(trx, [{ endpointId: row.endpoint_id, status: 'pending', n: 1 }]);
  await notifyOnCommit(trx, DELIVERY_CHANNEL);
  await auditChange(
    trx,
    principal,
    {
      action: 'webhook_delivery.redeliver',
      targetType: 'webhook_delivery',
      targetId: original.id,
      details: { new_delivery: row.id, event_id: row.event_id, endpoint_id: row.endpoint_id },
    },
    now,
  );
  return presentDelivery(row);
}

/**
 * A disabled endpoint's pending deliveries wait: they keep their attempt count and get no next attempt
 * (`next_attempt_at` null) until the endpoint is enabled again, when they are due at once. Events emitted
 * while it is disabled are not queued for it at all (the outbox selects enabled endpoints).
 */
export async function holdEndpointDeliveries(trx: Knex, endpointId: string, now: number): Promise<void> {
  await trx('webhook_deliveries')
    .where({ endpoint_id: endpointId, status: 'pending' })
    .update({ next_attempt_at: null, updated_at: now });
}

export async function resumeEndpointDeliveries(trx: Knex, endpointId: string, now: number): Promise<void> {
  const resumed = await trx('webhook_deliveries')
    .where({ endpoint_id: endpointId, status: 'pending' })
    .whereNull('next_attempt_at')
    .update({ next_attempt_at: now, updated_at: now });
  if (resumed > 0) await notifyOnCommit(trx, DELIVERY_CHANNEL);
}

/**
 * An endpoint disabled for failing: its pending deliveries end `failed` with `reason`, their leases
 * dropped, so an attempt in flight elsewhere records nothing (its lease is gone) and none is made again.
 */
export async function failEndpointDeliveries(
  trx: Knex,
  endpointId: string,
  reason: string,
  now: number,
): Promise<number> {
  const failed = await trx('webhook_deliveries')
    .where({ endpoint_id: endpointId, status: 'pending' })
    .update({
      status: 'failed',
      next_attempt_at: null,
      last_error: reason,
      locked_by: null,
      locked_until: null,
      updated_at: now,
    });
  if (failed > 0) {
    await countDeliveries(trx, [
      { endpointId, status: 'pending', n: -failed },
      { endpointId, status: 'failed', n: failed },
    ]);
  }
  return failed;
}

/**
 * A backed-off endpoint's pending deliveries wait for the back-off's end: those due earlier are moved to it,
 * keeping their attempt count (the wait is not an attempt). Moved rather than filtered out by every claim,
 * so the claim's walk of the due index never passes an endpoint's backlog while it waits; rows held by a
 * disable (`next_attempt_at` null) stay held.
 */
export async function holdDeliveriesUntil(
  trx: Knex,
  endpointId: string,
  until: number,
  now: number,
): Promise<void> {
  await trx('webhook_deliveries')
    .where({ endpoint_id: endpointId, status: 'pending' })
    .where('next_attempt_at', '<', until)
    .update({ next_attempt_at: until, updated_at: now });
}

/**
 * Ends an endpoint's back-off, when a person says to try again (an update of the endpoint, a redelivery):
 * its count of unanswered attempts starts again from 0, and the deliveries the back-off moved to its end are
 * due at once. Whatever the retry schedule put later keeps its time.
 */
export async function endBackoff(trx: Knex, endpointId: string, now: number): Promise<void> {
  const endpoint: { unanswered_attempts: number; backoff_until: number | null } | undefined = await trx(
    'webhook_endpoints',
  )
    .where({ id: endpointId })
    .first('unanswered_attempts', 'backoff_until');
  if (!endpoint || (Number(endpoint.unanswered_attempts) === 0 && endpoint.backoff_until === null)) return;
  await trx('webhook_endpoints')
    .where({ id: endpointId })
    .update({ unanswered_attempts: 0, backoff_until: null });
  const until = endpoint.backoff_until === null ? null : Number(endpoint.backoff_until);
  if (until === null || until <= now) return;
  const resumed = await trx('webhook_deliveries')
    .where({ endpoint_id: endpointId, status: 'pending', next_attempt_at: until })
    .update({ next_attempt_at: now, updated_at: now });
  if (resumed > 0) await notifyOnCommit(trx, DELIVERY_CHANNEL);
}

/**
 * The pending deliveries (scheduled, due or in flight) of the event in `eventIdColumn` (a column of the
 * caller's query), as a correlated subquery: retention keeps an event with one whatever its age. A
 * correlated NOT EXISTS reads `webhook_deliveries(event_id)` once per candidate event; a NOT IN over every
 * pending delivery would build a set as large as the queue, which a long receiver outage makes huge.
 */
export function pendingDeliveriesOf(db: Knex, eventIdColumn: string): Knex.QueryBuilder {
  return db('webhook_deliveries')
    .select(db.raw('1'))
    .whereRaw('webhook_deliveries.event_id = ??', [eventIdColumn])
    .where('webhook_deliveries.status', 'pending');
}

/**
 * Retention: which of these events a pending delivery holds. Reads the deliveries of these events only
 * (`webhook_deliveries(event_id)`), a few rows each, whatever the size of the queue. The status is looked
 * at here, not in SQL: with `status = 'pending'` beside the ids, SQLite walked `deliveries_due_idx`, every
 * pending delivery of the queue, for each batch (80 ms a batch of 167 events behind 100,000 pending ones).
 */
export async function eventsWithPendingDeliveries(
  trx: Knex,
  eventIds: readonly string[],
): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const rows: { event_id: string; status: DeliveryStatus }[] = await trx('webhook_deliveries')
    .whereIn('event_id', [...eventIds])
    .select('event_id', 'status');
  return new Set(rows.filter((row) => row.status === 'pending').map((row) => row.event_id));
}

/**
 * Retention: removes the finished deliveries of these events, and so their attempts (the event goes next,
 * in the same transaction). A pending delivery is never removed.
 */
export async function deleteDeliveriesOfEvents(
  trx: Knex,
  eventIds: string[],
): Promise<{ deliveries: number; attempts: number }> {
  if (eventIds.length === 0) return { deliveries: 0, attempts: 0 };
  const deliveries = await deleteReturning<{ endpoint_id: string; status: DeliveryStatus; attempts: number }>(
    trx,
    trx('webhook_deliveries').whereIn('event_id', eventIds).whereNot('status', 'pending'),
    ['endpoint_id', 'status', 'attempts'],
  );
  await countDeliveries(
    trx,
    deliveries.map((row) => ({ endpointId: row.endpoint_id, status: row.status, n: -1 })),
  );
  const attempts = deliveries.reduce((sum, row) => sum + Number(row.attempts), 0);
  return { deliveries: deliveries.length, attempts };
}

/**
 * An organisation's deliveries in a mode that are not getting through (the console's overview): those that
 * failed for good since `since`, and those still pending after at least one failed attempt (retrying).
 * Both read `deliveries_status_idx (org_id, mode, status, created_at, id)`: the failed ones as a range of
 * it, the retrying ones among the pending (the queue, small by design), never the delivered history.
 */
export async function failingDeliveryCounts(
  db: Knex,
  scope: { orgId: string; mode: 'live' | 'test' },
  since: number,
): Promise<{ failed: number; retrying: number }> {
  const count = async (query: Knex.QueryBuilder) => {
    const [row] = await query.count({ n: '*' });
    return Number((row as { n: number | string }).n);
  };
  const [failed, retrying] = await Promise.all([
    count(
      db('webhook_deliveries')
        .where({ org_id: scope.orgId, mode: scope.mode, status: 'failed' })
        .where('created_at', '>=', since),
    ),
    count(
      db('webhook_deliveries')
        .where({ org_id: scope.orgId, mode: scope.mode, status: 'pending' })
        .where('attempts', '>', 0),
    ),
  ]);
  return { failed, retrying };
}
