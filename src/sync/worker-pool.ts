import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { claimJob, withLeaseRenewal } from '../jobs/jobs.js';
import { runSyncJob, type SyncServices } from './engine.js';

/**
 * The workers' jobs by bank, so that no bank holds more than its share of them: a bank that hangs (each
 * call running out the connector's deadline) would otherwise take every worker in turn, and another
 * bank's on-demand refresh, in another organisation, would wait behind it (measured before this cap: 24 s
 * instead of 0.4 s with 4 workers, bench/noisy-neighbour.ts).
 */
export class BankShares {
  private readonly running = new Map<string, number>();

  constructor(private readonly perBank: number) {}

  /** Banks at their share: claims pass over their jobs. */
  full(): string[] {
    return [...this.running].filter(([, count]) => count >= this.perBank).map(([bank]) => bank);
  }

  add(bank: string | null): void {
    if (bank !== null) this.running.set(bank, (this.running.get(bank) ?? 0) + 1);
  }

  remove(bank: string | null): void {
    if (bank === null) return;
    const count = (this.running.get(bank) ?? 1) - 1;
    if (count > 0) this.running.set(bank, count);
    else this.running.delete(bank);
  }
}

/**
 * `concurrency` workers, each claiming one due sync job at a time with a lease. A killed worker's job is
 * claimed again once its lease runs out, so nothing is lost; a worker that finds nothing to do waits
 * `pollIntervalMs`, and backs off the same way when the database fails. At most `perBankConcurrency` of
 * them work on scheduled syncs of one bank at once, and as many on its on-demand refreshes; the cap is this
 * process's (several scheduler processes each allow it). What they may call of the bank is its budget's
 * (banks/budget/), shared by every process.
 */
export async function runSyncWorkers(services: SyncServices, signal: AbortSignal): Promise<void> {
  const { concurrency, perBankConcurrency, leaseSeconds, pollIntervalMs } = services.config.scheduler;
  // Scheduled syncs and on-demand refreshes hold shares of their own (claimJob).
  const shares = new BankShares(perBankConcurrency);
  const onDemandShares = new BankShares(perBankConcurrency);
  const sharesOf = (job: { refresh_intent_id: string | null }) =>
    job.refresh_intent_id === null ? shares : onDemandShares;
  // Claims one at a time, so that two workers never both take a bank's last place.
  let claiming: Promise<unknown> = Promise.resolve();
  const claim = (owner: string) => {
    const next = claiming.then(async () => {
      const job = await claimJob(
        services.db,
        owner,
        services.clock.now(),
        leaseSeconds * 1000,
        shares.full(),
        onDemandShares.full(),
      );
      if (job) sharesOf(job).add(job.bank_id);
      return job;
    });
    claiming = next.catch(() => undefined);
    return next;
  };
  const workers = Array.from({ length: concurrency }, async (_, index) => {
    const owner = `${hostname()}:${process.pid}:${index}`;
    while (!signal.aborted) {
      try {
        const job = await claim(owner);
        if (job) {
          try {
            await withLeaseRenewal(
              services.db,
              job,
              leaseSeconds * 1000,
              () => services.clock.now(),
              () => runSyncJob(services, job),
            );
          } finally {
            sharesOf(job).remove(job.bank_id);
          }
          continue;
        }
      } catch (error) {
        services.logger.error({ err: error, worker: owner }, 'sync worker error');
      }
      await sleep(pollIntervalMs, undefined, { signal }).catch(() => undefined);
    }
  });
  await Promise.all(workers);
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
