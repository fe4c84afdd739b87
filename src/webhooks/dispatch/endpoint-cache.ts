import type { Knex } from 'knex';
import { readEndpoints, versionOf, type ClaimedRow, type Endpoint } from './queue.js';

/** Endpoints kept (beyond it, the cache starts again). */
export const ENDPOINTS_CACHED = 10_000;

/**
 * Endpoints as a dispatcher last read them, by id. A claim returns each row's endpoint version (queue.ts),
 * so an endpoint is read again only when it has changed, not in every cycle.
 */
export class EndpointCache {
  private readonly endpoints = new Map<string, Endpoint>();

  get(id: string): Endpoint | undefined {
    return this.endpoints.get(id);
  }

  /** Reads the endpoints of claimed rows that are not known in the version the claim saw. */
  async refresh(trx: Knex, rows: readonly ClaimedRow[]): Promise<void> {
    const stale = new Set<string>();
    for (const row of rows) {
      const known = this.endpoints.get(row.endpoint_id);
      if (!known || versionOf(known) !== row.endpoint_version) stale.add(row.endpoint_id);
    }
    if (stale.size === 0) return;
    const read = await readEndpoints(trx, [...stale]);
    for (const id of stale) this.endpoints.delete(id);
    if (this.endpoints.size + read.length > ENDPOINTS_CACHED) this.endpoints.clear();
    for (const endpoint of read) this.endpoints.set(endpoint.id, endpoint);
  }
}
