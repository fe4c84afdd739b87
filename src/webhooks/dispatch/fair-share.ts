/**
 * How a dispatcher shares its slots: at most `concurrency` attempts in flight, at most `perOrganisation` of
 * them for one organisation (all its endpoints, both modes) and at most an endpoint's own limit to one
 * endpoint. Measured before these caps: one organisation with 40 endpoints that accepted connections and
 * never answered held all 32 slots, and every other organisation's deliveries waited 23 to 59 s (normally
 * under 0.3 s) while those attempts ran out their 10 s deadlines. With a cap of 8, such an organisation holds
 * 8 slots and the other 24 keep flowing; it would take 4 such organisations at once to fill them (and back-off,
 * see endpoint-health.ts, stops feeding their endpoints after a few attempts).
 */
export interface ShareLimits {
  concurrency: number;
  perOrganisation: number;
  /** The endpoint's own limit: 0 while it is backed off, 1 while its latest attempt went unanswered. */
  endpoint(endpointId: string): number;
}

/** Attempts counted overall, by endpoint and by organisation (in flight, or in hand). */
export interface Tally {
  total: number;
  byEndpoint: ReadonlyMap<string, number>;
  byOrganisation: ReadonlyMap<string, number>;
}

export interface Keyed {
  endpointId: string;
  orgId: string;
}

/**
 * The queued rows that may start now, as indices in queue order (oldest first): each one whose endpoint and
 * organisation are under their limits once the rows picked before it are counted. A row held back by its
 * organisation's cap does not hold up rows of other organisations behind it.
 */
export function startable(queue: readonly Keyed[], inFlight: Tally, limits: ShareLimits): number[] {
  const picked: number[] = [];
  const byEndpoint = new Map(inFlight.byEndpoint);
  const byOrganisation = new Map(inFlight.byOrganisation);
  let total = inFlight.total;
  for (let i = 0; i < queue.length && total < limits.concurrency; i++) {
    const { endpointId, orgId } = queue[i]!;
    const endpoint = byEndpoint.get(endpointId) ?? 0;
    const organisation = byOrganisation.get(orgId) ?? 0;
    if (endpoint >= limits.endpoint(endpointId) || organisation >= limits.perOrganisation) continue;
    byEndpoint.set(endpointId, endpoint + 1);
    byOrganisation.set(orgId, organisation + 1);
    total += 1;
    picked.push(i);
  }
  return picked;
}

/**
 * Keys (endpoints or organisations) with more in hand than their mark: claims skip them, so that a backlog
 * of one, however old, cannot fill the hand while another has rows due. `markOf` is a set short of what
 * each may hold, so a key not skipped has room for a whole claim.
 */
export function overMark(inHand: ReadonlyMap<string, number>, markOf: (key: string) => number): string[] {
  return [...inHand].filter(([key, count]) => count > markOf(key)).map(([key]) => key);
}
