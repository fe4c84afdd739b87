import type { Knex } from 'knex';
import type { Logger } from '../../logging/logger.js';
import type { BankBudgetSettings, BudgetDefaults } from './budget-settings.js';
import { capacityOf, limitsOf } from './budget.js';
import { allBudgets } from './store.js';

/** Whether one consent bank's links can all be synced once an interval within its scheduled budget. */
export interface BankCapacity {
  bankId: string;
  mode: 'live' | 'test';
  /** Active, unpaused consent links of the bank. */
  links: number;
  /** Measured: the calls its syncs made, on average. */
  callsPerSync: number;
  /** Calls one interval's syncs need, and the calls the scheduled share allows in an interval. */
  needed: number;
  available: number;
  fits: boolean;
  /** How long one round of the bank's links takes at the scheduled share. */
  minutesNeeded: number;
  /**
   * The interval every link of the bank gets: the configured one when they fit, else one round's minutes
   * (the scheduler stretches every link's interval alike, never syncing some on time and others never).
   */
  intervalMinutes: number;
  /** Scheduled syncs a minute the share allows at the measured calls per sync. */
  syncsPerMinute: number;
}

export interface CapacitySettings {
  budget: BudgetDefaults;
  budgets: Readonly<Record<string, BankBudgetSettings>>;
  syncIntervalMinutes: number;
}

/**
 * Every consent bank with a measured sync (a bank never synced has no calls per sync yet): its links ×
 * calls per sync against what its budget's scheduled share allows in one sync interval. The scheduler logs a
 * bank that does not fit, the metrics show the ratio (`svc_bank_budget_load`) and `svc doctor` warns.
 */
export async function bankCapacities(db: Knex, settings: CapacitySettings): Promise<BankCapacity[]> {
  const measured = (await allBudgets(db)).filter((row) => row.calls_per_sync !== null);
  const out: BankCapacity[] = [];
  for (const row of measured) {
    const [count] = await db('links')
      .join('link_grants', 'link_grants.link_id', 'links.id')
      .where({ 'links.bank_id': row.bank_id, 'links.mode': row.mode, 'links.status': 'active' })
      .where('links.paused', false)
      .count({ n: '*' });
    const links = Number((count as { n: number | string }).n);
    const callsPerSync = Number(row.calls_per_sync);
    const capacity = capacityOf({
      links,
      callsPerSync,
      limits: limitsOf(settings.budget, settings.budgets, row.bank_id),
      scheduledShare: settings.budget.scheduledShare,
      intervalMinutes: settings.syncIntervalMinutes,
    });
    out.push({
      bankId: row.bank_id,
      mode: row.mode,
      links,
      callsPerSync,
      ...capacity,
      ...stretchOf(capacity, callsPerSync, settings.syncIntervalMinutes),
    });
  }
  return out;
}

/**
 * The interval a bank's links get (the configured one, or one round's minutes when they do not fit, rounded
 * up to a whole minute) and the syncs a minute its scheduled share allows. Pure.
 */
export function stretchOf(
  capacity: { fits: boolean; minutesNeeded: number; available: number },
  callsPerSync: number,
  configuredMinutes: number,
): { intervalMinutes: number; syncsPerMinute: number } {
  return {
    intervalMinutes: capacity.fits
      ? configuredMinutes
      : Math.max(configuredMinutes, Math.ceil(capacity.minutesNeeded)),
    syncsPerMinute: callsPerSync > 0 ? capacity.available / configuredMinutes / callsPerSync : Infinity,
  };
}

/** The operator's words for a bank that does not fit (the log line, `svc doctor`). */
export function describeShortfall(capacity: BankCapacity, intervalMinutes: number): string {
  return `${capacity.bankId} (${capacity.mode}): ${capacity.links} links × ${capacity.callsPerSync.toFixed(1)} calls a sync need ${capacity.needed} calls an interval, but the scheduled share of its budget allows ${capacity.available} in ${intervalMinutes} minutes: a round takes ${Math.ceil(capacity.minutesNeeded)} minutes, so every link of the bank is synced every ${capacity.intervalMinutes} minutes instead (its effective interval)`;
}

/**
 * The scheduler's warning, at most once an hour per bank while it lasts (and at once when a bank starts not
 * to fit), so a log is not one line a tick.
 */
export class CapacityWarnings {
  private readonly warned = new Map<string, number>();

  async check(db: Knex, settings: CapacitySettings, logger: Logger, now: number): Promise<void> {
    for (const capacity of await bankCapacities(db, settings)) {
      const key = `${capacity.bankId}:${capacity.mode}`;
      if (capacity.fits) {
        this.warned.delete(key);
        continue;
      }
      const last = this.warned.get(key);
      if (last !== undefined && now - last < 3_600_000) continue;
      this.warned.set(key, now);
      logger.warn(
        {
          bank: capacity.bankId,
          mode: capacity.mode,
          links: capacity.links,
          calls_per_sync: Math.round(capacity.callsPerSync * 10) / 10,
          needed: capacity.needed,
          available: capacity.available,
        },
        `a bank's links cannot all be synced within the interval at its budget: ${describeShortfall(capacity, settings.syncIntervalMinutes)}`,
      );
    }
  }
}

/** The settings `bankCapacities` reads, from the configuration. */
export function capacitySettingsOf(config: {
  banks: { budget: BudgetDefaults; budgets: Readonly<Record<string, BankBudgetSettings>> };
  scheduler: { syncIntervalMinutes: number };
}): CapacitySettings {
  return {
    budget: config.banks.budget,
    budgets: config.banks.budgets,
    syncIntervalMinutes: config.scheduler.syncIntervalMinutes,
  };
}

/** A bank's effective interval, as `svc status` (`banks`) and the console's overview show it. */
export interface BankInterval {
  bank: string;
  mode: 'live' | 'test';
  links: number;
  calls_per_sync: number;
  configured_interval_minutes: number;
  effective_interval_minutes: number;
  stretched: boolean;
}

/** Every measured consent bank's links, calls per sync and the interval its links really get. */
export async function bankIntervals(
  db: Knex,
  config: Parameters<typeof capacitySettingsOf>[0],
): Promise<BankInterval[]> {
  return (await bankCapacities(db, capacitySettingsOf(config))).map((c) => ({
    bank: c.bankId,
    mode: c.mode,
    links: c.links,
    calls_per_sync: Math.round(c.callsPerSync * 100) / 100,
    configured_interval_minutes: config.scheduler.syncIntervalMinutes,
    effective_interval_minutes: c.intervalMinutes,
    stretched: !c.fits,
  }));
}
