import type { Knex } from 'knex';
import type { Database } from '../../db/database.js';
import { runNamed } from '../../db/bound-rows.js';
import { averagedCalls, type BudgetState, type Limits } from './budget.js';
import {
  decidePermit,
  givenBack,
  readOrgCalls,
  type OrgCalls,
  type Payer,
  type Windows,
} from './org-shares.js';

/*
 * `bank_call_budgets`: one row per consent bank and mode, written only here. A permit counts the call in the
 * current second and minute, and in its organisation's counts (`org_calls`), by one conditional write
 * (`takePermit`). It goes through the volatile writer, as the API's rate buckets do: a permit a crash loses costs one call of one window, and on
 * Postgres it saves the WAL flush of every call (measured in docs/open-finance.md, "Bank limits").
 */

export interface BankKey {
  bankId: string;
  mode: 'live' | 'test';
}

export interface BudgetRow extends BudgetState {
  bank_id: string;
  mode: 'live' | 'test';
  calls_per_sync: number | null;
  /** The interval the scheduler gives the bank's links when stretched (migration 30); null: the configured. */
  interval_minutes?: number | null;
  /** Each organisation's calls in the row's windows (org-shares.ts), JSON; null before this build's first. */
  org_calls?: string | null;
  updated_at: number;
}

/** The row's windows and shares, as a permit reads them. */
const PERMIT_COLUMNS = [
  'second_start',
  'second_count',
  'minute_start',
  'minute_count',
  'paused_until',
  'paused_reason',
  'org_calls',
] as const;

type PermitRow = BudgetState & { org_calls: string | null };

export type PermitAnswer =
  | { granted: true }
  | { granted: false; state: BudgetState; cause: 'second' | 'minute' | 'share' | 'paused' }
  | { granted: false; state: null };

/**
 * How often a permit reads the row again when another process changed it between the read and the write.
 * Ten permits a second at most reach one bank, so two conflicts in a row are already rare; beyond this many the
 * permit is refused for this second like a full one (`share`), and the sync tries again.
 */
const PERMIT_TRIES = 8;

/**
 * Counts one call to the bank for `payer` if the priority's `share` of both windows (of `whole`, the bank's
 * limits), and the payer's share among the organisations calling (org-shares.ts), allow it now and the bank
 * is not paused.
 *
 * The row is read, the decision made in code, and the new counts written by an UPDATE whose WHERE holds the
 * counts it read: another permit in between (from any process, or from the previous release during a rolling
 * upgrade, which counts without shares) changes a count, the UPDATE matches no row, and the permit reads
 * again. Two processes can never both take a window's last call, and each permit is still one write.
 */
export async function takePermit(
  db: Database,
  bank: BankKey,
  payer: Payer,
  share: Limits,
  onDemand: boolean,
  now: number,
  whole: Limits = share,
): Promise<PermitAnswer> {
  for (let tries = 0; ; tries += 1) {
    const row = (await db
      .volatileWriter('bank_call_budgets')
      .where({ bank_id: bank.bankId, mode: bank.mode })
      .first(PERMIT_COLUMNS)) as PermitRow | undefined;
    if (!row) return { granted: false, state: null };
    if (row.paused_until != null && Number(row.paused_until) > now)
      return { granted: false, state: row, cause: 'paused' };
    const decision = decidePermit(row, readOrgCalls(row.org_calls), payer, share, onDemand, now, whole);
    if (!decision.granted) return { granted: false, state: row, cause: decision.cause };
    if (await writeIfUnchanged(db, bank, row, decision.windows, decision.orgs, now)) return { granted: true };
    if (tries + 1 >= PERMIT_TRIES) return { granted: false, state: row, cause: 'share' };
  }
}

/** Writes the row's next counts if its counts are still `read`'s; false when another permit came first. */
async function writeIfUnchanged(
  db: Database,
  bank: BankKey,
  read: Windows,
  next: Windows,
  orgs: Record<string, OrgCalls>,
  now: number,
): Promise<boolean> {
  const rows = await runNamed(db.volatileWriter, 'bank-permit-shares', PERMIT_SQL, [
    next.second_start,
    next.second_count,
    next.minute_start,
    next.minute_count,
    JSON.stringify(orgs),
    now,
    bank.bankId,
    bank.mode,
    read.second_start,
    read.second_count,
    read.minute_start,
    read.minute_count,
    now,
  ]);
  return rows.length === 1;
}

