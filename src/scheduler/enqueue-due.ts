import type { Database } from '../db/database.js';
import type { Knex } from 'knex';
import { linksWithActiveSync, queueSyncs, syncJob } from '../jobs/jobs.js';
import { markScheduled } from '../links/link-states.js';
import { dueLinkBatch } from '../links/store.js';
import { winTick } from './housekeeping.js';
import { stretchKey, type BankStretch } from './stretch.js';

type DueLink = { id: string; org_id: string; bank_id: string; mode: 'live' | 'test' };

/**
 * Most due links one tick enqueues; a backlog (after the scheduler was down) drains over a few ticks. The
 * workers cannot sync more than this in a minute anyway (100,000 links every 4 hours need about 420 a
 * minute), and a tick stays under a second: 5,000 links, set-based (one statement each to pick, check, queue
 * and mark), take 0.50 s on SQLite and 0.56 s on Postgres here (bench/sync.ts, "catch-up", medians of 3 with
 * the 2 cores' load at about 4), where row by row in chunks of 500 they took 0.62 s and 1.04 s. What is left
 * is the database's own work: 5,000 rows into jobs (5 indexes, 3 foreign-key checks each) and 5,000 link
 * rows rewritten (`next_sync_at` is indexed, so each update adds an entry to all 6 of links' indexes).
 */
const MAX_PER_TICK = 5_000;

/**
 * Up to MAX_PER_TICK due links without a sync under way, in the order they fell due. Links whose sync is
 * still under way (workers behind) are passed over; at most four batches' worth are looked at, so a tick
 * stays bounded when many are. Of a bank whose budget is short (`stretched`), no more than its share can sync
 * in a tick: the stalest; the others stay due for the next ticks.
 */
async function dueWithoutSync(
  db: Database,
  trx: Knex,
  now: number,
  stretched: ReadonlyMap<string, BankStretch>,
): Promise<DueLink[]> {
  const due: DueLink[] = [];
  const taken = new Map<string, number>();
  const room = (link: DueLink) => {
    const key = stretchKey(link.bank_id, link.mode);
    const stretch = stretched.get(key);
    if (!stretch) return true;
    const count = taken.get(key) ?? 0;
    if (count >= stretch.perTick) return false;
    taken.set(key, count + 1);
    return true;
  };
  let after: { nextSyncAt: number; id: string } | null = null;
  for (let looked = 0; due.length < MAX_PER_TICK && looked < 4 * MAX_PER_TICK;) {
    const batch = await dueLinkBatch(trx, now, MAX_PER_TICK, after);
    if (batch.length === 0) break;
    looked += batch.length;
    const busy = await linksWithActiveSync(
      trx,
      db.engine,
      batch.map((link) => link.id),
    );
    for (const link of batch)
      if (!busy.has(link.id) && due.length < MAX_PER_TICK && room(link)) due.push(link);
    const last = batch[batch.length - 1]!;
    after = { nextSyncAt: Number(last.next_sync_at), id: last.id };
    if (batch.length < MAX_PER_TICK) break;
  }
  return due;
}

/**
 * One scheduler tick: the links that are active, not paused and due get a sync job, and their
 * `next_sync_at` moves one interval on (their bank's stretched interval when its budget is short). Only the scheduler that wins the tick does it, so two schedulers
 * never enqueue a tick twice; links with a sync already queued or running are skipped, and so is a link
 * whose on-demand sync was queued while the tick ran (it keeps its due time, and its sync runs anyway).
 * Returns how many links it queued.
 */
export async function enqueueDueLinks(
  db: Database,
  now: number,
  intervalMs: number,
  tickPeriodMs = 60_000,
  tickName = 'enqueue-due-links',
  stretched: ReadonlyMap<string, BankStretch> = new Map(),
): Promise<number> {
  // Half the cron's period: of two schedulers firing the same tick a few ms apart, one wins.
  if (!(await winTick({ db }, tickName, now, tickPeriodMs / 2))) return 0;
  return db.transaction(async (trx) => {
    const due = await dueWithoutSync(db, trx, now, stretched);
    const queued = await queueSyncs(
      trx,
      db.engine,
      due.map((link) => syncJob(link, { refresh_type: 'scheduled', interactive: false }, now)),
    );
    const byInterval = new Map<number, string[]>();
    for (const link of due) {
      if (!queued.has(link.id)) continue;
      const interval = stretched.get(stretchKey(link.bank_id, link.mode))?.intervalMs ?? intervalMs;
      byInterval.set(interval, [...(byInterval.get(interval) ?? []), link.id]);
    }
    for (const [interval, ids] of byInterval) await markScheduled(trx, db.engine, ids, now + interval, now);
    return queued.size;
  });
}
