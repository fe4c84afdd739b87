import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * A `pagination-key`: the moment the first page was cut, signed, so the following pages of the same list
 * are cut at that moment too (the data is a function of time: without the key, a movement booked between two
 * page calls would shift every later row by one). It carries no customer data; it lives 10 minutes.
 */
export const PAGINATION_KEY_TTL_MS = 10 * 60_000;

export function paginationKey(secret: Buffer, listPath: string, snapshot: number): string {
  const mac = createHmac('sha256', secret)
    .update(`${listPath}\n${snapshot}`)
    .digest('base64url')
    .slice(0, 22);
  return `${snapshot.toString(36)}.${mac}`;
}

/** The snapshot a key names, or null when the key is not one this bank gave for this list, or is stale. */
export function openPaginationKey(secret: Buffer, listPath: string, key: string, now: number): number | null {
  const match = /^([0-9a-z]{1,12})\.([\w-]{22})$/.exec(key);
  if (!match) return null;
  const snapshot = parseInt(match[1]!, 36);
  const expected = Buffer.from(paginationKey(secret, listPath, snapshot));
  const given = Buffer.from(key);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
  return now - snapshot > PAGINATION_KEY_TTL_MS || snapshot > now ? null : snapshot;
}
