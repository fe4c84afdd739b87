import type { Knex } from 'knex';

export type BankHealth = 'up' | 'degraded' | 'down';

/** Institution health counts the outcomes of this window; retention keeps at least this much. */
export const HEALTH_WINDOW_MS = 60 * 60_000;
/** Only failures that say the bank itself is failing count; rejected credentials say nothing about it. */
const BANK_SIDE = ['bank_unavailable', 'timeout'];

/** Share of bank-side failures among the last hour's syncs of a bank: up below 20%, down from 80%. */
export function healthOf(total: number, bankFailures: number): BankHealth {
  if (total < 3) return bankFailures > 0 && bankFailures === total ? 'degraded' : 'up';
  const ratio = bankFailures / total;
  return ratio >= 0.8 ? 'down' : ratio >= 0.2 ? 'degraded' : 'up';
}

export async function bankHealth(
  db: Knex,
  mode: 'live' | 'test',
  now: number,
): Promise<Map<string, BankHealth>> {
  const rows: { bank_id: string; total: number | string; failures: number | string }[] = await db(
    'bank_sync_outcomes',
  )
    .where({ mode })
    .where('created_at', '>', now - HEALTH_WINDOW_MS)
    .groupBy('bank_id')
    .select('bank_id')
    .count({ total: '*' })
    .select(
      db.raw(
        `sum(case when error_code in (${BANK_SIDE.map(() => '?').join(', ')}) then 1 else 0 end) as failures`,
        BANK_SIDE,
      ),
    );
  return new Map(rows.map((row) => [row.bank_id, healthOf(Number(row.total), Number(row.failures))]));
}

/** One sync's outcome, in the sync's transaction: the health above is counted from these rows. */
export async function recordSyncOutcome(
  trx: Knex,
  outcome: { bankId: string; mode: 'live' | 'test'; errorCode: string | null; now: number },
): Promise<void> {
  await trx('bank_sync_outcomes').insert({
    bank_id: outcome.bankId,
    mode: outcome.mode,
    succeeded: outcome.errorCode === null,
    error_code: outcome.errorCode,
    created_at: outcome.now,
  });
}

/**
 * Retention: removes up to `limit` outcomes older than `keepMs` (never inside the health window), oldest
 * first, keeping each bank's latest outcome in each mode (only an outcome a newer one of its bank follows goes). Walks `bank_sync_outcomes_created_at_idx`; the
 * latest-outcome check reads the `(bank_id, mode, created_at)` index.
 */
export async function pruneSyncOutcomes(
  trx: Knex,
  now: number,
  keepMs: number,
  limit: number,
): Promise<number> {
  const cutoff = now - Math.max(keepMs, HEALTH_WINDOW_MS);
  const ids = trx('bank_sync_outcomes as o')
    .select('o.id')
    .where('o.created_at', '<', cutoff)
    .whereExists(
      trx('bank_sync_outcomes as newer')
        .select(trx.raw('1'))
        .whereRaw('newer.bank_id = o.bank_id')
        .whereRaw('newer.mode = o.mode')
        .whereRaw('newer.created_at > o.created_at'),
    )
    .orderBy([{ column: 'o.created_at' }, { column: 'o.id' }])
    .limit(limit);
  return trx('bank_sync_outcomes').whereIn('id', ids).delete();
}
