import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock } from '../../clock/clock.js';
import type { Database } from '../../db/database.js';
import { limitsOf, type Priority } from './budget.js';
import type { BankBudgetSettings, BudgetDefaults } from './budget-settings.js';
import type { Payer } from './org-shares.js';
import { SyncPermits } from './permits.js';
import { pauseBank, type BankKey } from './store.js';

/*
 * Every call to a consent bank counts against the same budget (docs/open-finance.md, "Bank limits"), not only a
 * sync's: a widget's PAR, the code exchange, a refresh, `client_credentials`, introspection, Brazil's consents
 * API, Grant Management, a revoke, a registration. Every caller runs its bank calls inside
 * `withBankCalls(gate, …)` (the sync engine, the widget's start and callback, the revoke outbox, `svc banks
 * register` and `rotate-certificate`): the one mTLS fetch all of a registration's calls go through
 * (client.ts) asks the gate of the calling context for a permit before each request, and tells it the answer,
 * so a 429/529 with `Retry-After` pauses the bank for every process as a sync's does. AsyncLocalStorage
 * carries the gate through openid-client, which calls the fetch several frames down; a call made outside any
 * gate is not counted here: every caller that reaches a bank opens one (the sync engine too).
 */

export interface BankCallGate {
  /** Before a request leaves: takes a permit, or throws `BudgetWait` (the bank is paused, the budget spent). */
  beforeCall(): Promise<void>;
  /** The bank's answer: a 429/529 with `Retry-After` pauses the bank for everyone. */
  afterAnswer(status: number, retryAfter: string | null): Promise<void>;
}

const gates = new AsyncLocalStorage<BankCallGate>();

/** Runs `work` with its bank calls counted by `gate`. */
export function withBankCalls<T>(gate: BankCallGate, work: () => Promise<T>): Promise<T> {
  return gates.run(gate, work);
}

/** The gate of the calling context, if any (the consent client's fetch asks it). */
export function currentBankCallGate(): BankCallGate | undefined {
  return gates.getStore();
}

type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** `fetch` whose requests each take a permit from the calling context's gate first. */
export function gatedFetch(fetch: Fetch): Fetch {
  return async (url, init) => {
    const gate = gates.getStore();
    if (gate) await gate.beforeCall();
    const response = await fetch(url, init);
    if (gate && (response.status === 429 || response.status === 529))
      await gate.afterAnswer(response.status, response.headers.get('retry-after'));
    return response;
  };
}

/** When a `Retry-After` (delta seconds or an HTTP date, RFC 9110 §10.2.3) says to call again; null if unreadable. */
export function retryAtOf(value: string | null, now: number): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d{1,7}$/.test(trimmed)) return now + Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? null : date;
}

export interface GateServices {
  db: Database;
  clock: Clock;
  config: {
    banks: { budget: BudgetDefaults; budgets: Readonly<Record<string, BankBudgetSettings>> };
  };
}

/**
 * A gate over the bank's shared budget. `prepay()` takes a permit before the call it is for: a widget start
 * takes its first before anything is sent (so a refused start sends nothing), and a sync's connector takes one
 * before each call it makes (its `permit()`); the fetch then spends it. A call nobody prepaid (the
 * `client_credentials` token a Grant Management query needs first, a discovery) takes its own, so every
 * request is counted once. Permits come from `permits` (its waits: `BudgetWait` beyond them).
 */
export class BudgetGate implements BankCallGate {
  private prepaid = 0;

  constructor(
    private readonly services: Pick<GateServices, 'db' | 'clock'>,
    private readonly bank: BankKey,
    readonly permits: SyncPermits,
  ) {}

  /**
   * A gate of its own permits, for work outside a sync: in `payer`'s share (org-shares.ts), at `priority`,
   * waiting at most `waitMs` for any.
   */
  static of(
    services: GateServices,
    bank: BankKey,
    payer: Payer,
    priority: Priority,
    waitMs: number,
  ): BudgetGate {
    const permits = new SyncPermits(
      {
        db: services.db,
        clock: services.clock,
        limits: limitsOf(services.config.banks.budget, services.config.banks.budgets, bank.bankId),
        scheduledShare: services.config.banks.budget.scheduledShare,
        arrivalMarginMs: services.config.banks.budget.arrivalMarginMs,
      },
      bank,
      payer,
      priority,
      { firstWaitMs: waitMs, inlineWaitMs: waitMs },
    );
    return new BudgetGate(services, bank, permits);
  }

  /** Takes a permit now (throws `BudgetWait` when there is none soon): the next call spends it. */
  async prepay(): Promise<void> {
    await this.permits.take();
    this.prepaid += 1;
  }

  async beforeCall(): Promise<void> {
    if (this.prepaid > 0) {
      this.prepaid -= 1;
      return;
    }
    await this.permits.take();
  }

  async afterAnswer(status: number, retryAfter: string | null): Promise<void> {
    const now = this.services.clock.now();
    const until = retryAtOf(retryAfter, now);
    if (until === null || until <= now) return;
    await pauseBank(this.services.db, this.bank, until, `HTTP ${status} with Retry-After`, now);
  }
}
