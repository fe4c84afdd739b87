import type { Knex } from 'knex';
import type { AccountType } from '../banks/connector.js';

/*
 * The only code that writes `accounts`. The sync engine creates, refreshes and removes a link's accounts
 * and keeps their movement counters through these functions.
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
  refreshed_at: number | null;
  created_at: number;
  updated_at: number;
}

export type AccountChanges = Partial<Omit<AccountRow, 'id' | 'org_id' | 'mode' | 'link_id' | 'created_at'>>;

export async function accountsOfLink(db: Knex, linkId: string): Promise<AccountRow[]> {
  return db<AccountRow>('accounts').where({ link_id: linkId });
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

export async function insertAccount(
  trx: Knex,
  row: Omit<AccountRow, 'removed_at' | 'visible_count' | 'pending_count'>,
): Promise<void> {
  await trx('accounts').insert(row);
}

export async function updateAccount(trx: Knex, id: string, changes: AccountChanges): Promise<void> {
  await trx('accounts').where({ id }).update(changes);
}

/** Statements now reach back to `from`: the coverage only grows (a shorter backfill does not shrink it). */
export async function extendBackfillCoverage(trx: Knex, id: string, from: number): Promise<void> {
  const covered: Pick<AccountRow, 'backfill_covered_from'> | undefined = await trx('accounts')
    .where({ id })
    .first('backfill_covered_from');
  await updateAccount(trx, id, {
    backfill_covered_from: Math.min(covered?.backfill_covered_from ?? from, from),
  });
}
