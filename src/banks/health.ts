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

/*
 * A bank ending consents in bulk: it invalidated every token at once, reset its authorization server, or the
 * appliance's registration was suspended. Each consent link of it would otherwise cost the bank three calls
 * to learn it (a resource call met with 401, a refresh met with `invalid_grant`, a Grant Management query
 * for the reason) and the scheduler would spend them on every due link of the bank in the same minute.
 *
 * So: when the last MASS_LOSS_RUN (3) syncs of a bank in a mode, within MASS_LOSS_WINDOW_MS (1 minute), all
 * ended with `consent_revoked`, each further consent sync of that bank asks Grant Management first (one
 * call) and stops there when the grant has ended; a grant still there syncs as usual. For 10,000 links
 * that is 10,000 calls instead of 30,000, under an hour at the draft's 10 a second instead of almost three.
 * Three, because one revocation is a person's choice and three people of one bank do not revoke within a
 * minute of each other; a wrong guess costs a healthy link one query. Any other outcome among the last three
 * (a success, a bank error) or a quiet minute ends it. The outcomes are shared rows, so every scheduler
 * process sees the same state: before it holds, at most 3 links plus those already in flight (the workers'
 * per-bank share, `scheduler.perBankConcurrency`, in each process) pay the three calls.
 */
export const MASS_LOSS_RUN = 3;
export const MASS_LOSS_WINDOW_MS = 60_000;

/** Whether these outcome codes (newest first) say the bank is ending consents in bulk. Pure. */
export function endingConsentsInBulk(codes: readonly (string | null)[]): boolean {
  return codes.length >= MASS_LOSS_RUN && codes.every((code) => code === 'consent_revoked');
}

/** The bank's latest outcomes within the window, read from the `(bank_id, mode, created_at)` index. */
export async function bankEndingConsents(
  db: Knex,
  bank: { bankId: string; mode: 'live' | 'test' },
  now: number,
): Promise<boolean> {
  const rows: { error_code: string | null }[] = await db('bank_sync_outcomes')
    .where({ bank_id: bank.bankId, mode: bank.mode })
    .where('created_at', '>', now - MASS_LOSS_WINDOW_MS)
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(MASS_LOSS_RUN)
    .select('error_code');
  return endingConsentsInBulk(rows.map((row) => row.error_code));
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
