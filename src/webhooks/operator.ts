import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { errors } from '../errors/api-error.js';
import { operatorPrincipal, type Principal } from '../auth/principal.js';
import { presentEndpoint, type WebhookEndpoint, type WebhookEndpointRow } from './endpoints.js';
import { presentDelivery, type DeliveryRow, type WebhookDelivery } from './deliveries.js';

/** The CLI acts as the owner of the delivery it names: its organisation, in its mode. */
export async function deliveryOwner(db: Knex, deliveryId: string, actor: string): Promise<Principal> {
  const row: Pick<DeliveryRow, 'org_id' | 'mode'> | undefined = await db('webhook_deliveries')
    .where({ id: deliveryId })
    .first('org_id', 'mode');
  if (!row) throw errors.notFound(`No webhook delivery ${deliveryId}.`, 'id');
  return operatorPrincipal(row.org_id, row.mode, actor);
}

export type OperatorEndpoint = WebhookEndpoint & { org_id: string };

/** Every organisation's endpoints (or one's), newest first, never with a secret. */
export async function listAllEndpoints(
  db: Knex,
  filter: { orgId?: string; mode?: 'live' | 'test' },
): Promise<OperatorEndpoint[]> {
  const query = db<WebhookEndpointRow>('webhook_endpoints')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc');
  if (filter.orgId) query.where('org_id', filter.orgId);
  if (filter.mode) query.where('mode', filter.mode);
  return (await query).map((row) => ({ ...presentEndpoint(row), org_id: row.org_id }));
}

/**
 * An endpoint's state in a word or a phrase, for a table: `disabled`, `backed off until <time> (<n>
 * unanswered)`, `failing (<n> unanswered)` while its latest attempts go unanswered, else `enabled`.
 */
export function endpointState(
  endpoint: Pick<WebhookEndpoint, 'disabled' | 'unanswered_attempts' | 'backoff_until'>,
  now: number,
): string {
  if (endpoint.disabled) return 'disabled';
  const unanswered = `${endpoint.unanswered_attempts} unanswered`;
  if (endpoint.backoff_until !== null && Date.parse(endpoint.backoff_until) > now)
    return `backed off until ${endpoint.backoff_until} (${unanswered})`;
  if (endpoint.unanswered_attempts > 0) return `failing (${unanswered})`;
  return 'enabled';
}

export interface DeliveryOutcome {
  endpoint_id: string;
  url: string;
  delivery_id: string;
  status: WebhookDelivery['status'];
  attempts: number;
  last_response_status: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
}

/**
 * Waits until every delivery of the event has had its first attempt (or ended), or `timeoutMs` passes, and
 * returns where each stands. A failed first attempt is not waited out: its retries are minutes away.
 */
export async function waitForOutcomes(
  db: Knex,
  eventId: string,
  timeoutMs: number,
  intervalMs = 100,
): Promise<{ outcomes: DeliveryOutcome[]; complete: boolean }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows: (DeliveryRow & { url: string })[] = await db('webhook_deliveries')
      .join('webhook_endpoints', 'webhook_endpoints.id', 'webhook_deliveries.endpoint_id')
      .where('webhook_deliveries.event_id', eventId)
      .orderBy('webhook_deliveries.created_at')
      .orderBy('webhook_deliveries.id')
      .select('webhook_deliveries.*', 'webhook_endpoints.url');
    const complete = rows.every((row) => row.attempts > 0 || row.status !== 'pending');
    if (complete || Date.now() >= deadline) {
      return {
        complete,
        outcomes: rows.map((row) => {
          const delivery = presentDelivery(row);
          return {
            endpoint_id: row.endpoint_id,
            url: row.url,
            delivery_id: row.id,
            status: delivery.status,
            attempts: delivery.attempts,
            last_response_status: delivery.last_response_status,
            last_error: delivery.last_error,
            next_attempt_at: delivery.next_attempt_at,
          };
        }),
      };
    }
    await sleep(intervalMs);
  }
}

export function describeOutcome(outcome: DeliveryOutcome): string {
  const attempts = `${outcome.attempts} attempt${outcome.attempts === 1 ? '' : 's'}`;
  const http = outcome.last_response_status !== null ? `, HTTP ${outcome.last_response_status}` : '';
  const error = outcome.status !== 'succeeded' && outcome.last_error ? `: ${outcome.last_error}` : '';
  const next =
    outcome.status === 'pending' && outcome.next_attempt_at
      ? `; next attempt ${outcome.next_attempt_at}`
      : '';
  return `${outcome.endpoint_id}  ${outcome.url}  ${outcome.status} (${attempts}${http})${error}${next}`;
}
