import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { envName } from '../../src/config/load-config.js';
import type { Database } from '../../src/db/database.js';
import type { SupervisorState } from '../../src/processes/status.js';
import { loadSecretBox } from '../../src/secrets/master-key-file.js';
import type { Test } from 'tap';
import {
  setTimeLimit,
  HANG_GUARD_MS,
  RAISED_LIMITS,
  engines,
  request,
  type RequestOptions,
  type TestResponse,
} from './harness.js';

/**
 * How many `kill -9`s (or seconds of traffic) a crash test does: CRASH_ROUNDS from the environment (the soak
 * run sets about 100), otherwise the file's default, which `npm test` keeps small enough to finish with a
 * wide margin on a loaded 2-core machine.
 */
export function crashRounds(fallback: number): number {
  const raw = process.env.CRASH_ROUNDS;
  if (raw === undefined || raw === '') return fallback;
  const rounds = Number(raw);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`CRASH_ROUNDS must be a positive integer, got "${raw}"`);
  return rounds;
}

/**
 * Sets the file's time limit (tap's, which the runner enforces) from its work: for each engine, `fixedMs`
 * for start-up and the final checks, plus `perRoundMs` per round. Each file's `perRoundMs` is about ten
 * times what a round takes on an idle 2-core machine, so the limit holds on a loaded one and still ends a
 * hung file in minutes.
 */
export function timeLimitForRounds(t: Test, rounds: number, perRoundMs: number, fixedMs: number): void {
  setTimeLimit(t, engines().length * (fixedMs + rounds * perRoundMs));
}

/**
 * `svc serve` settings for being killed over and over: restart a dead child at once and never call it a
 * crash loop (tap's process tracker is kept out of every process a test starts: untracked-children.ts).
 */
export const CRASH_SERVE_ENV: Record<string, string> = {
  SVC_SUPERVISOR_RESTART_DELAYS_MS: '[0]',
  SVC_SUPERVISOR_CRASH_LOOP_RESTARTS: '100000',
  SVC_LOG_LEVEL: 'warn',
};

/** The harness's raised rate limits as the environment of a real process, for keys without limits of their own. */
export const RAISED_LIMITS_ENV: Record<string, string> = Object.fromEntries(
  Object.entries(RAISED_LIMITS).flatMap(([group, limit]) => [
    [envName(['rateLimits', group, 'perMinute']), String(limit.perMinute)],
    [envName(['rateLimits', group, 'burst']), String(limit.burst)],
  ]),
);

/** A scheduler that ticks every second and takes over a dead worker's job after 2 s. */
export const FAST_SCHEDULER_ENV: Record<string, string> = {
  SVC_SCHEDULER_CRON: '* * * * * *',
  SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
  SVC_SCHEDULER_LEASE_SECONDS: '2',
};

/** A dispatcher that polls every 100 ms and takes over a dead dispatcher's deliveries after 1 s. */
export const FAST_DISPATCHER_ENV: Record<string, string> = {
  SVC_DISPATCHER_LEASE_SECONDS: '1',
  SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
};

export function randomBetween(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** The pid of the running `role` child of the `svc serve` whose pid is `servePid`, from its state file. */
export function childPid(home: string, servePid: number, role: string): number | null {
  try {
    const state = JSON.parse(
      readFileSync(join(home, 'run', `serve-${servePid}.json`), 'utf8'),
    ) as SupervisorState;
    const child = state.children.find((candidate) => candidate.role === role);
    return child?.status === 'running' ? child.pid : null;
  } catch {
    return null; // not written yet, or being rewritten
  }
}

/** Waits for a running `role` child other than `previous` (the one just killed); throws after `timeoutMs`. */
export async function nextChildPid(
  home: string,
  servePid: number,
  role: string,
  previous: number | null,
  timeoutMs = HANG_GUARD_MS,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pid = childPid(home, servePid, role);
    if (pid !== null && pid !== previous) return pid;
    if (Date.now() > deadline)
      throw new Error(`no new ${role} child of svc serve ${servePid} within ${timeoutMs} ms`);
    await sleep(20);
  }
}

/**
 * What concurrent clients saw while processes were being killed: a count per status, how many requests got
 * no answer (the connection was refused or cut: the outcome is unknown), and every 5xx, kept whole.
 */
export class TrafficLog {
  readonly statuses = new Map<number, number>();
  readonly serverErrors: string[] = [];
  /** Answers whose text names SQLite's lock errors, whatever their status. */
  readonly lockErrors: string[] = [];
  connectionErrors = 0;
  /** Requests sent and not yet answered or failed: how many a kill at this moment cuts off. */
  inFlight = 0;
  /** Milliseconds each answered request took. */
  readonly durations: number[] = [];

