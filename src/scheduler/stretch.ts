import type { Database } from '../db/database.js';
import { bankCapacities, type CapacitySettings } from '../banks/budget/capacity.js';
import { setBankInterval } from '../banks/budget/store.js';

/*
 * When a consent bank's links need more calls an interval than its budget's scheduled share allows, every one
 * of them waits alike (docs/capacity.md, "When a bank's budget is short"): the interval of each is stretched
 * to one round's minutes, and the scheduler queues at most what the share can sync in a tick, stalest first.
 * Without it the links first in line were synced every interval and the rest, behind them, waited in the queue
 * for hours, deferred window after window.
 */

/** What one stretched bank's links get: their interval, and how many of them one tick may queue. */
export interface BankStretch {
  intervalMs: number;
  perTick: number;
}

/** `bank:mode`, the key `enqueueDueLinks` looks a due link's bank up by. */
export const stretchKey = (bankId: string, mode: string) => `${bankId}:${mode}`;

/**
 * Each consent bank's interval, stored for the sync engine and the operator's views (null where the links
 * fit), and the stretched banks' limits for this tick. At least one link a tick, so a bank whose single
 * sync needs more than a tick's share still moves.
 */
export async function stretchIntervals(
  db: Database,
  settings: CapacitySettings,
  tickPeriodMs: number,
  now: number,
): Promise<Map<string, BankStretch>> {
  const out = new Map<string, BankStretch>();
  for (const capacity of await bankCapacities(db.reader, settings)) {
    const bank = { bankId: capacity.bankId, mode: capacity.mode };
    await setBankInterval(db, bank, capacity.fits ? null : capacity.intervalMinutes, now);
    if (capacity.fits) continue;
    out.set(stretchKey(capacity.bankId, capacity.mode), {
      intervalMs: capacity.intervalMinutes * 60_000,
      perTick: Math.max(1, Math.floor((capacity.syncsPerMinute * tickPeriodMs) / 60_000)),
    });
  }
  return out;
}
