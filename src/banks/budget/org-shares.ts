import { NEWCOMER_SHARE, newcomerReserve, windowsAt, type Limits } from './budget.js';

/*
 * Each organisation's share of a bank's windows (issue 43, item 3; docs/open-finance.md, "Each
 * organisation's share"): the pure part. The bank counts our calls, not whose they are, so one tenant's
 * refreshes could spend a minute another tenant's refresh is waiting for. Two rules, both max-min:
 *
 * 1. Every permit: the priority's share of each window is divided among the organisations calling the bank.
 *    One below its fair share (the share ÷ the organisations calling) is served while the window has room; one
 *    above it only while the window keeps free what each other calling organisation has not yet used of its
 *    fair share. An organisation may use what the others leave, never what they are still using.
 * 2. On-demand permits, among the organisations refreshing: the same, counting their refreshes' calls only
 *    and one more organisation (a newcomer), and above that fair share keeping a newcomer's reserve free. So a
 *    tenant that floods the bank with refreshes leaves room for another tenant's first refresh, which finds
 *    its calls at once; and a tenant whose scheduled syncs use their share still has its people's refreshes
 *    served in the window's rest (rule 2 counts refreshes only).
 *
 * In the second window rule 1 counts the newcomer too: whatever a tenant's calls are, scheduled or not, they
 * leave each second room for another tenant's refresh. Without it the noisy tenant's workers, waking together
 * at each second's first ms, took 8 of its 10, and the quiet tenant's 4-call refresh waited for the next
 * second half the time (its p99 4.6x its p99 alone in bench/bank-fairness.ts). The reserve is held back by the
 * organisation using the most of the window only: the one using less is the one it is kept for.
 */

/**
 * How long after its last permit an organisation still counts as calling the bank. A sync's calls follow each
 * other within a few hundred ms (a page, the next page); an organisation silent for 3 s has finished, and its
 * unused share goes back to the others.
 */
export const ACTIVE_MS = 3_000;

/** Calls in the row's second and minute, and the last one's time (epoch ms). */
export interface Calls {
  second: number;
  minute: number;
  at: number;
}

/** One organisation's calls: all of them (rule 1) and its refreshes' (rule 2). */
export interface OrgCalls {
  all: Calls;
  onDemand?: Calls;
}

/** `bank_call_budgets.org_calls`: each organisation's calls in the row's current second and minute. */
export type OrgCallsByOrg = Readonly<Record<string, OrgCalls>>;

/** The bank's windows as the row holds them, whoever's calls they count. */
export interface Windows {
  second_start: number;
  second_count: number;
  minute_start: number;
  minute_count: number;
}

/** Who a permit is for: an organisation, or the appliance's own calls (a registration), which have none. */
export type Payer = string | null;

/** The appliance's own calls count as one more organisation. */
export const APPLIANCE = '(appliance)';

/** The counts as of `now`: a window that has ended counts nothing, an organisation long silent is dropped. */
export function currentCalls(
  windows: Windows,
  orgs: OrgCallsByOrg,
  now: number,
): { windows: Windows; orgs: Record<string, OrgCalls> } {
  const { second, minute } = windowsAt(now);
  const sameSecond = Number(windows.second_start) === second;
  const sameMinute = Number(windows.minute_start) === minute;
  const current = (calls: Calls): Calls => ({
    second: sameSecond ? calls.second : 0,
    minute: sameMinute ? calls.minute : 0,
    at: calls.at,
  });
  const kept: Record<string, OrgCalls> = {};
  for (const [org, calls] of Object.entries(orgs)) {
    const all = current(calls.all);
    // Kept while it counts in the minute or as calling: the row holds only the organisations of this minute.
    if (all.minute === 0 && now - all.at >= ACTIVE_MS) continue;
    kept[org] = calls.onDemand ? { all, onDemand: current(calls.onDemand) } : { all };
  }
  return {
    windows: {
      second_start: second,
      second_count: sameSecond ? Number(windows.second_count) : 0,
      minute_start: minute,
      minute_count: sameMinute ? Number(windows.minute_count) : 0,
    },
    orgs: kept,
  };
}

/** A payer's place in one window, beside the other calling organisations. */
export interface ShareInput {
  limit: number;
  total: number;
  used: number;
  others: readonly number[];
  newcomer: boolean;
  /** The calls kept free for the newcomer, at most a fair share; by default a fifth of `limit`. */
  reserve?: number;
  /** The most kept for any one other organisation (`reach`); by default its whole unmet share. */
  reach?: number;
  /**
   * What each other organisation (as in `others`) may still take under the rules that bind it besides this
   * one: its unmet share is kept no larger, since room it cannot use would only wait out the window.
   */
  rooms?: readonly number[];
}

