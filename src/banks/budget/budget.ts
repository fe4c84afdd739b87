import type { BankBudgetSettings, BudgetDefaults } from './budget-settings.js';

/*
 * A consent bank's limits as the appliance keeps them (docs/open-finance.md, "Bank limits"): the pure parts.
 * The CMF's draft counts a client's calls per second (beyond: 529) and per minute (beyond: 429), so the budget
 * keeps one count per clock second and one per clock minute, shared by every scheduler process through one
 * row per bank (store.ts). On-demand refreshes may use the whole of each window; scheduled syncs only their
 * share (`banks.budget.scheduledShare`, 80%), so a person's refresh finds room even while scheduled syncs
 * use all they may.
 */

export type Priority = 'on_demand' | 'scheduled';

export interface Limits {
  perSecond: number;
  perMinute: number;
}

/**
 * By default a call is permitted only in the first 800 ms of a second, so that it reaches the bank within the
 * second it was counted in: its request leaves at once, and crosses loopback or a network in less than the
 * 200 ms left (the bank counts by its own clock; a call counted at 999 ms that arrives at 1,001 ms is one
 * more in the bank's next second). Each window still allows its whole count. `banks.budget.arrivalMarginMs`.
 */
export const ARRIVAL_MARGIN_MS = 200;

/** The limits of a bank: its own (`banks.budgets.<bank>`), else the default (`banks.budget`). */
export function limitsOf(
  defaults: BudgetDefaults,
  own: Readonly<Record<string, BankBudgetSettings>>,
  bankId: string,
): Limits {
  const mine = own[bankId] ?? {};
  return {
    perSecond: mine.perSecond ?? defaults.perSecond,
    perMinute: mine.perMinute ?? defaults.perMinute,
  };
}

/** What one priority may use of each window: all of it on demand, the scheduled share (at least one) else. */
export function shareOf(limits: Limits, priority: Priority, scheduledShare: number): Limits {
  if (priority === 'on_demand') return limits;
  return {
    perSecond: Math.max(1, Math.floor(limits.perSecond * scheduledShare)),
    perMinute: Math.max(1, Math.floor(limits.perMinute * scheduledShare)),
  };
}

/** The clock second and minute `now` falls in, by their first millisecond. */
export function windowsAt(now: number): { second: number; minute: number } {
  return { second: now - (now % 1000), minute: now - (now % 60_000) };
}

/** A bank's shared row, as the permit statement left it. */
export interface BudgetState {
  second_start: number;
  second_count: number;
  minute_start: number;
  minute_count: number;
  paused_until: number | null;
  paused_reason: string | null;
}

export type WaitCause = 'paused' | 'minute' | 'second' | 'margin';

/**
 * When a permit refused at `now` may be had, and why it was refused: the bank's pause, a full minute or
 * second (of this priority's share), or the arrival margin at the end of a second. Pure.
 */
export function nextChance(
  state: BudgetState | null,
  share: Limits,
  now: number,
): { at: number; cause: WaitCause; reason: string | null } {
  const { second, minute } = windowsAt(now);
  if (state?.paused_until != null && state.paused_until > now)
    return { at: Number(state.paused_until), cause: 'paused', reason: state.paused_reason };
  if (state && Number(state.minute_start) === minute && state.minute_count >= share.perMinute)
    return { at: minute + 60_000, cause: 'minute', reason: null };
  if (state && Number(state.second_start) === second && state.second_count >= share.perSecond)
    return { at: second + 1000, cause: 'second', reason: null };
  return { at: second + 1000, cause: 'margin', reason: null };
}

/** Whether `now` is in a second's arrival margin, where no call starts. */
export function inArrivalMargin(now: number, marginMs: number = ARRIVAL_MARGIN_MS): boolean {
  return marginMs > 0 && now % 1000 >= 1000 - marginMs;
}

/**
 * Whether a bank's links can all be synced once an interval within the scheduled share of its budget:
 * `needed` calls (links × calls per sync) against `available` (the share of the tighter window over the
 * interval). Pure; the scheduler logs it, the metrics show it and `svc doctor` checks it.
 */
export function capacityOf(input: {
  links: number;
  callsPerSync: number;
  limits: Limits;
  scheduledShare: number;
  intervalMinutes: number;
}): { needed: number; available: number; fits: boolean; minutesNeeded: number } {
  const share = shareOf(input.limits, 'scheduled', input.scheduledShare);
  // The per-second window allows at most 60 of its count a minute; the tighter of the two rules.
  const perMinute = Math.min(share.perMinute, share.perSecond * 60);
  // The average is a float (12 × 0.8 + 12 × 0.2 is 12.000000000000002): rounded to a thousandth first, so
  // 10,000 links of 12 calls need 120,000 calls, not 120,001.
  const needed = Math.ceil(Math.round(input.links * input.callsPerSync * 1000) / 1000);
  const available = Math.floor(perMinute * input.intervalMinutes);
  return { needed, available, fits: needed <= available, minutesNeeded: needed / perMinute };
}

/** A new average of calls per sync: the last sync weighs a fifth, so a bank's average follows its changes. */
export function averagedCalls(previous: number | null, calls: number): number {
  return previous === null ? calls : previous * 0.8 + calls * 0.2;
}
