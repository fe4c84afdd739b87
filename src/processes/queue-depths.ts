import type { Database } from '../db/database.js';
import { syncJobCounts } from '../jobs/jobs.js';
import { pendingDeliveryCount } from '../webhooks/deliveries.js';

export interface QueueDepths {
  sync_jobs_queued: number;
  sync_jobs_running: number;
  webhook_deliveries_pending: number;
}

export async function queueDepths(db: Database): Promise<QueueDepths> {
  const [jobs, deliveries] = await Promise.all([syncJobCounts(db.reader), pendingDeliveryCount(db.reader)]);
  return {
    sync_jobs_queued: jobs.queued,
    sync_jobs_running: jobs.running,
    webhook_deliveries_pending: deliveries,
  };
}
