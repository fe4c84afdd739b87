import type { Knex } from 'knex';
import type { Database } from '../db/database.js';

/**
 * Rows removed by retention since install, per kind: the scheduler that prunes adds a pass's counts (one
 * upsert per kind that removed something), and every API process serves them on /metrics as the counter
 * `svc_retention_pruned_rows_total{kind}`. The scheduler serves no metrics and may run on another node, so
 * the database is the path between them; reading these few rows at a scrape costs a primary-key scan of a
 * table of about ten rows, not a count over the pruned tables.
 */
export async function addRetentionTotals(
  db: Database,
  counts: Record<string, number>,
  now: number,
): Promise<void> {
  const rows = Object.entries(counts)
    .filter(([, removed]) => removed > 0)
    .map(([kind, removed]) => ({ kind, rows_removed: removed, updated_at: now }));
  if (rows.length === 0) return;
  await db.transaction((trx) =>
    trx('retention_totals')
      .insert(rows)
      .onConflict('kind')
      .merge({
        rows_removed: trx.raw('retention_totals.rows_removed + excluded.rows_removed'),
        updated_at: trx.raw('excluded.updated_at'),
      }),
  );
}

/** The totals, by kind (kinds that never removed a row are absent). */
export async function retentionTotals(db: Knex): Promise<Record<string, number>> {
  const rows: { kind: string; rows_removed: number | string }[] = await db('retention_totals').select(
    'kind',
    'rows_removed',
  );
  return Object.fromEntries(rows.map((row) => [row.kind, Number(row.rows_removed)]));
}
