/*
 * The delivery queue's statements: one function per statement the dispatcher runs, each with why it is
 * written so. Dialects differ only inside the src/db/ helpers (`claimBatch`, `boundRows`, `boundList`).
 *
 * Hot statements are raw SQL (knex's query builder cost more than the statements themselves) and named, so
 * Postgres plans them once per connection rather than every cycle (about 0.45 ms a cycle, 2-4 us of its CPU
 * per delivery): their text must never change, so variable lists are bound as one value each.
 *
 * What is left of a delivery's cost on Postgres is mostly index upkeep: the claim is a HOT update (pages
 * are half filled, migrations/20261122000006), the result is not (it moves the row in the due index), so it
 * adds an entry to each of the table's six indexes.
 */
import type { Knex } from 'knex';
import { boundList, boundRows, runNamed } from '../../db/bound-rows.js';
import { claimBatch } from '../../db/claims.js';
import type { Database, Engine } from '../../db/database.js';
import { holdDeliveriesUntil, type DeliveryRow } from '../deliveries.js';
import type { FailingChange, HealthChange } from './endpoint-health.js';
import type { EndpointSecrets, WebhookEndpointRow } from '../endpoints.js';

/**
 * What a claim returns: the delivery's columns an attempt and its record need; its event's stored data and
 * time, read in the same statement (null only if the event is gone); and its endpoint's version.
 */
export type ClaimedRow = Pick<
  DeliveryRow,
  'id' | 'org_id' | 'mode' | 'event_id' | 'event_type' | 'endpoint_id' | 'attempts' | 'next_attempt_at'
> & {
  event_data: string | null;
  event_created_at: number | null;
  endpoint_version: string | null;
  /** The endpoint's unanswered attempts in a row when the row was claimed (see endpoint-health.ts). */
  endpoint_unanswered: number | null;
};

/** Endpoints and organisations with less than a set of room in hand: claims skip them (fair-share.ts). */
export interface Busy {
  endpoints: string[];
  organisations: string[];
}

export type Endpoint = EndpointSecrets & Pick<WebhookEndpointRow, 'url' | 'disabled' | 'expires_at'>;
const ENDPOINT_COLUMNS = [
  'id',
  'url',
  'disabled',
  'expires_at',
  'secret_encrypted',
  'previous_secret_encrypted',
  'previous_secret_expires_at',
] as const;

/**
 * What an attempt needs of an endpoint changes only with its URL or its secrets, and every roll seals a new
 * secret_encrypted (fresh IV), previous secret and grace included: so the two name a version, and a claim
 * returns it with each row rather than an endpoint read in every cycle. (Disabled endpoints are not claimed.)
 * `versionOf` is the same expression on an endpoint in hand.
 */
const ENDPOINT_VERSION = `url || ' ' || secret_encrypted`;
export const versionOf = (endpoint: Endpoint) => `${endpoint.url} ${endpoint.secret_encrypted}`;

const CLAIM_RETURNING = `id, org_id, mode, event_id, event_type, endpoint_id, attempts, next_attempt_at,
  (SELECT data FROM events WHERE events.id = webhook_deliveries.event_id) AS event_data,
  (SELECT created_at FROM events WHERE events.id = webhook_deliveries.event_id) AS event_created_at,
  (SELECT ${ENDPOINT_VERSION} FROM webhook_endpoints WHERE webhook_endpoints.id = webhook_deliveries.endpoint_id)
    AS endpoint_version,
  (SELECT unanswered_attempts FROM webhook_endpoints WHERE webhook_endpoints.id = webhook_deliveries.endpoint_id)
    AS endpoint_unanswered`;

/**
 * A row is due when it is pending, its time has come, nobody holds a live lease on it (an expired lease is
 * a dead dispatcher's: the row is claimed again, with the same event id) and its endpoint is enabled and
 * not backed off. (A back-off also moves the endpoint's rows to its end, so the claim's walk of the due
 * index does not pass them; the condition here covers rows that were not moved, e.g. leased elsewhere.)
 */
const DUE = `status = 'pending' AND next_attempt_at <= ? AND (locked_until IS NULL OR locked_until < ?)
  AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE disabled = ?
    AND (backoff_until IS NULL OR backoff_until <= ?))`;

/**
 * When the earliest claimable row is due (maybe in the past), or null when none is pending. A cheap indexed
 * read on the reader connection: it keeps an idle SQLite dispatcher off the write lock.
 */
export async function nextDueAt(db: Database, now: number, busy: Busy): Promise<number | null> {
  let query = db
    .reader('webhook_deliveries')
    .where('status', 'pending')
    .whereNotNull('next_attempt_at')
    .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', now))
    .whereIn('endpoint_id', (q) =>
      q
        .select('id')
        .from('webhook_endpoints')
        .where('disabled', false)
        .where((b) => b.whereNull('backoff_until').orWhere('backoff_until', '<=', now)),
    );
  if (busy.endpoints.length > 0) query = query.whereNotIn('endpoint_id', busy.endpoints);
  if (busy.organisations.length > 0) query = query.whereNotIn('org_id', busy.organisations);
  const row: { next_attempt_at: number } | undefined = await query
    .orderBy('next_attempt_at')
    .first('next_attempt_at');
  return row ? Number(row.next_attempt_at) : null;
}

