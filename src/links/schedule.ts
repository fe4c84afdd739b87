import { createHash } from 'node:crypto';

/**
 * Each link keeps a fixed phase within the sync interval, derived from its id, so links created together
 * (an import of 100,000) are spread evenly over the interval instead of all falling due in one tick. The
 * first scheduled sync lands between half an interval and one and a half intervals after creation.
 */
export function firstSyncAt(linkId: string, now: number, intervalMs: number): number {
  const phase = createHash('sha256').update(linkId).digest().readUInt32BE(0) % intervalMs;
  const earliest = now + Math.floor(intervalMs / 2);
  const offset = (((phase - earliest) % intervalMs) + intervalMs) % intervalMs;
  return earliest + offset;
}
