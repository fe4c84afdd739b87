import type { Database } from '../db/database.js';
import { syncJobCounts } from '../jobs/jobs.js';
import { revocationCounts } from '../links/consent/revocations.js';
import { pendingDeliveryCount } from '../webhooks/deliveries.js';

export interface QueueDepths {
  sync_jobs_queued: number;
  sync_jobs_running: number;
  webhook_deliveries_pending: number;
  /** Deleted consent links whose grant the bank has not yet confirmed revoked. */
  grant_revocations_pending: number;
  /** Revokes that ran out of attempts: the bank may hold those consents until they expire. */
  grant_revocations_failed: number;
}

export async function queueDepths(db: Database): Promise<QueueDepths> {
  const [jobs, deliveries, revocations] = await Promise.all([
    syncJobCounts(db.reader),
    pendingDeliveryCount(db.reader),
    revocationCounts(db.reader),
  ]);
  return {
    sync_jobs_queued: jobs.queued,
    sync_jobs_running: jobs.running,
    webhook_deliveries_pending: deliveries,
    grant_revocations_pending: revocations.pending,
    grant_revocations_failed: revocations.failed,
  };
}