/**
 * Claims up to `limit` due rows under the lease `token` (`claimBatch`: one `UPDATE … RETURNING`, `FOR UPDATE
 * SKIP LOCKED` on Postgres), returning each row's event and its endpoint's version with it, so endpoints are
 * read only when they change (a read of its events and endpoints after each claim was part of what held the
 * dispatcher to a third of the bare loop: see dispatcher.ts). Endpoints and organisations at their mark are
 * skipped; each list is one bound value, so the claim's text never changes.
 */
export function claimDue(
  db: Database,
  trx: Knex.Transaction,
  claim: { token: string; now: number; leaseMs: number; busy: Busy; limit: number },
): Promise<ClaimedRow[]> {
  const { token, now, leaseMs, busy, limit } = claim;
  const endpoints = boundList(db.engine, busy.endpoints);
  const organisations = boundList(db.engine, busy.organisations);
  return claimBatch<ClaimedRow>(db, {
    table: 'webhook_deliveries',
    owner: token,
    now,
    leaseMs,
    where: `${DUE} AND endpoint_id NOT IN ${endpoints.sql} AND org_id NOT IN ${organisations.sql}`,
    bindings: [now, now, false, now, ...endpoints.bindings, ...organisations.bindings],
    orderBy: 'next_attempt_at',
    limit,
    returning: CLAIM_RETURNING,
    within: trx,
    name: 'svc_webhooks_claim',
  });
}

/** The endpoints an attempt needs, read when a claim says the version in hand is not theirs. */
export function readEndpoints(trx: Knex, ids: readonly string[]): Promise<Endpoint[]> {
  return trx('webhook_endpoints')
    .whereIn('id', [...ids])
    .select(ENDPOINT_COLUMNS);
}

/** A finished attempt's result, for its delivery row. */
export interface DeliveryResult {
  id: string;
  /** The lease the attempt was made under: a row leased to someone else since is not written. */
  token: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  nextAttemptAt: number | null;
  lastAttemptAt: number;
  lastResponseStatus: number | null;
  lastError: string | null;
  updatedAt: number;
  /** The attempt, as JSON text (a `StoredAttempt`), for the row's history. */
  attempt: string;
}

const RESULT_COLUMNS = [
  ['id', 'text'],
  ['token', 'text'],
  ['status', 'text'],
  ['attempts', 'integer'],
  ['next_attempt_at', 'bigint'],
  ['last_attempt_at', 'bigint'],
  ['last_response_status', 'integer'],
  ['last_error', 'text'],
  ['updated_at', 'bigint'],
  ['attempt', 'text'],
] as const;

/**
 * Writes a batch's results in one statement (`UPDATE … FROM` the results, bound as a few values, see
 * `boundRows`) where the lease is still ours, appends each attempt to its row's history, and releases the
 * leases; returns the ids it updated. Row by row it was 0.45 ms a row on SQLite and 0.83 ms on Postgres,
 * which capped a dispatcher at about 1,000 deliveries a second.
 *
 * The history is a JSON array kept as text, appended to as text (the same functions on both engines): its
 * closing bracket gives way to the new attempt. Neither engine parses it here. (Null before the first
 * attempt; an empty array is never written, but would get no leading comma either.)
 */
export async function recordResults(
  trx: Knex,
  engine: Engine,
  results: readonly DeliveryResult[],
): Promise<Set<string>> {
  const values = boundRows(
    engine,
    RESULT_COLUMNS,
    results.map((result) => [
      result.id,
      result.token,
      result.status,
      result.attempts,
      result.nextAttemptAt,
      result.lastAttemptAt,
      result.lastResponseStatus,
      result.lastError,
      result.updatedAt,
      result.attempt,
    ]),
  );
  const recorded = await runNamed<{ id: string }>(
    trx,
    'svc_webhooks_record',
    `UPDATE webhook_deliveries SET status = v.status, attempts = v.attempts,
       next_attempt_at = v.next_attempt_at, last_attempt_at = v.last_attempt_at,
       last_response_status = v.last_response_status, last_error = v.last_error,
       locked_by = NULL, locked_until = NULL, updated_at = v.updated_at,
       attempt_history = CASE WHEN attempt_history IS NULL OR attempt_history = '[]' THEN '[' || v.attempt || ']'
         ELSE substr(attempt_history, 1, length(attempt_history) - 1) || ',' || v.attempt || ']' END
     FROM ${values.sql} AS v
     WHERE webhook_deliveries.id = v.id AND webhook_deliveries.locked_by = v.token
     RETURNING webhook_deliveries.id`,
    values.bindings,
  );
  return new Set(recorded.map((row) => row.id));
}

