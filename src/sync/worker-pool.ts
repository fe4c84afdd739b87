import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Waker } from '../db/wake.js';
import { SYNC_JOBS_CHANNEL, claimJob, jobFellDue, withLeaseRenewal, type BankOrg } from '../jobs/jobs.js';
import { runSyncJob, type SyncServices } from './engine.js';

/**
 * The workers' jobs by bank, so that no bank holds more than its share of them: a bank that hangs (each
 * call running out the connector's deadline) would otherwise take every worker in turn, and another
 * bank's on-demand refresh, in another organisation, would wait behind it (measured before this cap: 24 s
 * instead of 0.4 s with 4 workers, bench/noisy-neighbour.ts). Each job's organisation is kept too: the spare
 * worker passes over the organisations already running at a bank.
 */
export class BankShares {
  private readonly running = new Map<string, number>();
  private readonly byOrg = new Map<string, BankOrg & { count: number }>();

  constructor(private readonly perBank: number) {}

  /** Banks at their share: claims pass over their jobs. */
  full(): string[] {
    return [...this.running].filter(([, count]) => count >= this.perBank).map(([bank]) => bank);
  }

  /** The banks and organisations with a job running. */
  pairs(): BankOrg[] {
    return [...this.byOrg.values()].map(({ bank, org }) => ({ bank, org }));
  }

  add(bank: string | null, org: string | null = null): void {
    if (bank === null) return;
    this.running.set(bank, (this.running.get(bank) ?? 0) + 1);
    if (org === null) return;
    const key = JSON.stringify([bank, org]);
    const pair = this.byOrg.get(key) ?? { bank, org, count: 0 };
    this.byOrg.set(key, { ...pair, count: pair.count + 1 });
  }

  remove(bank: string | null, org: string | null = null): void {
    if (bank === null) return;
    const count = (this.running.get(bank) ?? 1) - 1;
    if (count > 0) this.running.set(bank, count);
    else this.running.delete(bank);
    if (org === null) return;
    const key = JSON.stringify([bank, org]);
    const pair = this.byOrg.get(key);
    if (pair && pair.count > 1) this.byOrg.set(key, { ...pair, count: pair.count - 1 });
    else this.byOrg.delete(key);
  }
}

/**
 * `concurrency` workers, each claiming one due sync job at a time with a lease. A killed worker's job is
 * claimed again once its lease runs out, so nothing is lost; a worker that finds nothing to do waits
 * `pollIntervalMs`, and backs off the same way when the database fails. At most `perBankConcurrency` of
 * them work on scheduled syncs of one bank at once, and as many on its on-demand refreshes; the cap is this
 * process's (several scheduler processes each allow it). What they may call of the bank is its budget's
 * (banks/budget/), shared by every process, and within it each organisation's share (org-shares.ts).
 *
 * One more worker, the spare, takes only a person's refresh at a bank whose refreshes hold their share of the
 * workers, of an organisation that has nothing running at that bank in this process: so one tenant's
 * refreshes, holding a bank's places while they wait for the budget (or hang), never queue another tenant's
 * refresh behind them. It takes nothing the other workers would take, so no tenant's first refresh at a
 * hanging bank can hold it before the bank's places are full.
 */
export async function runSyncWorkers(services: SyncServices, signal: AbortSignal): Promise<void> {
  const { concurrency, perBankConcurrency, leaseSeconds, pollIntervalMs, wakeOnCommit } =
    services.config.scheduler;
  const waker = new Waker();
  if (wakeOnCommit)
    waker.listen({
      url: services.config.databaseUrl,
      channel: SYNC_JOBS_CHANNEL,
      onCommit: wakeWhenJobsFallDue(services, waker, signal),
      onError: (error) => services.logger.warn({ err: error.message }, 'sync wake-ups unavailable; polling'),
    });
  // Scheduled syncs and on-demand refreshes hold shares of their own (claimJob).
  const shares = new BankShares(perBankConcurrency);
  const onDemandShares = new BankShares(perBankConcurrency);
  const sharesOf = (job: { refresh_intent_id: string | null }) =>
    job.refresh_intent_id === null ? shares : onDemandShares;
  // Claims one at a time, so that two workers never both take a bank's last place.
  let claiming: Promise<unknown> = Promise.resolve();
  const claim = (owner: string, spare: boolean) => {
    const next = claiming.then(async () => {
      const job = await claimJob(
        services.db,
        owner,
        services.clock.now(),
        leaseSeconds * 1000,
        spare
          ? {
              spareFor: {
                fullBanks: onDemandShares.full(),
                running: [...shares.pairs(), ...onDemandShares.pairs()],
              },
            }
          : { scheduledBanks: shares.full(), onDemandBanks: onDemandShares.full() },
      );
      if (job) sharesOf(job).add(job.bank_id, job.org_id);
      return job;
    });
    claiming = next.catch(() => undefined);
    return next;
  };
  const workers = Array.from({ length: concurrency + 1 }, async (_, index) => {
    const spare = index === concurrency;
    const owner = `${hostname()}:${process.pid}:${spare ? 'spare' : index}`;
    while (!signal.aborted) {
      try {
        const job = await claim(owner, spare);
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
            sharesOf(job).remove(job.bank_id, job.org_id);
          }
          continue;
        }
      } catch (error) {
        services.logger.error({ err: error, worker: owner }, 'sync worker error');
      }
      // The spare looks four times as often: a person waits, and while no bank's refreshes are at their share its
      // claim reads nothing.
      await waker.wait(spare ? pollIntervalMs / 4 : pollIntervalMs, signal);
    }
  });
  await Promise.all(workers);
  await waker.close();
}

/**
 * How often at most the workers look whether a commit made a job due. On SQLite every commit of every
 * process is heard (the WAL watched, db/notify.ts), hundreds a second under load; on Postgres only those of
 * jobs. Each look is one read; 50 ms keeps it under 20 a second and a refresh's wait for a worker near 50 ms
 * rather than the poll's second.
 */
const WAKE_LOOK_GAP_MS = 50;

/**
 * A job's `run_at` is stamped before its transaction commits; a look counts the jobs of the second before
 * its last one too, so one committed that late still wakes the workers (a later commit misses the wake-up and
 * waits for the poll).
 */
const COMMIT_LAG_MS = 1000;

/** The answer to a commit heard: a look at most every `WAKE_LOOK_GAP_MS`, waking the workers if a job fell due. */
function wakeWhenJobsFallDue(services: SyncServices, waker: Waker, signal: AbortSignal): () => void {
  let looking = false;
  let heardAgain = false;
  let lookedAt = -Infinity; // performance.now(): the gap is real time, whatever the clock says
  let lastLook = services.clock.now();
  const look = async () => {
    looking = true;
    try {
      do {
        heardAgain = false;
        await sleep(Math.max(0, lookedAt + WAKE_LOOK_GAP_MS - performance.now()), undefined, { signal });
        lookedAt = performance.now();
        const now = services.clock.now();
        const fellDue = await jobFellDue(services.db.reader, lastLook - COMMIT_LAG_MS, now);
        lastLook = now;
        if (fellDue) waker.wake();
      } while (heardAgain && !signal.aborted);
    } catch (error) {
      if (!signal.aborted)
        services.logger.warn({ err: (error as Error).message }, 'sync wake-up look failed');
    } finally {
      looking = false;
    }
  };
  return () => {
    if (looking) heardAgain = true;
    else if (!signal.aborted) void look();
  };
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