  /** `request` that returns null instead of throwing when the connection fails; contract violations still throw. */
  async send(
    baseUrl: string,
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<TestResponse | null> {
    let response: TestResponse;
    this.inFlight += 1;
    const started = Date.now();
    try {
      response = await request(baseUrl, method, path, options);
      this.durations.push(Date.now() - started);
    } catch (error) {
      // fetch reports a refused or cut connection as a TypeError ("fetch failed", "terminated").
      if (error instanceof TypeError) {
        this.connectionErrors += 1;
        return null;
      }
      throw error;
    } finally {
      this.inFlight -= 1;
    }
    this.statuses.set(response.status, (this.statuses.get(response.status) ?? 0) + 1);
    if (response.status >= 500)
      this.serverErrors.push(`${method} ${path} → ${response.status} ${response.text}`);
    if (/SQLITE_BUSY|SQLITE_LOCKED|database is locked/i.test(response.text))
      this.lockErrors.push(`${method} ${path} → ${response.status} ${response.text}`);
    return response;
  }

  get answered(): number {
    return [...this.statuses.values()].reduce((sum, n) => sum + n, 0);
  }

  summary(): string {
    const statuses = [...this.statuses.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, n]) => `${status}×${n}`)
      .join(' ');
    const sorted = [...this.durations].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    return `${this.answered} answered (${statuses}; ${at(0.5)}/${at(0.95)}/${at(1)} ms p50/p95/max), ${this.connectionErrors} without an answer`;
  }
}

/** Lines of a JSON-lines log that name SQLite's lock errors. */
export function lockErrorLines(text: string): string[] {
  return text.split('\n').filter((line) => /SQLITE_BUSY|SQLITE_LOCKED|database is locked/i.test(line));
}

interface EventRow {
  id: string;
  type: string;
  link_id: string | null;
  data: string;
}

function countBy<T>(items: T[], key: (item: T) => string | null | undefined): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) {
    const k = key(item);
    if (k !== null && k !== undefined) counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return counts;
}

/**
 * The store's cross-table rules, each of which a half-written transaction would break. Every state change
 * writes its events, and each event one delivery per subscribed endpoint, in its own transaction, so:
 * no delivery without its event and endpoint; a link has its sealed credentials, its `link.created` and its
 * first (`full`) refresh intent; a `link.created` belongs to a link that exists or was deleted (with one
 * `link.deleted`); an intent has its `refresh_intent.created`, its job and, once finished, one final event;
 * an account has one `account.created` and counters that match its movements; a link's successful syncs
 * match its `link.refreshed` events; and no movement is stored twice. Returns the broken rules, one line
 * each (empty when all hold). Assumes no `sandbox/events/fire` of the types it counts.
 */
