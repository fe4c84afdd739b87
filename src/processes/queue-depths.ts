import type { Database } from '../db/database.js';

export interface QueueDepths {
  sync_jobs_queued: number;
  sync_jobs_running: number;
  webhook_deliveries_pending: number;
}

export async function queueDepths(db: Database): Promise<QueueDepths> {
  const [jobs, deliveries] = await Promise.all([
    db
      .reader('jobs')
      .select('status')
      .count({ n: '*' })
      .whereIn('status', ['queued', 'running'])
      .groupBy('status'),
    db.reader('webhook_deliveries').count({ n: '*' }).where('status', 'pending'),
  ]);
  const byStatus = new Map(
    (jobs as { status: string; n: number | string }[]).map((row) => [row.status, Number(row.n)]),
  );
  return {
    sync_jobs_queued: byStatus.get('queued') ?? 0,
    sync_jobs_running: byStatus.get('running') ?? 0,
    webhook_deliveries_pending: Number((deliveries[0] as { n: number | string } | undefined)?.n ?? 0),
  };
}