/** What a batch of attempts does to each endpoint's count of unanswered attempts (endpoint-health.ts). */
const HEALTH_COLUMNS = [
  ['id', 'text'],
  ['reset', 'integer'],
  ['added', 'integer'],
  ['succeeded', 'integer'],
  ['failing_from', 'bigint'],
  ['disable_before', 'bigint'],
] as const;

export interface CountedEndpoint {
  id: string;
  unanswered_attempts: number;
  backoff_until: number | null;
  failing_since: number | null;
}

/**
 * Applies a batch's health changes to their endpoints in one statement, and returns the endpoints it wrote:
 * the count of unanswered attempts and the back-off (`changes`), and when their failing began (`failing`:
 * set by the first failure after a success, cleared by a success). It writes only endpoints whose health
 * changes (an endpoint that keeps succeeding, or keeps failing, is neither written nor locked, so emitters
 * reading it `FOR SHARE` never wait on us), and those failing since before `disableBefore` (null: never),
 * which the caller disables.
 */
export function countUnanswered(
  trx: Knex,
  engine: Engine,
  changes: readonly HealthChange[],
  failing: readonly FailingChange[] = [],
  disableBefore: number | null = null,
): Promise<CountedEndpoint[]> {
  const byId = new Map<string, [string, number, number, number, number | null, number | null]>();
  for (const change of changes) {
    byId.set(change.endpointId, [
      change.endpointId,
      change.reset ? 1 : 0,
      change.added,
      0,
      null,
      disableBefore,
    ]);
  }
  for (const change of failing) {
    const row = byId.get(change.endpointId) ?? [change.endpointId, 0, 0, 0, null, disableBefore];
    row[3] = change.succeeded ? 1 : 0;
    row[4] = change.failingFrom;
    byId.set(change.endpointId, row);
  }
  const values = boundRows(engine, HEALTH_COLUMNS, [...byId.values()]);
  return runNamed<CountedEndpoint>(
    trx,
    'svc_webhooks_health_2',
    `UPDATE webhook_endpoints SET
       unanswered_attempts = CASE WHEN v.reset = 1 THEN v.added
         ELSE webhook_endpoints.unanswered_attempts + v.added END,
       backoff_until = CASE WHEN v.reset = 1 THEN NULL ELSE webhook_endpoints.backoff_until END,
       failing_since = CASE WHEN v.succeeded = 1 THEN v.failing_from
         ELSE COALESCE(webhook_endpoints.failing_since, v.failing_from) END
     FROM ${values.sql} AS v
     WHERE webhook_endpoints.id = v.id AND (v.added > 0 OR webhook_endpoints.unanswered_attempts <> 0
       OR webhook_endpoints.backoff_until IS NOT NULL
       OR (v.failing_from IS NOT NULL AND webhook_endpoints.failing_since IS NULL)
       OR (v.succeeded = 1 AND webhook_endpoints.failing_since IS NOT NULL)
       OR (v.failing_from IS NOT NULL AND webhook_endpoints.disabled = ?
         AND webhook_endpoints.failing_since <= v.disable_before))
     RETURNING webhook_endpoints.id, webhook_endpoints.unanswered_attempts, webhook_endpoints.backoff_until,
       webhook_endpoints.failing_since`,
    [...values.bindings, false],
  );
}

/**
 * Backs an endpoint off until `until`, and moves its pending rows there, uncharged, so claims neither take
 * nor walk them. Rarer than counting: written per endpoint.
 */
export async function backOffEndpoint(
  trx: Knex,
  endpointId: string,
  until: number,
  now: number,
): Promise<void> {
  await trx('webhook_endpoints').where({ id: endpointId }).update({ backoff_until: until });
  await holdDeliveriesUntil(trx, endpointId, until, now);
}

/** Gives back claimed rows not attempted, where the lease is still `token`'s: claimable at once by anyone. */
export async function releaseClaims(db: Database, token: string, ids: readonly string[]): Promise<void> {
  await db.transaction((trx) =>
    trx('webhook_deliveries')
      .whereIn('id', [...ids])
      .where('locked_by', token)
      .update({ locked_by: null, locked_until: null }),
  );
}

/** Moves the leases of rows in hand (id and lease token) to `until`, in chunks of 400 ids, in one transaction. */
export async function renewLeases(
  db: Database,
  leases: readonly (readonly [string, string])[],
  until: number,
): Promise<void> {
  await db.transaction(async (trx) => {
    for (let i = 0; i < leases.length; i += 400) {
      const chunk = leases.slice(i, i + 400);
      await trx('webhook_deliveries')
        .whereIn(
          'id',
          chunk.map(([id]) => id),
        )
        .whereIn('locked_by', [...new Set(chunk.map(([, token]) => token))])
        .update({ locked_until: until });
    }
  });
}
