import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../clock/clock.js';
import type { Database } from '../../db/database.js';
import {
  inArrivalMargin,
  nextChance,
  shareOf,
  type Chance,
  type Limits,
  type Priority,
  type WaitCause,
  windowsAt,
} from './budget.js';
import type { Payer } from './org-shares.js';
import { ensureBudgetRow, findBudget, returnPermit, takePermit, type BankKey } from './store.js';

/**
 * The sync could not get a permit soon enough: the bank is paused (its `Retry-After`), or, before its first
 * call, the minute's share is spent. The engine defers the job to `until` (it waits; it has not failed) and
 * `svc links inspect` says it waits for the bank's budget.
 */
export class BudgetWait extends Error {
  override name = 'BudgetWait';
  constructor(
    readonly until: number,
    readonly waitCause: WaitCause,
    readonly reason: string | null,
  ) {
    super(`waiting for the bank's budget until ${new Date(until).toISOString()}`);
  }

  /** What the deferred job keeps as `last_error`: the code inspect and the console read, and why. */
  get jobError(): string {
    const why =
      this.waitCause === 'paused'
        ? `the bank asked to be called again then${this.reason ? `: ${this.reason}` : ''}`
        : this.waitCause === 'share'
          ? "other organisations are using the rest of the bank's calls"
          : 'the calls of this minute are spent';
    return `${BANK_BUDGET}: waiting for the bank's budget until ${new Date(this.until).toISOString()} (${why})`;
  }
}

/** The `last_error` code of a job deferred for its bank's budget. */
export const BANK_BUDGET = 'bank_budget';

/**
 * A sync waits inline for a permit up to this long once it has called the bank (the next second, or the next
 * minute when the minute's share ran out mid-sync: deferring then would spend the calls again at the next
 * try, and a sync that needs more calls than a minute allows would never finish). Beyond it (a long pause) it
 * is deferred. Before its first call it is deferred for anything longer than a second window.
 */
export const MAX_INLINE_WAIT_MS = 61_000;
const FIRST_CALL_WAIT_MS = 1_000;

export interface PermitDeps {
  db: Database;
  clock: Clock;
  limits: Limits;
  scheduledShare: number;
  arrivalMarginMs: number;
}

/**
 * The permits of one sync of one bank: `take()` before every call to the bank (a resource page, a token
 * refresh, a Grant Management query). Counts what it took, so the engine can record calls per sync.
 */
export interface PermitWaits {
  /** How long the first permit may be waited for before `BudgetWait` (default a second window). */
  firstWaitMs?: number;
  /** How long a later one may (default MAX_INLINE_WAIT_MS). */
  inlineWaitMs?: number;
}

export class SyncPermits {
  calls = 0;
  /** Permits given back unused: they were granted too late in their second (`leavesInTime`). */
  late = 0;
  /** How long the sync slept for permits in all (the window's next second, another's share): its log says it. */
  waitedMs = 0;
  private readonly share: Limits;
  private readonly firstWaitMs: number;
  private readonly inlineWaitMs: number;

  /** A refresh's permits are shared among the organisations refreshing too (org-shares.ts, rule 2). */
  private readonly onDemand: boolean;

  /** `payer`: the organisation whose share the calls are of; null for the appliance's own (a registration). */
  constructor(
    private readonly deps: PermitDeps,
    private readonly bank: BankKey,
    private readonly payer: Payer,
    priority: Priority,
    waits: PermitWaits = {},
  ) {
    this.share = shareOf(deps.limits, priority, deps.scheduledShare);
    this.onDemand = priority === 'on_demand';
    this.firstWaitMs = waits.firstWaitMs ?? FIRST_CALL_WAIT_MS;
    this.inlineWaitMs = waits.inlineWaitMs ?? MAX_INLINE_WAIT_MS;
  }

  async take(): Promise<void> {
    const first = this.calls === 0;
    let waited = 0;
    for (;;) {
      const now = this.deps.clock.now();
      let chance: Chance;
      if (inArrivalMargin(now, this.deps.arrivalMarginMs)) {
        chance = nextChance((await findBudget(this.deps.db.knex, this.bank)) ?? null, this.share, now);
      } else {
        const answer = await takePermit(
          this.deps.db,
          this.bank,
          this.payer,
          this.share,
          this.onDemand,
          now,
          this.deps.limits,
        );
        if (answer.granted) {
          if (this.leavesInTime(now)) {
            this.calls += 1;
            return;
          }
          // The permit waited for the database (SQLite's one writer, busy with the other processes: up to
          // hundreds of ms on a loaded box) past the second's margin, so the call would reach the bank in a
          // second it was not counted in. It is given back (no call was made on it) and another taken.
          await returnPermit(this.deps.db, this.bank, this.payer, this.onDemand, now, this.deps.clock.now());
          this.late += 1;
          continue;
        }
        if (answer.state === null) {
          await ensureBudgetRow(this.deps.db, this.bank, now);
          continue;
        }
        // Refused for the payer's share: the others' shares free up as their calls end, or at the next second.
        chance =
          answer.cause === 'share'
            ? { at: windowsAt(now).second + 1000, cause: 'share', reason: null }
            : nextChance(answer.state, this.share, now);
      }
      const wait = Math.max(chance.at - now, 1);
      if (chance.cause === 'paused' || waited + wait > (first ? this.firstWaitMs : this.inlineWaitMs))
        throw new BudgetWait(chance.at, chance.cause, chance.reason);
      // A few ms of spread, so the processes waiting for the same window do not all write at its first ms.
      const pause = wait + Math.floor(Math.random() * 15);
      await sleep(pause);
      waited += pause;
      this.waitedMs += pause;
    }
  }

  /** Whether a permit counted at `countedAt` is still good now: the same second, before its arrival margin. */
  private leavesInTime(countedAt: number): boolean {
    const now = this.deps.clock.now();
    return (
      windowsAt(now).second === windowsAt(countedAt).second &&
      !inArrivalMargin(now, this.deps.arrivalMarginMs)
    );
  }
}
