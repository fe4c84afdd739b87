import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { claimJob, withLeaseRenewal } from '../jobs/jobs.js';
import { runSyncJob, type SyncServices } from './engine.js';

/**
 * `concurrency` workers, each claiming one due sync job at a time with a lease. A killed worker's job is
 * claimed again once its lease runs out, so nothing is lost; a worker that finds nothing to do waits
 * `pollIntervalMs`, and backs off the same way when the database fails.
 */
export async function runSyncWorkers(services: SyncServices, signal: AbortSignal): Promise<void> {
  const { concurrency, leaseSeconds, pollIntervalMs } = services.config.scheduler;
  const workers = Array.from({ length: concurrency }, (_, index) =>
    work(services, `${hostname()}:${process.pid}:${index}`, leaseSeconds * 1000, pollIntervalMs, signal),
  );
  await Promise.all(workers);
}

async function work(
  services: SyncServices,
  owner: string,
  leaseMs: number,
  pollMs: number,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const job = await claimJob(services.db, owner, services.clock.now(), leaseMs);
      if (job) {
        await withLeaseRenewal(
          services.db,
          job,
          leaseMs,
          () => services.clock.now(),
          () => runSyncJob(services, job),
        );
        continue;
      }
    } catch (error) {
      services.logger.error({ err: error, worker: owner }, 'sync worker error');
    }
    await sleep(pollMs, undefined, { signal }).catch(() => undefined);
  }
}

/** Runs due jobs until none is left: what tests and the CLI use to sync now, without a scheduler process. */
export async function drainSyncJobs(services: SyncServices, owner = 'drain'): Promise<number> {
  let count = 0;
  for (;;) {
    const job = await claimJob(
      services.db,
      owner,
      services.clock.now(),
      services.config.scheduler.leaseSeconds * 1000,
    );
    if (!job) return count;
    await runSyncJob(services, job);
    count += 1;
  }
}
