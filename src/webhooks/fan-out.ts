import type { Knex } from 'knex';
import { newId } from '../ids/ids.js';
import { notifyOnCommit } from '../db/notify.js';
import { subscribes } from '../events/catalogue.js';
import { countDeliveries, DELIVERY_CHANNEL } from './deliveries.js';
import { recordEvent, type EventInput, type EventRecord } from '../events/store.js';

/**
 * The transactional outbox: the event row and one delivery row per subscribed, enabled endpoint are
 * written in the caller's transaction, beside the state change that caused them. The dispatcher reads only
 * delivery rows, so an event is delivered if and only if its change committed. Events are recorded by
 * events/, which knows nothing of endpoints; this side depends on it, never the reverse.
 */
export async function publishEvent(trx: Knex, input: EventInput): Promise<EventRecord> {
  const event = await recordEvent(trx, input);
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
      event_id: event.id,
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
    await countDeliveries(
      trx,
      deliveries.map((delivery) => ({ endpointId: delivery.endpoint_id, status: 'pending', n: 1 })),
    );
    // Postgres wakes the dispatchers when this commits (a no-op on SQLite, whose dispatchers watch the WAL).
    await notifyOnCommit(trx, DELIVERY_CHANNEL);
  }
  return event;
}
