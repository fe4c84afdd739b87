import type { Knex } from 'knex';
import type { AccountType } from '../banks/connector.js';
import { transition, type Transitions } from '../errors/illegal-transition.js';
import { newId } from '../ids/ids.js';

/*
 * The only code that writes `accounts`. The sync engine creates, refreshes and removes a link's accounts
 * and keeps their movement counters through these functions, named after what happened; an account's
 * status moves by the table below.
 */

export interface AccountRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  link_id: string;
  bank_account_ref: string;
  name: string;
  type: AccountType;
  currency: string;
  last_4: string | null;
  holder_name: string | null;
  balance_available: number | null;
  balance_current: number | null;
  balance_limit: number | null;
  status: 'active' | 'removed';
  removed_from_link: boolean | number;
  removed_at: number | null;
  visible_count: number;
  pending_count: number;
  /** The oldest posted_at that statements (backfill) have covered for this account. */
  backfill_covered_from?: number | null;
  /**
   * The end of the last window whose movements were read; null: never read. Kept in `account_read_marks`
   * (migration 30) and joined in by `accountsOfLink`.
   */
  movements_read_to?: number | null;
  refreshed_at: number | null;
  created_at: number;
  updated_at: number;
}

export type AccountChanges = Partial<Omit<AccountRow, 'id' | 'org_id' | 'mode' | 'link_id' | 'created_at'>>;

export type AccountStatus = AccountRow['status'];
export type AccountChange = 'refresh' | 'remove';

export const ACCOUNT_TRANSITIONS = {
  /** The bank listed the account: it is active, even if an earlier sync missed it. */
  refresh: { from: ['active', 'removed'], to: 'active' },
  /** The bank no longer lists it: kept, with its movements, as removed. */
  remove: { from: ['active'], to: 'removed' },
} as const satisfies Transitions<AccountStatus, AccountChange>;

/** Writes `changes` and the state `change` leads to, if the row's state allows it; else throws. */
async function move(trx: Knex, id: string, change: AccountChange, changes: AccountChanges): Promise<void> {
  const { from, to } = ACCOUNT_TRANSITIONS[change];
  const moved = await trx('accounts')
    .where({ id })
    .whereIn('status', from)
    .update({ ...changes, status: to });
  if (moved > 0) return;
  const row: Pick<AccountRow, 'status'> | undefined = await trx('accounts').where({ id }).first('status');
  if (row) transition('account', ACCOUNT_TRANSITIONS, row.status, change, id);
}

export async function accountsOfLink(db: Knex, linkId: string): Promise<AccountRow[]> {
  return db('accounts')
    .leftJoin('account_read_marks', 'account_read_marks.account_id', 'accounts.id')
    .where({ 'accounts.link_id': linkId })
    .select<AccountRow[]>('accounts.*', 'account_read_marks.movements_read_to');
}

/** Where the account's next incremental window starts (less the overlap): upserted after each read. */
async function markMovementsRead(trx: Knex, id: string, readTo: number | null | undefined): Promise<void> {
  if (readTo == null) return;
  await trx('account_read_marks')
    .insert({ account_id: id, movements_read_to: readTo })
    .onConflict('account_id')
    .merge({ movements_read_to: readTo });
}

/** A link's accounts, oldest first, as an operator reads them (`svc links inspect`). */
export async function accountsOfLinkByAge(db: Knex, linkId: string): Promise<AccountRow[]> {
  return db<AccountRow>('accounts').where({ link_id: linkId }).orderBy('created_at');
}

/** The oldest posted_at statements have covered, by the bank's account ref (null: never backfilled). */
export async function backfillCoverage(db: Knex, linkId: string): Promise<Map<string, number | null>> {
  const rows: Pick<AccountRow, 'bank_account_ref' | 'backfill_covered_from'>[] = await db('accounts')
    .where({ link_id: linkId })
    .select('bank_account_ref', 'backfill_covered_from');
  return new Map(rows.map((row) => [row.bank_account_ref, row.backfill_covered_from ?? null]));
}

/** The link's first active account (else its first removed one), for a sample event about it. */
export async function someAccountOfLink(
  db: Knex,
  linkId: string,
): Promise<Pick<AccountRow, 'id' | 'name' | 'type' | 'currency' | 'last_4' | 'status'> | undefined> {
  return db('accounts')
    .where({ link_id: linkId })
    .orderByRaw("case when status = 'active' then 0 else 1 end")
    .orderBy('created_at')
    .first('id', 'name', 'type', 'currency', 'last_4', 'status');
}

/** The bank listed an account the link did not have: it starts active, with no movements counted yet. */
export async function createAccount(
  trx: Knex,
  input: Omit<
    AccountRow,
    'id' | 'status' | 'removed_from_link' | 'removed_at' | 'visible_count' | 'pending_count'
  >,
): Promise<Omit<AccountRow, 'removed_at' | 'visible_count' | 'pending_count'>> {
  const { movements_read_to: readTo, ...columns } = input;
  const row = { ...columns, id: newId('acc'), status: 'active' as const, removed_from_link: false };
  await trx('accounts').insert(row);
  await markMovementsRead(trx, row.id, readTo);
  return { ...row, movements_read_to: readTo ?? null };
}

/** What the bank says of an account at each sync. */
export type AccountBalances = Pick<
  AccountRow,
  | 'name'
  | 'last_4'
  | 'holder_name'
  | 'balance_available'
  | 'balance_current'
  | 'balance_limit'
  | 'refreshed_at'
  | 'updated_at'
> &
  Partial<Pick<AccountRow, 'movements_read_to'>>;

/** The bank listed the account again: its balances are refreshed, and it is active (again). */
export async function refreshAccount(trx: Knex, id: string, balances: AccountBalances): Promise<void> {
  const { movements_read_to: readTo, ...columns } = balances;
  await move(trx, id, 'refresh', { ...columns, removed_from_link: false, removed_at: null });
  await markMovementsRead(trx, id, readTo);
}

/** The bank no longer lists the account: it is kept as removed. */
export async function removeAccount(trx: Knex, id: string, now: number): Promise<void> {
  await move(trx, id, 'remove', { removed_from_link: true, removed_at: now, updated_at: now });
}

/** The account's movements changed: its visible and pending counters follow. */
export async function recountAccount(
  trx: Knex,
  id: string,
  counts: { visible: number; pending: number },
): Promise<void> {
  await trx('accounts')
    .where({ id })
    .update({ visible_count: counts.visible, pending_count: counts.pending });
}

/** Statements now reach back to `from`: the coverage only grows (a shorter backfill does not shrink it). */
export async function extendBackfillCoverage(trx: Knex, id: string, from: number): Promise<void> {
  const covered: Pick<AccountRow, 'backfill_covered_from'> | undefined = await trx('accounts')
    .where({ id })
    .first('backfill_covered_from');
  await trx('accounts')
    .where({ id })
    .update({ backfill_covered_from: Math.min(covered?.backfill_covered_from ?? from, from) });
}