/**
 * How many more calls a payer that used `used` of a window of `limit` calls holding `total` may take, beside
 * the other calling organisations' `others` (what each used of it). `newcomer`: count one more organisation
 * and keep its reserve (`NEWCOMER_SHARE`) free above the fair share. Pure.
 */
export function roomInShare(input: ShareInput): number {
  const { limit, total, used, others, newcomer, reach = Infinity, rooms } = input;
  const free = limit - total;
  if (free <= 0) return 0;
  const fair = Math.floor(limit / (others.length + 1 + (newcomer ? 1 : 0)));
  const unmet = others.reduce(
    (sum, theirs, index) => sum + Math.min(reach, Math.max(0, fair - theirs), rooms?.[index] ?? Infinity),
    0,
  );
  const reserve = newcomer ? Math.min(fair, input.reserve ?? Math.ceil(limit * NEWCOMER_SHARE.minute)) : 0;
  return Math.max(0, Math.min(free, Math.max(fair - used, free - unmet - reserve)));
}

/**
 * Whether the payer may take one more call (`roomInShare`): below its fair share while the window has room,
 * above it only while the window keeps free what each other organisation has not yet used of its fair share.
 *
 * Example, rule 1 at 48 a minute scheduled: two tenants calling have 24 each for sure, and one may take more
 * only as the other leaves it. Rule 2 at 60 a minute on demand: a tenant refreshing alone may use 48 (12 kept
 * for a newcomer); a second one, the moment it refreshes, is served while the window has room.
 */
export function withinShare(input: ShareInput): boolean {
  return roomInShare(input) >= 1;
}

export type PermitDecision =
  | { granted: true; windows: Windows; orgs: Record<string, OrgCalls> }
  | { granted: false; cause: 'second' | 'minute' | 'share' };

const WINDOWS = ['second', 'minute'] as const;
type Window = (typeof WINDOWS)[number];

/**
 * One permit for `payer` at `now`, against the priority's `share` of the bank's windows and, for a refresh
 * (`onDemand`), the whole of them (`whole`, the bank's limits): the row's next counts, or why not. The pause
 * and the arrival margin are the caller's. Pure.
 */
