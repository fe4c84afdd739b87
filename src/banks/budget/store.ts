import type { Knex } from 'knex';
import type { Database } from '../../db/database.js';
import { runNamed } from '../../db/bound-rows.js';
import { averagedCalls, windowsAt, type BudgetState, type Limits } from './budget.js';

/*
 * `bank_call_budgets`: one row per consent bank and mode, written only here. A permit is one statement that
 * counts the call in the current second and minute if both have room and the bank is not paused, so two
 * processes can never both take a window's last call: on Postgres the row lock makes the second UPDATE wait and
 * re-check its WHERE against the first's result; on SQLite one writer runs at a time. It goes through the
 * volatile writer, as the API's rate buckets do: a permit a crash loses costs one call of one window, and on
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
  updated_at: number;
}

// SET reads the row as it was before the statement on both engines, so each CASE sees the old window.
const PERMIT_SQL = `UPDATE bank_call_budgets SET
    second_count = CASE WHEN second_start = ? THEN second_count + 1 ELSE 1 END,
    second_start = ?,
    minute_count = CASE WHEN minute_start = ? THEN minute_count + 1 ELSE 1 END,
    minute_start = ?,
    updated_at = ?
  WHERE bank_id = ? AND mode = ?
    AND (paused_until IS NULL OR paused_until <= ?)
    AND (CASE WHEN second_start = ? THEN second_count ELSE 0 END) < ?
    AND (CASE WHEN minute_start = ? THEN minute_count ELSE 0 END) < ?
  RETURNING bank_id`;

/** Counts one call to the bank if the share allows it now; false when it does not (or the row is missing). */
export async function takePermit(db: Database, bank: BankKey, share: Limits, now: number): Promise<boolean> {
  const { second, minute } = windowsAt(now);
  const rows = await runNamed(db.volatileWriter, 'bank-permit', PERMIT_SQL, [
    second,
    second,
    minute,
    minute,
    now,
    bank.bankId,
    bank.mode,
    now,
    second,
    share.perSecond,
    minute,
    share.perMinute,
  ]);
  return rows.length === 1;
}

/**
 * Gives back a permit counted at `countedAt` whose call was never made: one less in the second and the minute
 * it was counted in, in whichever of them the row still holds (a later permit may have moved the row on to a
 * new second; that past second no longer limits anything).
 */
export async function returnPermit(db: Database, bank: BankKey, countedAt: number): Promise<void> {
  const { second, minute } = windowsAt(countedAt);
  await runNamed(
    db.volatileWriter,
    'bank-permit-return',
    `UPDATE bank_call_budgets SET
        second_count = CASE WHEN second_start = ? AND second_count > 0 THEN second_count - 1 ELSE second_count END,
        minute_count = CASE WHEN minute_start = ? AND minute_count > 0 THEN minute_count - 1 ELSE minute_count END
      WHERE bank_id = ? AND mode = ?`,
    [second, minute, bank.bankId, bank.mode],
  );
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
