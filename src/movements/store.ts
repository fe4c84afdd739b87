import type { Knex } from 'knex';
import type { BankMovement, MovementType } from '../banks/connector.js';

/*
 * The only code that writes `movements`: the sync engine reconciles what the bank sent with what is stored
 * (src/sync/reconcile.ts, pure) and hands the plan to `applyPlan`.
 */

export interface MovementRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  link_id: string;
  account_id: string;
  bank_ref: string | null;
  fingerprint: string;
  amount: number;
  currency: string;
  description: string;
  type: MovementType;
  reference_id: string | null;
  /** JSON text of the counterparty, or null. */
  counterparty: string | null;
  posted_at: number;
  transaction_date: string | null;
  pending: boolean | number;
  status: 'normal' | 'duplicated' | 'reversed';
  canonical_id: string | null;
  synced_at: number;
  created_at: number;
}

/** Whose movements a plan writes. */
export interface MovementOwner {
  org_id: string;
  mode: 'live' | 'test';
  link_id: string;
  account_id: string;
}

/** The columns matching reads of a stored movement (src/sync/reconcile.ts); the sync also reads `synced_at`. */
export const MATCH_COLUMNS = [
  'id',
  'bank_ref',
  'fingerprint',
  'amount',
  'currency',
  'description',
  'type',
  'reference_id',
  'posted_at',
  'transaction_date',
  'pending',
  'status',
  'canonical_id',
] as const satisfies readonly (keyof MovementRow)[];

/** A stored movement as matching (src/sync/reconcile.ts) reads it: `pending` a boolean on either engine. */
export type StoredMovement = Omit<Pick<MovementRow, (typeof MATCH_COLUMNS)[number]>, 'pending'> & {
  pending: boolean;
};

export type MovementFields = Omit<StoredMovement, 'id'> & { counterparty: BankMovement['counterparty'] };

/** What reconciling a sync's movements decided: the rows to insert and the changes to stored ones. */
export interface ReconcilePlan {
  inserts: (MovementFields & { id: string })[];
  updates: { id: string; changes: Partial<MovementFields> }[];
  /** Inserted rows that a consumer sees as new (status `normal`). */
  newMovements: number;
}

const INSERT_BATCH = 200;
/** Longer ref lists are not looked up, so the statement's bindings stay bounded; the window still applies. */
const MAX_REFS_LOOKED_UP = 500;

/**
 * The account's rows a sync must match against: those posted since `from`, every pending one, and any with
 * one of the bank's refs (a retroactive booking far back in time).
 */
export async function movementsToMatch(
  trx: Knex,
  accountId: string,
  from: number,
  refs: string[],
): Promise<(StoredMovement & { synced_at: number })[]> {
  const rows: (Omit<StoredMovement, 'pending'> & { pending: boolean | number; synced_at: number })[] =
    await trx('movements')
      .where({ account_id: accountId })
      .where((q) => {
        q.where('posted_at', '>=', from).orWhere('pending', true);
        if (refs.length > 0 && refs.length <= MAX_REFS_LOOKED_UP) q.orWhereIn('bank_ref', refs);
      })
      .select([...MATCH_COLUMNS, 'synced_at']);
  return rows.map((row) => ({ ...row, pending: Boolean(row.pending) }));
}

/**
 * Writes a reconcile plan. Every row written gets its own `synced_at`, strictly above every earlier one of
 * the account (one sync of a link runs at a time, so the account's rows are written in order): a consumer
 * that saves the largest `synced_at` it has read and asks for what came after never misses or repeats a
 * row, even when a page ends in the middle of a sync's rows.
 */
export async function applyPlan(
  trx: Knex,
  owner: MovementOwner,
  plan: ReconcilePlan,
  now: number,
): Promise<void> {
  const [top] = await trx('movements').where({ account_id: owner.account_id }).max({ latest: 'synced_at' });
  let syncedAt = Math.max(now, Number(top?.latest ?? 0) + 1);
  const next = () => syncedAt++;

  const inserts = plan.inserts.map((m) => ({
    ...m,
    counterparty: m.counterparty ? JSON.stringify(m.counterparty) : null,
    ...owner,
    synced_at: next(),
    created_at: now,
  }));
  for (let i = 0; i < inserts.length; i += INSERT_BATCH)
    await trx('movements').insert(inserts.slice(i, i + INSERT_BATCH));
  for (const { id, changes } of plan.updates) {
    const { counterparty, ...rest } = changes;
    await trx('movements')
      .where({ id })
      .update({
        ...rest,
        ...(counterparty !== undefined
          ? { counterparty: counterparty ? JSON.stringify(counterparty) : null }
          : {}),
        synced_at: next(),
      });
  }
}

/** The columns the income snapshot reads of a movement. */
const INCOME_COLUMNS = [
  'id',
  'account_id',
  'amount',
  'currency',
  'description',
  'type',
  'reference_id',
  'counterparty',
  'posted_at',
  'pending',
  'status',
] as const satisfies readonly (keyof MovementRow)[];

export type IncomeMovementRow = Pick<MovementRow, (typeof INCOME_COLUMNS)[number]>;

/** A link's posted, visible movements in one currency booked between `from` and `to`, for the income snapshot. */
export async function movementsForIncome(
  db: Knex,
  linkId: string,
  currency: string,
  from: number,
  to: number,
): Promise<IncomeMovementRow[]> {
  return db('movements')
    .where({ link_id: linkId, currency, status: 'normal', pending: false })
    .whereBetween('posted_at', [from, to])
    .select(INCOME_COLUMNS);
}

/** When the link's oldest stored movement was booked (null: none), so the snapshot knows how far it sees. */
export async function firstPostedAt(db: Knex, linkId: string): Promise<number | null> {
  const first = (await db('movements').where({ link_id: linkId }).min({ first: 'posted_at' }).first()) as
    { first: number | string | null } | undefined;
  return first?.first === null || first?.first === undefined ? null : Number(first.first);
}

/** The account's visible (`normal`) rows, posted and pending: the counters the movement list's total uses. */
export async function movementCounts(
  trx: Knex,
  accountId: string,
): Promise<{ visible: number; pending: number }> {
  const counts: { pending: boolean | number; n: number | string }[] = await trx('movements')
    .where({ account_id: accountId, status: 'normal' })
    .select('pending')
    .count({ n: '*' })
    .groupBy('pending');
  return {
    pending: Number(counts.find((c) => Boolean(c.pending))?.n ?? 0),
    visible: Number(counts.find((c) => !c.pending)?.n ?? 0),
  };
}

/**
 * The newest confirmed movements of some accounts (a link's, for the console), newest first: `limit` from
 * each account through the list's index, then the newest `limit` of those, so the cost is bounded by the
 * number of accounts whatever their history.
 */
export async function recentMovementsOfAccounts(
  db: Knex,
  accountIds: string[],
  limit: number,
): Promise<MovementRow[]> {
  const perAccount = await Promise.all(
    accountIds.map((accountId) =>
      db<MovementRow>('movements')
        .where({ account_id: accountId, status: 'normal', pending: false })
        .orderBy([
          { column: 'posted_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(limit),
    ),
  );
  return perAccount
    .flat()
    .sort((a, b) => Number(b.posted_at) - Number(a.posted_at) || (a.id < b.id ? 1 : -1))
    .slice(0, limit);
}