// The pause is checked again: a 429 met by another process between the read and the write stops this permit.
const PERMIT_SQL = `UPDATE bank_call_budgets SET
    second_start = ?, second_count = ?, minute_start = ?, minute_count = ?, org_calls = ?, updated_at = ?
  WHERE bank_id = ? AND mode = ?
    AND second_start = ? AND second_count = ? AND minute_start = ? AND minute_count = ?
    AND (paused_until IS NULL OR paused_until <= ?)
  RETURNING bank_id`;

/**
 * Gives back a permit counted at `countedAt` for `payer` whose call was never made: one less in the second and
 * the minute it was counted in, in whichever of them the row still holds (a later permit may have moved the
 * row on to a new second; that past second no longer limits anything), for the bank and for the payer.
 */
export async function returnPermit(
  db: Database,
  bank: BankKey,
  payer: Payer,
  onDemand: boolean,
  countedAt: number,
  now: number,
): Promise<void> {
  for (let tries = 0; tries < PERMIT_TRIES; tries += 1) {
    const row = (await db
      .volatileWriter('bank_call_budgets')
      .where({ bank_id: bank.bankId, mode: bank.mode })
      .first(PERMIT_COLUMNS)) as PermitRow | undefined;
    if (!row) return;
    const back = givenBack(row, readOrgCalls(row.org_calls), payer, onDemand, countedAt);
    if (await writeIfUnchanged(db, bank, row, back.windows, back.orgs, now)) return;
  }
  // Lost to other permits every time: the minute keeps one call too many, which costs one call, not a limit.
}

/** The bank's row, made empty when it has none yet (its first call, or after a restore). */
export async function ensureBudgetRow(db: Database, bank: BankKey, now: number): Promise<void> {
  await db
    .volatileWriter('bank_call_budgets')
    .insert({ bank_id: bank.bankId, mode: bank.mode, updated_at: now })
    .onConflict(['bank_id', 'mode'])
    .ignore();
}

export async function findBudget(db: Knex, bank: BankKey): Promise<BudgetRow | undefined> {
  return db<BudgetRow>('bank_call_budgets').where({ bank_id: bank.bankId, mode: bank.mode }).first();
}

/** Every bank's row: the capacity warning, the metrics and `svc doctor` read them. */
export async function allBudgets(db: Knex): Promise<BudgetRow[]> {
  return db<BudgetRow>('bank_call_budgets').select('*');
}

/**
 * The bank answered 429 or 529 with `Retry-After`: no process calls it before `until`. A later pause never
 * shortens an earlier one. `reason` is the appliance's words (status and time), never the bank's text.
 */
export async function pauseBank(
  db: Database,
  bank: BankKey,
  until: number,
  reason: string,
  now: number,
): Promise<void> {
  await ensureBudgetRow(db, bank, now);
  await db.transaction((trx) =>
    trx('bank_call_budgets')
      .where({ bank_id: bank.bankId, mode: bank.mode })
      .where((q) => q.whereNull('paused_until').orWhere('paused_until', '<', until))
      .update({ paused_until: until, paused_reason: reason.slice(0, 200), updated_at: now }),
  );
}

/** A sync of the bank finished having made `calls` calls: the average the capacity warning reads moves. */
export async function recordSyncCalls(
  db: Database,
  bank: BankKey,
  calls: number,
  now: number,
): Promise<void> {
  await db.transaction(async (trx) => {
    const row = await trx<BudgetRow>('bank_call_budgets')
      .where({ bank_id: bank.bankId, mode: bank.mode })
      .first('calls_per_sync');
    if (!row) return;
    await trx('bank_call_budgets')
      .where({ bank_id: bank.bankId, mode: bank.mode })
      .update({
        calls_per_sync: averagedCalls(row.calls_per_sync === null ? null : Number(row.calls_per_sync), calls),
        updated_at: now,
      });
  });
}

/**
 * The scheduler stretched (or stopped stretching: null) the interval of the bank's links: the sync engine
 * schedules each link's next sync by it, and `svc status` and the console show it.
 */
export async function setBankInterval(
  db: Database,
  bank: BankKey,
  minutes: number | null,
  now: number,
): Promise<void> {
  // Written only when it changes: the scheduler asks every tick.
  if ((await bankInterval(db.knex, bank)) === minutes) return;
  await db
    .knex('bank_call_budgets')
    .where({ bank_id: bank.bankId, mode: bank.mode })
    .update({ interval_minutes: minutes, updated_at: now });
}

/** The bank's stretched interval in minutes, or null when its links keep the configured one. */
export async function bankInterval(db: Knex, bank: BankKey): Promise<number | null> {
  const row = await db('bank_call_budgets')
    .where({ bank_id: bank.bankId, mode: bank.mode })
    .first('interval_minutes');
  return row?.interval_minutes == null ? null : Number(row.interval_minutes);
}
