import type { BankBudgetSettings, BudgetDefaults } from './budget-settings.js';

/*
 * A consent bank's limits as the appliance keeps them (docs/open-finance.md, "Bank limits"): the pure parts.
 * The CMF's draft counts a client's calls per second (beyond: 529) and per minute (beyond: 429), so the budget
 * keeps one count per clock second and one per clock minute, shared by every scheduler process through one
 * row per bank (store.ts). On-demand refreshes may use the whole of each window; scheduled syncs only their
 * share (`banks.budget.scheduledShare`, 80%), so a person's refresh finds room even while scheduled syncs
 * use all they may. Housekeeping calls (revoking a consent no link holds: an abandoned trip's) only
 * `BACKGROUND_SHARE` of the scheduled share.
 */

export type Priority = 'on_demand' | 'scheduled' | 'background';

/**
 * What a background call may use of the scheduled share: half, so 24 of 60 a minute and 4 of 10 a second by
 * default. The windows are counted, not queued, so "lower priority" is a lower ceiling: a background call is
 * refused once the minute holds 24 calls, leaving the calls from 24 to 48 to scheduled syncs (and to 60 to
 * refreshes) whatever the housekeeping has waiting. What it revokes can wait: the appliance holds no token of
 * an abandoned trip's consent, and a Brazilian bank rejects an unauthorised one itself after 60 minutes.
 */
export const BACKGROUND_SHARE = 0.5;

export interface Limits {
  perSecond: number;
  perMinute: number;
}

/**
 * What a permit above its fair share keeps free for an organisation that has not called yet, by window, at
 * most a fair share. The minute: a fifth (12 of 60), as much as scheduled syncs leave to refreshes (`1 -
 * scheduledShare`), on demand only, so scheduled syncs alone still have their whole share of the minute. The
 * second: 4 of 10, the calls of a refresh of a holder with three accounts (the list and three balances), so
 * it needs no second but the one it is asked in. A tenant alone then makes at most 6 calls a second, which
 * costs nothing where the minute binds first (60 a minute is 1 a second on average) and a quarter of the
 * bank's throughput only where the minute would allow more than 6 a second.
 */
export const NEWCOMER_SHARE = { second: 0.4, minute: 0.2 } as const;

/**
 * The calls of a bank's window (`whole`) a permit of the priority's `share` above its fair share keeps free for
 * a newcomer (org-shares.ts): its NEWCOMER_SHARE, less what the share already leaves (scheduled syncs, 8 of 10
 * a second, keep 2 more free, not 4). Pure.
 */
export function newcomerReserve(window: 'second' | 'minute', whole: Limits, share: Limits): number {
  const [bank, own] =
    window === 'second' ? [whole.perSecond, share.perSecond] : [whole.perMinute, share.perMinute];
  return Math.max(0, Math.ceil(bank * NEWCOMER_SHARE[window]) - (bank - own));
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

/**
 * What one priority may use of each window: all of it on demand, the scheduled share (at least one) for a
 * scheduled sync, half of that (at least one) in the background.
 */
export function shareOf(limits: Limits, priority: Priority, scheduledShare: number): Limits {
  if (priority === 'on_demand') return limits;
  const share = priority === 'scheduled' ? scheduledShare : scheduledShare * BACKGROUND_SHARE;
  return {
    perSecond: Math.max(1, Math.floor(limits.perSecond * share)),
    perMinute: Math.max(1, Math.floor(limits.perMinute * share)),
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

/** Why a permit is not had now: the bank's pause, a full window, the second's arrival margin, or the
 * payer's share among the organisations calling the bank (org-shares.ts). */
export type WaitCause = 'paused' | 'minute' | 'second' | 'margin' | 'share';

/** When a permit may be had, and why not now. */
export interface Chance {
  at: number;
  cause: WaitCause;
  reason: string | null;
}

/**
 * When a permit refused at `now` may be had, and why it was refused: the bank's pause, a full minute or
 * second (of this priority's share), or the arrival margin at the end of a second. Pure.
 */
export function nextChance(state: BudgetState | null, share: Limits, now: number): Chance {
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
  // The per-second window allows at most 60 of its count a minute, less the newcomer's reserve a tenant
  // alone keeps free in each (6 of the 8 scheduled); the tighter of the two rules.
  const perSecond =
    share.perSecond -
    Math.min(Math.floor(share.perSecond / 2), newcomerReserve('second', input.limits, share));
  const perMinute = Math.min(share.perMinute, perSecond * 60);
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
