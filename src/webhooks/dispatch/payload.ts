import { toIso } from '../../clock/clock.js';
import type { EventRow } from '../../events/store.js';

export type StoredEvent = Pick<EventRow, 'id' | 'type' | 'created_at' | 'mode' | 'data'>;

/**
 * What a delivery posts: the event as `GET /v1/events/{id}` presents it (`presentEvent`), serialised. The
 * stored `data` is already the text `JSON.stringify` wrote (`recordEvent`), so it is spliced in as it is
 * rather than parsed and serialised again for every attempt, which cost more than signing it.
 */
export function eventBody(event: StoredEvent): string {
  const head = JSON.stringify({
    object: 'event',
    id: event.id,
    type: event.type,
    created_at: toIso(event.created_at),
    mode: event.mode,
  });
  return `${head.slice(0, -1)},"data":${event.data}}`;
}