export async function storeProblems(db: Database, home: string): Promise<string[]> {
  const problems: string[] = [];
  const secrets = loadSecretBox({ masterKeyFile: join(home, 'master.key'), masterKey: '' });
  const k = db.knex;
  const links: {
    id: string;
    credentials_encrypted: string;
    sync_successes: number;
    accounts_count: number;
  }[] = await k('links').select('id', 'credentials_encrypted', 'sync_successes', 'accounts_count');
  const events: EventRow[] = await k('events').select('id', 'type', 'link_id', 'data');
  const deliveries: { id: string; event_id: string; endpoint_id: string; event_type: string }[] = await k(
    'webhook_deliveries',
  ).select('id', 'event_id', 'endpoint_id', 'event_type');
  const endpointIds = new Set(
    (await k('webhook_endpoints').select('id')).map((row: { id: string }) => row.id),
  );
  const intents: { id: string; link_id: string; status: string; refresh_type: string }[] = await k(
    'refresh_intents',
  ).select('id', 'link_id', 'status', 'refresh_type');
  const jobs: { id: string; refresh_intent_id: string | null }[] = await k('jobs').select(
    'id',
    'refresh_intent_id',
  );
  const accounts: {
    id: string;
    link_id: string;
    status: string;
    visible_count: number;
    pending_count: number;
  }[] = await k('accounts').select('id', 'link_id', 'status', 'visible_count', 'pending_count');
  const movementCounts: { account_id: string; pending: boolean | number; n: number | string }[] = await k(
    'movements',
  )
    .where({ status: 'normal' })
    .select('account_id', 'pending')
    .count({ n: '*' })
    .groupBy('account_id', 'pending');
  const repeatedRefs = (await k('movements')
    .whereNotNull('bank_ref')
    .select('account_id', 'bank_ref')
    .count({ n: '*' })
    .groupBy('account_id', 'bank_ref')
    .having(k.raw('count(*) > 1'))) as unknown as {
    account_id: string;
    bank_ref: string;
    n: number | string;
  }[];

  const eventsById = new Map(events.map((event) => [event.id, event]));
  const linkIds = new Set(links.map((link) => link.id));
  const dataId = (event: EventRow) => (JSON.parse(event.data) as { id?: string }).id ?? null;
  const ofType = (type: string) => events.filter((event) => event.type === type);
  const createdByLink = countBy(ofType('link.created'), (event) => event.link_id);
  const deletedByLink = countBy(ofType('link.deleted'), (event) => event.link_id);
  const refreshedByLink = countBy(ofType('link.refreshed'), (event) => event.link_id);

  const seenPairs = new Set<string>();
  for (const delivery of deliveries) {
    const event = eventsById.get(delivery.event_id);
    if (!event) problems.push(`delivery ${delivery.id} has no event ${delivery.event_id}`);
    else if (event.type !== delivery.event_type)
      problems.push(`delivery ${delivery.id} says ${delivery.event_type}, its event is ${event.type}`);
    if (!endpointIds.has(delivery.endpoint_id))
      problems.push(`delivery ${delivery.id} has no endpoint ${delivery.endpoint_id}`);
    const pair = `${delivery.event_id}/${delivery.endpoint_id}`;
    if (seenPairs.has(pair)) problems.push(`event and endpoint ${pair} have two deliveries`);
    seenPairs.add(pair);
  }

  const fullIntents = countBy(
    intents.filter((intent) => intent.refresh_type === 'full'),
    (intent) => intent.link_id,
  );
  for (const link of links) {
    try {
      const credentials = JSON.parse(secrets.open(link.credentials_encrypted, link.id)) as { rut?: string };
      if (!credentials.rut) problems.push(`link ${link.id} has sealed credentials without a RUT`);
    } catch (error) {
      problems.push(`link ${link.id}: credentials do not open (${(error as Error).message})`);
    }
    if (createdByLink.get(link.id) !== 1)
      problems.push(`link ${link.id} has ${createdByLink.get(link.id) ?? 0} link.created events`);
    if (deletedByLink.has(link.id)) problems.push(`link ${link.id} exists but has a link.deleted event`);
    if (!fullIntents.has(link.id)) problems.push(`link ${link.id} has no first (full) refresh intent`);
    if ((refreshedByLink.get(link.id) ?? 0) !== link.sync_successes)
      problems.push(
        `link ${link.id}: ${link.sync_successes} successful syncs, ${refreshedByLink.get(link.id) ?? 0} link.refreshed events`,
      );
    if (link.sync_successes > 0) {
      const active = accounts.filter((a) => a.link_id === link.id && a.status === 'active').length;
      if (active !== link.accounts_count)
        problems.push(`link ${link.id} counts ${link.accounts_count} accounts, has ${active} active`);
    }
  }
  for (const [linkId, n] of createdByLink) {
    if (!linkIds.has(linkId) && deletedByLink.get(linkId) !== 1)
      problems.push(`link.created ×${n} for ${linkId}, which is gone without one link.deleted`);
  }
  for (const [linkId, n] of deletedByLink) {
    if (n !== 1) problems.push(`link ${linkId} has ${n} link.deleted events`);
    if (!createdByLink.has(linkId)) problems.push(`link.deleted for ${linkId}, which was never created`);
  }

  const intentIds = new Set(intents.map((intent) => intent.id));
  const intentEvents = (type: string) => countBy(ofType(type), dataId);
  const created = intentEvents('refresh_intent.created');
  const succeeded = intentEvents('refresh_intent.succeeded');
  const failed = intentEvents('refresh_intent.failed');
  const jobsByIntent = countBy(jobs, (job) => job.refresh_intent_id);
  for (const intent of intents) {
    if (created.get(intent.id) !== 1)
      problems.push(`intent ${intent.id} has ${created.get(intent.id) ?? 0} refresh_intent.created events`);
    if (jobsByIntent.get(intent.id) !== 1)
      problems.push(`intent ${intent.id} has ${jobsByIntent.get(intent.id) ?? 0} jobs`);
    const finals = { succeeded: succeeded.get(intent.id) ?? 0, failed: failed.get(intent.id) ?? 0 };
    const expected = {
      succeeded: intent.status === 'succeeded' ? 1 : 0,
      failed: intent.status === 'failed' ? 1 : 0,
    };
    if (finals.succeeded !== expected.succeeded || finals.failed !== expected.failed)
      problems.push(`intent ${intent.id} is ${intent.status} with final events ${JSON.stringify(finals)}`);
  }
  for (const event of events.filter((e) => e.type.startsWith('refresh_intent.'))) {
    const id = dataId(event);
    if (id && !intentIds.has(id) && !deletedByLink.has(event.link_id ?? ''))
      problems.push(
        `${event.type} ${event.id} names intent ${id}, which is gone while its link is not deleted`,
      );
  }

  const accountCreated = countBy(ofType('account.created'), dataId);
  const counted = new Map<string, { visible: number; pending: number }>();
  for (const row of movementCounts) {
    const entry = counted.get(row.account_id) ?? { visible: 0, pending: 0 };
    if (row.pending) entry.pending += Number(row.n);
    else entry.visible += Number(row.n);
    counted.set(row.account_id, entry);
  }
  for (const account of accounts) {
    if (accountCreated.get(account.id) !== 1)
      problems.push(
        `account ${account.id} has ${accountCreated.get(account.id) ?? 0} account.created events`,
      );
    const actual = counted.get(account.id) ?? { visible: 0, pending: 0 };
    if (actual.visible !== account.visible_count || actual.pending !== account.pending_count)
      problems.push(
        `account ${account.id} counts ${account.visible_count}+${account.pending_count} movements, has ${actual.visible}+${actual.pending}`,
      );
  }
  for (const row of repeatedRefs)
    problems.push(`account ${row.account_id} stores bank_ref ${row.bank_ref} ${Number(row.n)} times`);
  return problems;
}
