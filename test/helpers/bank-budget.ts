import type { Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { ManualClock } from '../../src/clock/clock.js';
import { loadConfig } from '../../src/config/load-config.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { insertJobs, syncJob } from '../../src/jobs/jobs.js';
import { silentLogger } from '../../src/logging/logger.js';
import { buildServices } from '../../src/processes/services.js';
import { installedHome } from './cli.js';
import { consentLink, registerApp, startBank, type BankFixture } from './consent-bank.js';
import type { EngineName } from './harness.js';

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

/**
 * The settings of the processes under a bank budget: the budget, two workers a process of which the bank's
 * scheduled syncs may hold one and its refreshes one, and no consent bank of the API's own (the bank is the
 * test's: the API must not serve, and register the appliance with, one of its own).
 */
export function budgetEnv(budget: { perSecond: number; perMinute: number; scheduledShare: number }) {
  return {
    SVC_LOG_LEVEL: 'info',
    SVC_BANKS_BUDGET_PER_SECOND: String(budget.perSecond),
    SVC_BANKS_BUDGET_PER_MINUTE: String(budget.perMinute),
    SVC_BANKS_BUDGET_SCHEDULED_SHARE: String(budget.scheduledShare),
    SVC_SCHEDULER_CONCURRENCY: '2',
    SVC_SCHEDULER_PER_BANK_CONCURRENCY: '1',
    SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
    SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
    SVC_SANDBOX_CONSENT_BANK_ENABLED: 'false',
  };
}

/**
 * An installed home on `engine` registered with the simulated bank (which runs in the test process), with
 * the database and services the test reads it through; `newLink` makes a consent link whose first sync is
 * taken away and whose next scheduled one is a day off, so each test queues the syncs it wants.
 */
export async function budgetAppliance(t: Test, engine: EngineName, actions: string[]) {
  const installed = await installedHome(t, engine);
  const fixture = await startBank(t, engine);
  const config = loadConfig({ home: installed.home, env: {} });
  const db = openDatabase({ url: config.databaseUrl });
  const clock = new WallClock(Date.now());
  const services = buildServices(config, 'test', { db, clock, logger: silentLogger });
  t.teardown(async () => {
    await services.consentClients.close();
    await db.close();
  });
  const registration = await registerApp(fixture, { db, services });
  const newLink = async (orgId: string, rut: string): Promise<string> => {
    const { linkId } = await consentLink(fixture, { db, clock, services }, registration, orgId, rut, actions);
    await db.knex('refresh_intents').where({ link_id: linkId }).delete(); // its job goes with it
    await db
      .knex('links')
      .where({ id: linkId })
      .update({ next_sync_at: Date.now() + 86_400_000 });
    return linkId;
  };
  return { installed, fixture, config, db, clock, newLink };
}