export function decidePermit(
  stored: Windows,
  storedOrgs: OrgCallsByOrg,
  payer: Payer,
  share: Limits,
  onDemand: boolean,
  now: number,
  whole: Limits = share,
): PermitDecision {
  const { windows, orgs } = currentCalls(stored, storedOrgs, now);
  if (windows.minute_count >= share.perMinute) return { granted: false, cause: 'minute' };
  if (windows.second_count >= share.perSecond) return { granted: false, cause: 'second' };
  const me = payer ?? APPLIANCE;
  const none: Calls = { second: 0, minute: 0, at: now };
  const mine = orgs[me] ?? { all: none };
  const others = Object.entries(orgs).filter(([org]) => org !== me);
  const calling = (calls: Calls | undefined): calls is Calls => !!calls && now - calls.at < ACTIVE_MS;
  const limits = { second: share.perSecond, minute: share.perMinute };
  // In the minute, another organisation is kept no more than it could take before it stops counting as
  // calling: ACTIVE_MS of whole seconds (30 calls at 10 a second). A tenant that refreshes now and then has
  // half of every second while it calls, and keeps no 236 calls of the minute from the others that it will
  // not use (measured: the noisy tenant beside it made 328 calls a minute of 480).
  const reach = { second: Infinity, minute: share.perSecond * (ACTIVE_MS / 1000) };
  const totals = { second: windows.second_count, minute: windows.minute_count };
  // The newcomer's reserve is kept by the organisation using the most of the window only: one using less
  // than another came later, and the reserve is its own.
  const callingNow = others.map(([, calls]) => calls.all).filter(calling);
  const reserveOf = (window: Window) =>
    callingNow.some((calls) => calls[window] > mine.all[window]) ? 0 : newcomerReserve(window, whole, share);
  const inTheSecond = (window: Window) => window === 'second';
  const inBoth = () => true;
  const fits = (
    pick: (calls: OrgCalls) => Calls | undefined,
    newcomerIn: (window: Window) => boolean,
    roomOf?: (org: string, window: Window) => number,
  ) => {
    const theirs = others.filter(([, calls]) => calling(pick(calls)));
    const own = pick(mine) ?? none;
    return WINDOWS.every((window) =>
      withinShare({
        limit: limits[window],
        total: totals[window],
        used: own[window],
        others: theirs.map(([, calls]) => pick(calls)![window]),
        newcomer: newcomerIn(window),
        reserve: reserveOf(window),
        reach: reach[window],
        rooms: roomOf && theirs.map(([org]) => roomOf(org, window)),
      }),
    );
  };
  // Rule 1 as it stands for another organisation, with this payer calling: what it may still take of the
  // window. Rule 2 keeps no more of its refresh share free than that. Without the cap a tenant whose calls of
  // the second were mostly scheduled kept its unused refresh share from the quiet tenant's refresh, though
  // rule 1 no longer let it take it: the refresh's 4th call waited for the next second (permit waits p99
  // 0.6-1.1 s beside the noisy tenant in bench/bank-fairness.ts).
  const allCalling = [...others.filter(([, calls]) => calling(calls.all)), [me, mine] as const];
  const ruleOneRoom = (org: string, window: Window) => {
    const theirs = orgs[org]!.all[window];
    const rest = allCalling.filter(([other]) => other !== org).map(([, calls]) => calls.all[window]);
    return roomInShare({
      limit: limits[window],
      total: totals[window],
      used: theirs,
      others: rest,
      newcomer: inTheSecond(window),
      reserve: rest.some((calls) => calls > theirs) ? 0 : newcomerReserve(window, whole, share),
      reach: reach[window],
    });
  };
  if (
    !fits((calls) => calls.all, inTheSecond) ||
    (onDemand && !fits((calls) => calls.onDemand, inBoth, ruleOneRoom))
  )
    return { granted: false, cause: 'share' };
  const counted = (calls: Calls | undefined): Calls => ({
    second: (calls?.second ?? 0) + 1,
    minute: (calls?.minute ?? 0) + 1,
    at: now,
  });
  const next: OrgCalls = { all: counted(mine.all) };
  if (onDemand) next.onDemand = counted(mine.onDemand);
  else if (mine.onDemand) next.onDemand = mine.onDemand;
  return {
    granted: true,
    windows: { ...windows, second_count: windows.second_count + 1, minute_count: windows.minute_count + 1 },
    orgs: { ...orgs, [me]: next },
  };
}

/**
 * A permit counted at `countedAt` for `payer` (`onDemand`: a refresh's) and never used, given back: one less
 * in the second and the minute it was counted in, where the row still holds them. Pure.
 */
export function givenBack(
  stored: Windows,
  storedOrgs: OrgCallsByOrg,
  payer: Payer,
  onDemand: boolean,
  countedAt: number,
): { windows: Windows; orgs: Record<string, OrgCalls> } {
  const { second, minute } = windowsAt(countedAt);
  const inSecond = Number(stored.second_start) === second;
  const inMinute = Number(stored.minute_start) === minute;
  const less = (count: number, applies: boolean) => (applies && count > 0 ? count - 1 : count);
  const lessCalls = (calls: Calls): Calls => ({
    ...calls,
    second: less(calls.second, inSecond),
    minute: less(calls.minute, inMinute),
  });
  const me = payer ?? APPLIANCE;
  const orgs = { ...storedOrgs };
  const mine = orgs[me];
  if (mine)
    orgs[me] = {
      all: lessCalls(mine.all),
      ...(mine.onDemand ? { onDemand: onDemand ? lessCalls(mine.onDemand) : mine.onDemand } : {}),
    };
  return {
    windows: {
      ...stored,
      second_count: less(Number(stored.second_count), inSecond),
      minute_count: less(Number(stored.minute_count), inMinute),
    },
    orgs,
  };
}

/** `org_calls` as stored: JSON text, null before the first permit of this build. */
export function readOrgCalls(text: string | null | undefined): OrgCallsByOrg {
  if (!text) return {};
  try {
    const parsed = JSON.parse(text) as Record<string, Partial<OrgCalls>>;
    // Only entries of this shape: a row another build wrote differently restarts the shares.
    return Object.fromEntries(
      Object.entries(parsed ?? {}).filter(([, calls]) => typeof calls?.all?.minute === 'number'),
    ) as OrgCallsByOrg;
  } catch {
    return {}; // a row from a future or broken writer: the shares restart from this permit
  }
}
