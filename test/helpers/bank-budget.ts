import { setTimeout as sleep } from 'node:timers/promises';
import { ManualClock } from '../../src/clock/clock.js';
import type { Database } from '../../src/db/database.js';
import { insertJobs, syncJob } from '../../src/jobs/jobs.js';
import type { BankFixture } from './consent-bank.js';

/*
 * What the banks' limits are checked by (docs/open-finance.md, "Bank limits"): the calls the simulated bank
 * logged, counted by the windows of its own clock, which are real seconds and minutes.
 */

/** The bank counts in real seconds and minutes, so the appliance's clock is the real one. */
export class WallClock extends ManualClock {
  override now(): number {
    return Date.now();
  }
}

/** The calls the budget is about (resources, tokens, Grant Management): not discovery nor registration. */
const BANK_CALLS = new Set(['resources', 'token', 'grant_management']);

/** The budgeted calls the bank logged since `from` (its clock, milliseconds). */
export function bankCalls(fixture: BankFixture, from: number) {
  return fixture.bank.callLog().filter((c) => BANK_CALLS.has(c.kind) && c.at >= from);
}

/** The most calls in one clock window of `ms` (a second, a minute), as the bank counts them. */
export function busiest(calls: { at: number }[], ms: number): number {
  const counts = new Map<number, number>();
  for (const call of calls)
    counts.set(Math.floor(call.at / ms), (counts.get(Math.floor(call.at / ms)) ?? 0) + 1);
  return Math.max(0, ...counts.values());
}

export function minuteOf(at: number): number {
  return at - (at % 60_000);
}

/** Waits for the next minute when less than `ms` of this one is left. */
export async function untilMinuteHasLeft(ms: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < ms) await sleep(left + 20);
}

/** Scheduled syncs of the links, as the tick queues them (no refresh intent); their job ids. */
export async function queueScheduled(db: Database, links: string[]): Promise<string[]> {
  const rows = await db.knex('links').whereIn('id', links).select('id', 'org_id');
  const jobs = rows.map((link) =>
    syncJob(link, { refresh_type: 'scheduled', interactive: false }, Date.now()),
  );
  await db.transaction((trx) => insertJobs(trx, jobs));
  return jobs.map((job) => job.id);
}

/** The links' scheduled syncs not done yet. */
export async function scheduledLeft(db: Database, links: string[]): Promise<number> {
  const [row] = await db
    .knex('jobs')
    .whereIn('link_id', links)
    .whereNull('refresh_intent_id')
    .whereNot('status', 'succeeded')
    .count({ n: '*' });
  return Number((row as { n: number | string }).n);
}
