import type { Knex } from 'knex';
import { newId } from '../ids/ids.js';
import { claimOne } from '../db/claims.js';
import type { Database, Engine } from '../db/database.js';
import { notifyOnCommit } from '../db/notify.js';
import { boundList, boundRows, runRaw } from '../db/bound-rows.js';
import type { Transitions } from '../errors/illegal-transition.js';
import { markLinkQueued } from '../links/link-states.js';
import { createIntent } from '../refresh/intents.js';
import type { RefreshType } from '../refresh/store.js';

export type SyncKind = RefreshType | 'scheduled';

/**
 * What a commit that makes a job due announces (db/notify.ts), so that an idle sync worker of any scheduler
 * process takes it at once rather than at its next poll (a second, by default): a person's refresh, a new
 * link's first sync, a sync back from its MFA code, a tick's scheduled syncs.
 */
export const SYNC_JOBS_CHANNEL = 'svc_sync_jobs';

export interface JobRow {
  id: string;
  kind: 'sync';
  org_id: string | null;
  link_id: string | null;
  refresh_intent_id: string | null;
  payload: string | null;
  status: JobStatus;
  attempts: number;
  run_at: number;
  locked_by: string | null;
  locked_until: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export type JobStatus = 'queued' | 'running' | 'waiting_mfa' | 'succeeded' | 'failed';
export type JobChange = 'claim' | 'complete' | 'fail' | 'park' | 'defer' | 'requeue' | 'cancel';

/*
 * A job's life. Every statement below that moves a job takes its `WHERE status …` from this table; a
 * statement that finds its job elsewhere changes nothing and says so (false), since for a job that means
 * another worker holds it (the lease was lost), the normal race a worker resolves by stepping back
 * (LeaseLostError), not a bug.
 */
export const JOB_TRANSITIONS = {
  /** A worker takes a due job, or one whose worker's lease ran out (it died, or stalled). */
  claim: { from: ['queued', 'running'], to: 'running' },
  /** The worker wrote the sync's outcome. */
  complete: { from: ['running'], to: 'succeeded' },
  /** The sync failed, or there was nothing to sync (its link expired meanwhile). */
  fail: { from: ['running'], to: 'failed' },
  /** The bank asked for a code: the job waits for the person, holding no worker. */
  park: { from: ['running'], to: 'waiting_mfa' },
  /** The bank said when to call again (429/529 with Retry-After): the job is due again then. */
  defer: { from: ['running'], to: 'queued' },
  /** The code arrived: the job is due again. */
  requeue: { from: ['waiting_mfa'], to: 'queued' },
  /** Its refresh intent failed outside a sync (the MFA wait ended): whatever the job was doing ends. */
  cancel: { from: ['queued', 'running', 'waiting_mfa'], to: 'failed' },
} as const satisfies Transitions<JobStatus, JobChange>;

/** Sync jobs that occupy a link: at most one at a time, whoever asked for it (the partial unique index). */
export const ACTIVE_JOB_STATUSES = [
  'queued',
  'running',
  'waiting_mfa',
] as const satisfies readonly JobStatus[];

/**
 * Which of these links have a sync queued, running or waiting for MFA: one probe of `jobs(link_id, status)`
 * per link, in one statement however many links are asked about (the ids bound as one value, `boundList`).
 */
export async function linksWithActiveSync(
  trx: Knex,
  engine: Engine,
  linkIds: readonly string[],
): Promise<Set<string>> {
  if (linkIds.length === 0) return new Set();
  const ids = boundList(engine, linkIds);
  const rows: { link_id: string }[] = await trx('jobs')
    .whereRaw(`link_id IN ${ids.sql}`, ids.bindings)
    .where('kind', 'sync')
    .whereIn('status', ACTIVE_JOB_STATUSES)
    .distinct('link_id');
  return new Set(rows.map((row) => row.link_id));
}

export interface SyncPayload {
  refresh_type: SyncKind;
  /** Whether a person can answer MFA during this sync (on-demand refreshes). */
  interactive: boolean;
  /**
   * The first sync after the widget reconnected (or renewed the consent of) an expired link: when that link
   * had expired. A refusal of the new login puts it back as it was, without a second `link.expired`.
   */
  reconnect_of?: number;
}

export function syncJob(
  link: { id: string; org_id: string },
  payload: SyncPayload,
  now: number,
  intentId: string | null = null,
): JobRow {
  return {
    id: newId('job'),
    kind: 'sync',
    org_id: link.org_id,
    link_id: link.id,
    refresh_intent_id: intentId,
    payload: JSON.stringify(payload),
    status: 'queued',
    attempts: 0,
    run_at: now,
    locked_by: null,
    locked_until: null,
    last_error: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * Queues an on-demand sync with its refresh intent. The partial unique index on jobs refuses a second
 * active sync of the same link; callers turn that into `refresh_in_progress`.
 */
export async function enqueueSync(
  trx: Knex,
  input: {
    link: { id: string; org_id: string; mode: 'live' | 'test' };
    refreshType: RefreshType;
    now: number;
    interactive?: boolean;
    /** See `SyncPayload.reconnect_of`. */
    reconnectOf?: number | null;
  },
) {
  const intent = await createIntent(trx, input.link, input.refreshType, input.now);
  await insertJobs(trx, [
    syncJob(
      input.link,
      {
        refresh_type: input.refreshType,
        interactive: input.interactive ?? false,
        ...(input.reconnectOf != null ? { reconnect_of: Number(input.reconnectOf) } : {}),
      },
      input.now,
      intent.id,
    ),
  ]);
  await markLinkQueued(trx, input.link.id, input.now);
  return intent;
}

/** The partial unique index on jobs refuses a second active sync of a link: callers may see that error. */
export async function insertJobs(trx: Knex, rows: JobRow[]): Promise<void> {
  await trx('jobs').insert(rows);
  await notifyOnCommit(trx, SYNC_JOBS_CHANNEL);
}

const QUEUED_SYNC_COLUMNS = [
  ['id', 'text'],
  ['org_id', 'text'],
  ['link_id', 'text'],
  ['payload', 'text'],
  ['run_at', 'bigint'],
  ['created_at', 'bigint'],
] as const;

/**
 * Queues sync jobs (as `syncJob` makes them, without intent) in one `INSERT … SELECT` over the rows bound as
 * a few values (`boundRows`), and returns the links that got one. A link whose sync was queued meanwhile by
 * someone else (an on-demand refresh committing between the caller's check and this insert, on Postgres) is
 * left out by the partial unique index rather than failing the whole batch. In chunks of 500 rows through knex,
 * 5,000 jobs took 0.6-1.3 s on Postgres (70,000 bound values to build, send and parse); so, 0.2-0.35 s.
 */
export async function queueSyncs(trx: Knex, engine: Engine, jobs: readonly JobRow[]): Promise<Set<string>> {
  if (jobs.length === 0) return new Set();
  const values = boundRows(
    engine,
    QUEUED_SYNC_COLUMNS,
    jobs.map((job) => [job.id, job.org_id, job.link_id, job.payload, job.run_at, job.created_at]),
  );
  // SQLite needs a WHERE before ON CONFLICT in an INSERT … SELECT (else ON reads as a join's).
  const queued = await runRaw<{ link_id: string }>(
    trx,
    `INSERT INTO jobs (id, kind, org_id, link_id, payload, status, attempts, run_at, created_at, updated_at)
     SELECT v.id, 'sync', v.org_id, v.link_id, v.payload, 'queued', 0, v.run_at, v.created_at, v.created_at
     FROM ${values.sql} AS v WHERE true
     ON CONFLICT DO NOTHING
     RETURNING link_id`,
    values.bindings,
  );
  if (queued.length > 0) await notifyOnCommit(trx, SYNC_JOBS_CHANNEL);
  return new Set(queued.map((row) => row.link_id));
}

/** How many sync jobs wait in the queue and how many run, for metrics and `svc status`. */
export async function syncJobCounts(db: Knex): Promise<{ queued: number; running: number }> {
  const rows: { status: string; n: number | string }[] = await db('jobs')
    .select('status')
    .count({ n: '*' })
    .whereIn('status', ['queued', 'running'])
    .groupBy('status');
  const byStatus = new Map(rows.map((row) => [row.status, Number(row.n)]));
  return { queued: byStatus.get('queued') ?? 0, running: byStatus.get('running') ?? 0 };
}

/** A link's latest jobs, newest first. */
export async function recentJobsOfLink(db: Knex, linkId: string, limit: number): Promise<JobRow[]> {
  return db<JobRow>('jobs').where({ link_id: linkId }).orderBy('created_at', 'desc').limit(limit);
}

/** The link's sync that is queued, running or waiting for MFA, if any. */
export async function activeSyncJobOf(trx: Knex, linkId: string): Promise<{ id: string } | undefined> {
  return trx('jobs')
    .where({ link_id: linkId, kind: 'sync' })
    .whereIn('status', ACTIVE_JOB_STATUSES)
    .first('id');
}

/** An MFA code arrived: the intent's parked sync goes back in the queue, due now. */
export async function requeueAfterMfa(trx: Knex, intentId: string, now: number): Promise<void> {
  await trx('jobs')
    .where({ refresh_intent_id: intentId })
    .whereIn('status', JOB_TRANSITIONS.requeue.from)
    .update({ status: JOB_TRANSITIONS.requeue.to, run_at: now, updated_at: now });
  await notifyOnCommit(trx, SYNC_JOBS_CHANNEL);
}

/** The intent failed outside a sync (its MFA wait ended): its active job fails with it and lets go. */
export async function failJobsOfIntent(
  trx: Knex,
  intentId: string,
  errorCode: string,
  now: number,
): Promise<void> {
  await trx('jobs')
    .where({ refresh_intent_id: intentId })
    .whereIn('status', JOB_TRANSITIONS.cancel.from)
    .update({ status: JOB_TRANSITIONS.cancel.to, last_error: errorCode, locked_by: null, updated_at: now });
}

/** A claimed job, with the bank of its link: workers count their jobs by bank (worker-pool.ts). */
export type ClaimedJob = JobRow & { bank_id: string | null };

/** A bank and an organisation with a sync running at it in this process (worker-pool.ts). */
export interface BankOrg {
  bank: string;
  org: string;
}

/** What a claim passes over (worker-pool.ts). */
export interface ClaimSkips {
  /** Banks whose scheduled syncs hold their share of the process's workers. */
  scheduledBanks?: readonly string[];
  /** Banks whose on-demand refreshes hold theirs. */
  onDemandBanks?: readonly string[];
  /**
   * The spare worker's claim: on-demand refreshes only, at banks whose refreshes hold their share of the
   * workers (`fullBanks`; the other banks' refreshes are the ordinary workers'), and none of an organisation
   * that already has a sync running at the refresh's bank in this process (`running`).
   */
  spareFor?: { fullBanks: readonly string[]; running: readonly BankOrg[] };
}

/**
 * JOB_TRANSITIONS.claim, with each state's own condition: a queued job when due, a running one when its lease
 * ran out. Bound to the time twice.
 */
const DUE = "((status = 'queued' AND run_at <= ?) OR (status = 'running' AND locked_until < ?))";

/**
 * Whether a job fell due in `(since, now]`: queued then (`run_at` is when a job is queued or requeued) or
 * due then. One range read of `jobs_due_idx`, before a wake-up sets every idle worker claiming; jobs due
 * earlier that no worker took are at banks that hold their share, and waking for them again would only
 * repeat claims that find nothing.
 */
export async function jobFellDue(db: Knex, since: number, now: number): Promise<boolean> {
  const row = await db('jobs')
    .where('status', 'queued')
    .where('run_at', '>', since)
    .where('run_at', '<=', now)
    .first('id');
  return row !== undefined;
}

/**
 * A queued job whose time has come, or a running one whose lease expired (its worker died), in the order
 * they fell due; a scheduled job of a bank in `scheduledBanks`, or an on-demand one (it has a refresh intent)
 * of a bank in `onDemandBanks`, is left for later, so a worker passes over a bank that already holds its share
 * of the workers. The two shares are apart so that scheduled syncs waiting for their bank's budget
 * (banks/budget/) never keep a person's refresh of the same bank from a worker. `spareFor`: see `ClaimSkips`.
 */
export async function claimJob(
  db: Database,
  owner: string,
  now: number,
  leaseMs: number,
  skips: ClaimSkips = {},
): Promise<ClaimedJob | null> {
  const atBanks = (banks: readonly string[]) =>
    `EXISTS (SELECT 1 FROM links WHERE links.id = jobs.link_id AND links.bank_id IN (${banks.map(() => '?').join(', ')}))`;
  const conditions = [DUE];
  const bindings: Knex.RawBinding[] = [now, now];
  const skipAt = (banks: readonly string[] | undefined, whose: 'NULL' | 'NOT NULL') => {
    if (!banks || banks.length === 0) return;
    conditions.push(`NOT (jobs.refresh_intent_id IS ${whose} AND ${atBanks(banks)})`);
    bindings.push(...banks);
  };
  skipAt(skips.scheduledBanks, 'NULL');
  skipAt(skips.onDemandBanks, 'NOT NULL');
  if (skips.spareFor) {
    const { fullBanks, running } = skips.spareFor;
    if (fullBanks.length === 0) return null;
    conditions.push(`jobs.refresh_intent_id IS NOT NULL AND ${atBanks(fullBanks)}`);
    bindings.push(...fullBanks);
    if (running.length > 0) {
      const pairs = running.map(() => '(links.bank_id = ? AND jobs.org_id = ?)').join(' OR ');
      conditions.push(`NOT EXISTS (SELECT 1 FROM links WHERE links.id = jobs.link_id AND (${pairs}))`);
      bindings.push(...running.flatMap((pair) => [pair.bank, pair.org]));
    }
  }
  return claimOne<ClaimedJob>(db, {
    table: 'jobs',
    owner,
    now,
    leaseMs,
    where: conditions.join(' AND '),
    bindings,
    orderBy: 'run_at, id',
    prefer: { window: FAIR_CLAIM_WINDOW, rank: RUNNING_AT_SAME_BANK },
    set: "status = 'running', attempts = attempts + 1",
    returning: '*, (SELECT bank_id FROM links WHERE links.id = jobs.link_id) AS bank_id',
  });
}

/**
 * How many of the first due jobs a claim ranks by `RUNNING_AT_SAME_BANK`. A claim reads at most this many
 * whatever the queue holds (a tick queues up to 5,000), and an organisation with a job among them is not
 * served after another's whole backlog at the same bank.
 */
const FAIR_CLAIM_WINDOW = 32;

/**
 * The jobs the candidate's organisation has running at the candidate's bank, in every process: a claim takes
 * first the job of the organisation with the fewest there, then the one due first (issue 43, item 3). So
 * two tenants' scheduled syncs of one bank share its workers, as their calls share its budget
 * (banks/budget/org-shares.ts). Running jobs are few (the workers of every scheduler process) and found by
 * `jobs_due_idx (status, run_at)`.
 */
const RUNNING_AT_SAME_BANK = `(SELECT count(*) FROM jobs AS running
    JOIN links AS running_link ON running_link.id = running.link_id
    WHERE running.status = 'running' AND running.org_id = head.org_id
      AND running_link.bank_id = (SELECT bank_id FROM links WHERE links.id = head.link_id))`;

/**
 * Ends the worker's hold on its job inside the sync's own transaction, if the lease is still ours: a worker
 * whose lease expired (it was too slow, or presumed dead) must not commit over the one that took over.
 */
async function release(
  trx: Knex,
  job: JobRow,
  change: 'complete' | 'fail' | 'park',
  now: number,
  error: string | null,
): Promise<boolean> {
  const { from, to } = JOB_TRANSITIONS[change];
  const updated = await trx('jobs')
    .where({ id: job.id, locked_by: job.locked_by })
    .whereIn('status', from)
    .update({ status: to, locked_by: null, locked_until: null, last_error: error, updated_at: now });
  return updated === 1;
}

/** The sync's outcome is written: the job succeeded. False when the lease was lost. */
export async function completeJob(trx: Knex, job: JobRow, now: number): Promise<boolean> {
  return release(trx, job, 'complete', now, null);
}

/** The sync failed with `error` (a bank's error code, or why there was nothing to sync). */
export async function failJob(trx: Knex, job: JobRow, error: string, now: number): Promise<boolean> {
  return release(trx, job, 'fail', now, error);
}

/**
 * The bank rate-limited the sync and said when to come back: the job lets go and is due again at `runAt`,
 * not before (its attempts keep counting). False when the lease was lost. `refundAttempt`: the job never
 * reached the bank's refusal (it waited for the bank's budget, banks/budget/), so this try does not count
 * towards the bank's refusals (RATE_LIMIT_TRIES).
 */
export async function deferJob(
  trx: Knex,
  job: JobRow,
  runAt: number,
  error: string,
  now: number,
  options: { refundAttempt?: boolean } = {},
): Promise<boolean> {
  const { from, to } = JOB_TRANSITIONS.defer;
  const updated = await trx('jobs')
    .where({ id: job.id, locked_by: job.locked_by })
    .whereIn('status', from)
    .update({
      ...(options.refundAttempt ? { attempts: trx.raw('attempts - 1') } : {}),
      status: to,
      run_at: runAt,
      locked_by: null,
      locked_until: null,
      last_error: error,
      updated_at: now,
    });
  return updated === 1;
}

/** The bank asked for a code: the job waits (`waiting_mfa`) until `requeueAfterMfa`. */
export async function parkJobForMfa(trx: Knex, job: JobRow, now: number): Promise<boolean> {
  return release(trx, job, 'park', now, null);
}

/**
 * Renews the lease every third of its length while `work` runs, so a sync slower than one lease (a slow
 * bank) keeps its job; only a worker that dies stops renewing, and its job is then taken over.
 */
export async function withLeaseRenewal<T>(
  db: Database,
  job: JobRow,
  leaseMs: number,
  now: () => number,
  work: () => Promise<T>,
): Promise<T> {
  const renew = () =>
    db
      .transaction((trx) =>
        trx('jobs')
          .where({ id: job.id, locked_by: job.locked_by, status: 'running' })
          .update({ locked_until: now() + leaseMs }),
      )
      .catch(() => undefined); // a missed renewal is retried at the next beat; the finish checks the lease anyway
  const timer = setInterval(() => void renew(), Math.max(100, Math.floor(leaseMs / 3)));
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
}

/**
 * The jobs of the refresh intent in `intentIdColumn` (a column of the caller's query), as a correlated
 * subquery: retention keeps an intent while any job of it is kept, so that removing the intent (whose foreign
 * key cascades to its jobs) never removes an active job or a link's latest one. Reads `jobs_intent_idx`.
 */
export function jobsOfIntent(db: Knex, intentIdColumn: string): Knex.QueryBuilder {
  return db('jobs').select(db.raw('1')).whereRaw('jobs.refresh_intent_id = ??', [intentIdColumn]);
}

/**
 * Retention: removes up to `limit` succeeded or failed jobs that ran before `cutoff`. Never an active job,
 * and never a link's latest job (`svc links inspect` shows a link's latest jobs): only a job that a newer
 * job of its link follows goes. A finished job's `run_at` is when it last started, within minutes of its
 * end, and `jobs_due_idx (status, run_at)` already serves `status IN (...) AND run_at < ?`: no index of its
 * own, and no ORDER BY, which across two statuses would sort every old job before the LIMIT.
 */
export async function pruneFinishedJobs(trx: Knex, cutoff: number, limit: number): Promise<number> {
  // One status at a time, oldest first, so each walks `jobs_due_idx (status, run_at)`: with both statuses
  // and no order, Postgres merged along `jobs(link_id, status)` and passed ~80,000 kept rows per batch of
  // 500 (311 ms against 40 ms, bench/growth.ts at 100,000 links).
  let removed = 0;
  for (const status of ['succeeded', 'failed']) {
    if (removed >= limit) break;
    const ids = trx('jobs as j')
      .select('j.id')
      .where('j.status', status)
      .where('j.run_at', '<', cutoff)
      .whereExists(
        trx('jobs as newer')
          .select(trx.raw('1'))
          .whereRaw('newer.link_id = j.link_id')
          .whereRaw('newer.created_at > j.created_at'),
      )
      .orderBy('j.run_at')
      .limit(limit - removed);
    removed += await trx('jobs').whereIn('id', ids).delete();
  }
  return removed;
}

/**
 * How many sync jobs of an organisation's links in a mode failed since `since` (the console's overview).
 * Walks `jobs_due_idx (status, run_at)` over the failed jobs of the window only (a failed job's `run_at` is
 * when it last started), and reads each one's link by primary key for its mode: jobs carry no mode.
 */
export async function failedSyncJobsSince(
  db: Knex,
  scope: { orgId: string; mode: 'live' | 'test' },
  since: number,
): Promise<number> {
  const [row] = await db('jobs')
    .join('links', 'links.id', 'jobs.link_id')
    .where('jobs.status', 'failed')
    .where('jobs.run_at', '>=', since)
    .where('jobs.kind', 'sync')
    .where('jobs.org_id', scope.orgId)
    .where('links.mode', scope.mode)
    .count({ n: '*' });
  return Number((row as { n: number | string }).n);
}
