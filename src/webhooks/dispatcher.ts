import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { systemClock, type Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { claimBatch } from '../db/claims.js';
import { DATABASE_RETRY_CAP_MS } from '../db/errors.js';
import { boundList, boundRows, runNamed } from '../db/bound-rows.js';
import type { Database } from '../db/database.js';
import { watchCommits, type CommitWatcher } from '../db/notify.js';
import { DELIVERY_CHANNEL } from './fan-out.js';
import type { Logger } from '../logging/logger.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { holdDeliveriesUntil, type DeliveryRow } from './deliveries.js';
import { backoffUntil, healthChanges } from './endpoint-health.js';
import { overMark, startable } from './fair-share.js';
import {
  rememberingOpener,
  signingSecrets,
  type EndpointSecrets,
  type WebhookEndpointRow,
} from './endpoints.js';
import { eventBody } from './payload.js';
import { DeliverySender, type SendOutcome } from './sender.js';
import { headerNames, signatureHeader } from './signature.js';
import { mayReachPrivateAddresses } from './url-policy.js';

export interface DispatcherServices {
  db: Database;
  clock: Clock;
  logger: Logger;
  secrets: SecretBox;
  config: Readonly<Config>;
}

export interface DispatcherOptions {
  /**
   * The clock that stamps signatures. Receivers compare `t` with their own wall clock, so it stays the system
   * clock even when the appliance's clock is moved (SVC_CLOCK_OFFSET_MS, tests); schedules use the app clock.
   */
  wallClock?: Clock;
}

/**
 * What a claim returns: the delivery's columns an attempt and its record need; its event's stored data and
 * time, read in the same statement (null only if the event is gone); and its endpoint's version.
 */
type ClaimedRow = Pick<
  DeliveryRow,
  'id' | 'org_id' | 'mode' | 'event_id' | 'event_type' | 'endpoint_id' | 'attempts' | 'next_attempt_at'
> & {
  event_data: string | null;
  event_created_at: number | null;
  endpoint_version: string | null;
  /** The endpoint's unanswered attempts in a row when the row was claimed (see endpoint-health.ts). */
  endpoint_unanswered: number | null;
};

type Endpoint = EndpointSecrets & Pick<WebhookEndpointRow, 'url' | 'disabled' | 'expires_at'>;
const ENDPOINT_COLUMNS = [
  'id',
  'url',
  'disabled',
  'expires_at',
  'secret_encrypted',
  'previous_secret_encrypted',
  'previous_secret_expires_at',
] as const;

/**
 * What an attempt needs of an endpoint changes only with its URL or its secrets, and every roll seals a new
 * secret_encrypted (fresh IV), previous secret and grace included: so the two name a version, and a claim
 * returns it with each row rather than an endpoint read in every cycle. (Disabled endpoints are not claimed.)
 */
const ENDPOINT_VERSION = `url || ' ' || secret_encrypted`;
const versionOf = (endpoint: Endpoint) => `${endpoint.url} ${endpoint.secret_encrypted}`;

const CLAIM_RETURNING = `id, org_id, mode, event_id, event_type, endpoint_id, attempts, next_attempt_at,
  (SELECT data FROM events WHERE events.id = webhook_deliveries.event_id) AS event_data,
  (SELECT created_at FROM events WHERE events.id = webhook_deliveries.event_id) AS event_created_at,
  (SELECT ${ENDPOINT_VERSION} FROM webhook_endpoints WHERE webhook_endpoints.id = webhook_deliveries.endpoint_id)
    AS endpoint_version,
  (SELECT unanswered_attempts FROM webhook_endpoints WHERE webhook_endpoints.id = webhook_deliveries.endpoint_id)
    AS endpoint_unanswered`;

/** Endpoints kept (beyond it, the cache starts again). */
const ENDPOINTS_CACHED = 10_000;

interface Ready {
  row: ClaimedRow;
  token: string;
  endpoint: Endpoint;
}

interface Finished {
  row: ClaimedRow;
  token: string;
  outcome: SendOutcome;
  /** Made, and no HTTP answer came: counts towards the endpoint's back-off. */
  unanswered: boolean;
  startedAt: number;
  finishedAt: number;
  durationMs: number;
}

/**
 * A row is due when it is pending, its time has come, nobody holds a live lease on it (an expired lease is
 * a dead dispatcher's: the row is claimed again, with the same event id) and its endpoint is enabled and
 * not backed off. (A back-off also moves the endpoint's rows to its end, so the claim's walk of the due
 * index does not pass them; the condition here covers rows that were not moved, e.g. leased elsewhere.)
 */
const DUE = `status = 'pending' AND next_attempt_at <= ? AND (locked_until IS NULL OR locked_until < ?)
  AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE disabled = ?
    AND (backoff_until IS NULL OR backoff_until <= ?))`;

/** What a batch of attempts does to each endpoint's count of unanswered attempts (endpoint-health.ts). */
const HEALTH_COLUMNS = [
  ['id', 'text'],
  ['reset', 'integer'],
  ['added', 'integer'],
] as const;

/** A finished attempt's result, for its delivery row. */
const RESULT_COLUMNS = [
  ['id', 'text'],
  ['token', 'text'],
  ['status', 'text'],
  ['attempts', 'integer'],
  ['next_attempt_at', 'bigint'],
  ['last_attempt_at', 'bigint'],
  ['last_response_status', 'integer'],
  ['last_error', 'text'],
  ['updated_at', 'bigint'],
] as const;

const ATTEMPT_COLUMNS = [
  ['id', 'text'],
  ['delivery_id', 'text'],
  ['number', 'integer'],
  ['started_at', 'bigint'],
  ['duration_ms', 'integer'],
  ['status_code', 'integer'],
  ['error', 'text'],
  ['response_excerpt', 'text'],
] as const;

/** Results written per transaction at most: enough for a cycle at full speed. */
const FLUSH_BATCH = 500;

/**
 * Rows kept in hand, in sets of the concurrency (overall, and per endpoint): one set in flight, the rest
 * queued. A claim is made once a set has gone out, and it may have to wait for the cycle running before
 * its own, so the queue must outlast two cycles: how many sets that takes follows the pace (see `adapt`),
 * between these bounds.
 */
const MIN_SETS = 4;
const MAX_SETS = 16;

/** How long a finished attempt may wait for others to be recorded with it when no claim is due to carry it. */
const FLUSH_WINDOW_MS = 10;

/** Weight of the latest cycle or attempt in the running averages of the pace. */
const PACE_WEIGHT = 0.25;

/** A running average that starts at its first sample: started at zero, it took a dozen cycles to reach the pace. */
function follow(average: number, sample: number): number {
  return average === 0 ? sample : average + PACE_WEIGHT * (sample - average);
}

/**
 * The webhook dispatcher of one process.
 *
 * Work flows in batches because every claim and every result is a write (on SQLite through the one writer
 * connection of the process) and a few round trips. One write transaction at a time, a cycle, records the
 * attempts finished since the last one and claims the next rows: one `UPDATE … FROM` for the results and one
 * insert for the attempt history (each row set bound as a few values, see `boundRows`), then one claim
 * (`claimBatch`: `UPDATE … RETURNING`, `FOR UPDATE SKIP LOCKED` on Postgres) that returns each row's event
 * and its endpoint's version with it, so endpoints are read only when they change. Each finished attempt
 * starts the next queued row at once, with no database work, and a cycle runs as soon as a set has gone out
 * (or within FLUSH_WINDOW_MS of a result, when nothing is to be claimed). A row's lease, held from its claim
 * until its result is written, stops anyone from claiming it twice.
 *
 * Measured with bench/webhooks.ts on a shared 2-core machine at 16 in flight, beside a bare loop posting the
 * same bodies with the same client, in interleaved runs: claiming per freed slot and recording row by row,
 * 745 deliveries/s; claims and results in separate transactions of `VALUES` lists, each claim followed by
 * reads of its events and endpoints, 29-38% of the bare loop on SQLite and 27-34% on Postgres; as here,
 * 58-69% and 40-48%. What is left on Postgres is mostly index upkeep: each delivery is two updates that
 * cannot be HOT (no free space on a freshly filled page for the claim; the result moves the row in the due
 * index), five indexes each, plus the attempt's two.
 *
 * Isolation and fairness (fair-share.ts): at most `concurrency` attempts in flight, at most
 * `perOrganisationConcurrency` of them for one organisation and at most `perEndpointConcurrency` to one
 * endpoint, and at most as many sets of each in hand as overall. Claims skip endpoints and organisations at
 * that mark, so a backlog of one, however old, cannot fill the hand, and the queue starts the oldest rows
 * that fit their limits, so rows held back by their organisation's share do not hold up anyone else's.
 * Before the organisation's share, one organisation with 40 endpoints that took requests and never answered
 * held all 32 slots, and every other organisation waited 23 to 59 s (normally under 0.3 s) behind their
 * 10 s deadlines; now it holds 8 and the other 24 keep flowing. The shares are per process: with several
 * dispatchers an organisation holds at most its share of each, the same fraction of the whole.
 *
 * Back-off (endpoint-health.ts): an endpoint whose latest attempt got no answer gets one attempt at a time,
 * and after `backoffAfterUnanswered` such attempts in a row it is backed off: the cycle that records the
 * last of them sets its `backoff_until` and moves its pending rows there, uncharged, so claims neither take
 * nor walk them; rows of it in hand go back. At the end one attempt tries it again: unanswered, the back-off
 * doubles; answered with a 2xx, it is over and its rows flow at the full per-endpoint limit.
 *
 * Wake-up: a cheap indexed read tells whether anything is due and when the next row will be; the loop
 * sleeps until then, at most `pollIntervalMs`, and wakes early on another process's commit (Postgres
 * LISTEN/NOTIFY, the SQLite WAL watched; see src/db/notify.ts). While claims come back full, the read is
 * skipped: more is due.
 *
 * Crash safety: a claim sets a lease (renewed every third of its length while the row is in hand). A
 * `kill -9` loses the attempts in flight and their results; the leases lapse and the rows are claimed again:
 * the receiver may get an event twice, always with the same event id. Attempts are counted when their
 * result is recorded, so a crash never uses up one of the six.
 */
export class Dispatcher {
  private readonly settings: Config['dispatcher'];
  private readonly leaseMs: number;
  private readonly sender: DeliverySender;
  private readonly wallClock: Clock;
  private readonly secrets: Pick<SecretBox, 'open'>;
  private readonly owner: string;
  private readonly headers: { signature: string; eventId: string };
  private readonly userAgent: string;
  private batches = 0;
  /** HTTP exchanges in flight, overall, by endpoint and by organisation. */
  private active = 0;
  private readonly perEndpoint = new Map<string, number>();
  private readonly perOrganisation = new Map<string, number>();
  /** Claimed rows, with what they need, waiting for a slot; and how many of each endpoint and organisation are in hand. */
  private queue: Ready[] = [];
  private readonly inHand = new Map<string, number>();
  private readonly organisationInHand = new Map<string, number>();
  /**
   * What this process knows of endpoints' health (endpoint-health.ts): unanswered attempts in a row, as the
   * last claim read them plus our own attempts since (only endpoints with some); and the endpoints it has
   * seen reach the back-off threshold, whose queued rows it gives back rather than starts. A claim of an
   * endpoint's row says it is claimable again (claims skip backed-off endpoints).
   */
  private readonly unanswered = new Map<string, number>();
  private readonly backedOff = new Set<string>();
  /** Every row we hold a lease on (in flight or waiting to be recorded), with its lease token. */
  private readonly leased = new Map<string, string>();
  private readonly inFlight = new Set<Promise<void>>();
  private finished: Finished[] = [];
  /** Endpoints as last read, by id; a claim tells when one has changed. */
  private readonly endpoints = new Map<string, Endpoint>();
  /** The cycle running or last run (the next waits for it), and how many are waiting. */
  private cycling: Promise<unknown> = Promise.resolve();
  private waitingCycles = 0;
  /** Under `run`, cycles started by finished attempts claim too; `dispatchDue` claims only in its own steps. */
  private claimAlong = false;
  /** The last claim came back full: more is due, so freed room is worth a claim without looking first. */
  private backlog = false;
  /** Sets of the concurrency kept in hand, and the pace they follow: how long cycles and attempts take. */
  private sets = MIN_SETS;
  private readonly pace = { cycleMs: 0, attemptMs: 0 };
  private flushTimer: NodeJS.Timeout | null = null;
  private flushFailures = 0;
  private stopping = false;
  private woken = false;
  private wakeUp: (() => void) | null = null;

  constructor(
    private readonly services: DispatcherServices,
    options: DispatcherOptions = {},
  ) {
    const { config } = services;
    this.settings = config.dispatcher;
    this.leaseMs = config.dispatcher.leaseSeconds * 1000;
    this.wallClock = options.wallClock ?? systemClock;
    this.secrets = rememberingOpener(services.secrets);
    this.sender = new DeliverySender({
      attemptTimeoutMs: config.dispatcher.attemptTimeoutMs,
      responseBytesKept: config.dispatcher.responseBytesKept,
    });
    // locked_by is 64 characters: a long host name is cut.
    this.owner = `${hostname().slice(0, 24)}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.headers = headerNames(config.brand);
    this.userAgent = `${this.headers.signature.replace(/-Signature$/, '')}-Webhooks/1.0`;
  }

  /**
   * Runs until `signal` aborts, then stops claiming, lets the attempts in flight finish (each is bounded by
   * its deadline), records them and returns.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { logger, config } = this.services;
    const watcher: CommitWatcher | null = this.settings.wakeOnCommit
      ? watchCommits({
          url: config.databaseUrl,
          channel: DELIVERY_CHANNEL,
          onCommit: () => this.wake(),
          onError: (error) => logger.warn({ err: error.message }, 'commit wake-ups unavailable; polling'),
        })
      : null;
    const renewal = setInterval(() => void this.renewLeases(), Math.max(100, Math.floor(this.leaseMs / 3)));
    const onAbort = () => this.wake();
    signal.addEventListener('abort', onAbort, { once: true });
    this.claimAlong = true;
    let failures = 0;
    try {
      while (!signal.aborted) {
        let waitMs = this.settings.pollIntervalMs;
        try {
          const { nextDueAt } = await this.fill();
          failures = 0;
          if (nextDueAt !== null) {
            waitMs = Math.max(0, Math.min(waitMs, nextDueAt - this.services.clock.now()));
          }
        } catch (error) {
          // Our own trouble (the database, usually): back off rather than spin, up to DATABASE_RETRY_CAP_MS.
          failures += 1;
          waitMs = Math.min(this.settings.pollIntervalMs * 2 ** failures, DATABASE_RETRY_CAP_MS);
          logger.error({ err: error, retry_ms: waitMs }, 'dispatcher could not claim deliveries');
        }
        if (!signal.aborted) await this.waitForWake(waitMs);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.stopping = true;
      this.claimAlong = false;
      await this.releaseQueue();
      await Promise.allSettled([...this.inFlight]);
      await this.flush();
      this.stopTimer();
      clearInterval(renewal);
      await watcher?.close();
      await this.sender.close();
    }
  }

  /**
   * Claims and sends everything due at the clock's time, waits for the results and records them; repeats
   * until nothing is due. What tests (with a clock they move) and one-shot tools use instead of `run`.
   */
  async dispatchDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const { started } = await this.fill();
      total += started;
      // Finishing attempts start the queued rows; wait for all of them.
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
      await this.flush();
      if (started === 0) return total;
    }
  }

  async close(): Promise<void> {
    this.stopping = true;
    await this.releaseQueue();
    await Promise.allSettled([...this.inFlight]);
    await this.flush();
    this.stopTimer();
    await this.sender.close();
  }

  private stopTimer(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async waitForWake(ms: number): Promise<void> {
    if (!this.woken && ms > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.wakeUp = null;
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.wakeUp = done;
      });
    }
    this.woken = false;
  }

  /** Rows in hand: in flight or queued. */
  private held(): number {
    return this.active + this.queue.length;
  }

  /** Room for a claim: nothing in hand, or a set's worth gone out. */
  private roomToClaim(): boolean {
    const held = this.held();
    return held === 0 || this.sets * this.settings.concurrency - held >= this.settings.concurrency;
  }

  /**
   * Attempts one endpoint may have in flight: none while backed off, one while its latest attempt went
   * unanswered (a receiver that stopped answering holds one slot, not four, until it answers or is backed
   * off), otherwise `perEndpointConcurrency`.
   */
  private endpointLimit(endpointId: string): number {
    if (this.backedOff.has(endpointId)) return 0;
    return this.unanswered.has(endpointId) ? 1 : this.settings.perEndpointConcurrency;
  }

  /** How many rows of one endpoint may be in hand before claims skip it: a set short of its share. */
  private endpointMark(endpointId: string): number {
    return (this.sets - 1) * this.endpointLimit(endpointId);
  }

  /** The same for an organisation. */
  private organisationMark(): number {
    return (this.sets - 1) * this.settings.perOrganisationConcurrency;
  }

  /** Endpoints and organisations with less than a set of room; every other has room for a whole batch. */
  private busy(): { endpoints: string[]; organisations: string[] } {
    return {
      endpoints: overMark(this.inHand, (id) => this.endpointMark(id)),
      organisations: overMark(this.organisationInHand, () => this.organisationMark()),
    };
  }

  /**
   * Claims due rows into the queue until enough are in hand or nothing more is due, starting them as slots
   * allow; returns when the next row will be due, when that is known.
   */
  private async fill(): Promise<{ started: number; nextDueAt: number | null }> {
    let started = 0;
    for (;;) {
      if (this.stopping || !this.roomToClaim()) return { started, nextDueAt: null };
      const now = this.services.clock.now();
      // The read that says whether anything is due keeps an idle SQLite dispatcher off the write lock; after
      // a full claim there is probably more, so it is skipped.
      const expected = this.backlog;
      if (!expected) {
        const nextDueAt = await this.nextDue(now, this.busy());
        if (nextDueAt === null || nextDueAt > now) return { started, nextDueAt };
      }
      const queued = await this.cycle(true);
      started += queued;
      // Due, yet taken by someone else between the read and the claim: look again shortly, not at once.
      if (queued === 0) return { started, nextDueAt: expected ? null : now + 50 };
    }
  }

  /** When the earliest claimable row is due (maybe in the past), or null when none is pending. */
  private async nextDue(
    now: number,
    busy: { endpoints: string[]; organisations: string[] },
  ): Promise<number | null> {
    let query = this.services.db
      .reader('webhook_deliveries')
      .where('status', 'pending')
      .whereNotNull('next_attempt_at')
      .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', now))
      .whereIn('endpoint_id', (q) =>
        q
          .select('id')
          .from('webhook_endpoints')
          .where('disabled', false)
          .where((b) => b.whereNull('backoff_until').orWhere('backoff_until', '<=', now)),
      );
    if (busy.endpoints.length > 0) query = query.whereNotIn('endpoint_id', busy.endpoints);
    if (busy.organisations.length > 0) query = query.whereNotIn('org_id', busy.organisations);
    const row: { next_attempt_at: number } | undefined = await query
      .orderBy('next_attempt_at')
      .first('next_attempt_at');
    return row ? Number(row.next_attempt_at) : null;
  }

  /**
   * Queues a cycle: one write transaction that records up to FLUSH_BATCH finished attempts and, with
   * `claim`, claims as many due rows as there is room for, which it queues and starts; resolves to how many
   * it queued. Cycles run one at a time, each on the state it finds when its turn comes.
   */
  private cycle(claim: boolean): Promise<number> {
    this.waitingCycles += 1;
    const turn = this.cycling.then(() => {
      this.waitingCycles -= 1;
      return this.runCycle(claim);
    });
    this.cycling = turn.catch(() => undefined);
    return turn;
  }

  /** A cycle soon, unless one is already waiting: it will take everything there is by the time it runs. */
  private kick(): void {
    this.stopTimer();
    if (this.waitingCycles > 0) return;
    this.cycle(this.claimAlong && !this.stopping).then(
      () => {
        this.flushFailures = 0;
      },
      (error: unknown) => {
        this.flushFailures += 1;
        const retryMs = Math.min(100 * 2 ** this.flushFailures, DATABASE_RETRY_CAP_MS);
        this.services.logger.error(
          { err: error, results: this.finished.length, retry_ms: retryMs },
          'could not record webhook attempts',
        );
        // On the way out, `flush` retries (and gives up) by itself.
        if (!this.stopping) this.flushTimer ??= setTimeout(() => this.kick(), retryMs);
      },
    );
  }

  private async runCycle(claim: boolean): Promise<number> {
    const { db, clock } = this.services;
    const { concurrency, perEndpointConcurrency, perOrganisationConcurrency } = this.settings;
    const batch = this.finished.splice(0, FLUSH_BATCH);
    let limit = 0;
    let busy: { endpoints: string[]; organisations: string[] } = { endpoints: [], organisations: [] };
    if (claim && !this.stopping && this.roomToClaim()) {
      busy = this.busy();
      // As many as fit: overall, and for the fullest endpoint and the fullest organisation that may come
      // back (any endpoint or organisation not skipped may fill the whole batch).
      const fullest = (counts: Map<string, number>, skipped: string[]) =>
        Math.max(0, ...[...counts].filter(([id]) => !skipped.includes(id)).map(([, n]) => n));
      limit = Math.min(
        this.sets * concurrency - this.held(),
        this.sets * perEndpointConcurrency - fullest(this.inHand, busy.endpoints),
        this.sets * perOrganisationConcurrency - fullest(this.organisationInHand, busy.organisations),
      );
    }
    if (batch.length === 0 && limit <= 0) return 0;
    const began = performance.now();
    const token = `${this.owner}:${(this.batches += 1)}`;
    let claimed: ClaimedRow[];
    try {
      claimed = await db.transaction(async (trx) => {
        if (batch.length > 0) await this.record(trx, batch);
        if (limit <= 0) return [];
        const now = clock.now();
        // Endpoints and organisations at their mark are skipped; each list is one bound value, so the claim's
        // text never changes.
        const endpoints = boundList(db.engine, busy.endpoints);
        const organisations = boundList(db.engine, busy.organisations);
        const rows = await claimBatch<ClaimedRow>(db, {
          table: 'webhook_deliveries',
          owner: token,
          now,
          leaseMs: this.leaseMs,
          where: `${DUE} AND endpoint_id NOT IN ${endpoints.sql} AND org_id NOT IN ${organisations.sql}`,
          bindings: [now, now, false, now, ...endpoints.bindings, ...organisations.bindings],
          orderBy: 'next_attempt_at',
          limit,
          returning: CLAIM_RETURNING,
          within: trx,
          name: 'svc_webhooks_claim',
        });
        await this.refreshEndpoints(trx, rows);
        return rows;
      });
    } catch (error) {
      this.finished.unshift(...batch);
      throw error;
    }
    for (const item of batch)
      if (this.leased.get(item.row.id) === item.token) this.leased.delete(item.row.id);
    // Rows of endpoints that reached the back-off threshold go back rather than wait in hand: the record
    // above has moved them to the back-off's end (or, if it has not backed the endpoint off after all, the
    // next claim takes them again).
    if (this.backedOff.size > 0)
      await this.releaseQueued((ready) => this.backedOff.has(ready.row.endpoint_id));
    let queued = 0;
    if (limit > 0) {
      this.backlog = claimed.length === limit;
      queued = await this.enqueue(claimed, token);
    }
    this.adapt(performance.now() - began);
    if (this.finished.length > 0) this.scheduleFlush();
    return queued;
  }

  /**
   * Follows the pace. A claim is called when a set of room has gone out, and its rows arrive after the cycle
   * before it and its own: while those two run, each slot finishes cycleMs / attemptMs attempts, so that many
   * sets, twice, must be queued beyond the set in flight and the set of room. Measured from the attempts'
   * own time rather than the rate achieved, which a short queue holds down: so a backlog reaches full speed
   * in a cycle or two, and slow receivers keep the minimum in hand.
   */
  private adapt(cycleMs: number): void {
    const { pace } = this;
    pace.cycleMs = follow(pace.cycleMs, cycleMs);
    if (pace.attemptMs === 0) return;
    const wanted = Math.min(MAX_SETS, Math.max(MIN_SETS, 2 + Math.ceil((2 * pace.cycleMs) / pace.attemptMs)));
    // Up at once, down by a set a cycle: a pace that jitters must not drain the queue.
    this.sets = Math.max(wanted, this.sets - 1);
  }

  /** Reads the endpoints of claimed rows that are not known in the version the claim saw. */
  private async refreshEndpoints(trx: Knex, rows: ClaimedRow[]): Promise<void> {
    const stale = new Set<string>();
    for (const row of rows) {
      const known = this.endpoints.get(row.endpoint_id);
      if (!known || versionOf(known) !== row.endpoint_version) stale.add(row.endpoint_id);
    }
    if (stale.size === 0) return;
    const read: Endpoint[] = await trx('webhook_endpoints')
      .whereIn('id', [...stale])
      .select(ENDPOINT_COLUMNS);
    for (const id of stale) this.endpoints.delete(id);
    if (this.endpoints.size + read.length > ENDPOINTS_CACHED) this.endpoints.clear();
    for (const endpoint of read) this.endpoints.set(endpoint.id, endpoint);
  }

  /**
   * Queues claimed rows and starts them; rows beyond their endpoint's or organisation's share, or without
   * their event, go back.
   */
  private async enqueue(claimed: ClaimedRow[], token: string): Promise<number> {
    const organisationCap = this.sets * this.settings.perOrganisationConcurrency;
    const giveBack: string[] = [];
    claimed.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));
    // The claim read each endpoint's health, and claims skip backed-off endpoints: this is newer than ours.
    // (Entries of endpoints since deleted would stay: past the cache's bound, knowledge starts again.)
    if (this.unanswered.size + this.backedOff.size > ENDPOINTS_CACHED) {
      this.unanswered.clear();
      this.backedOff.clear();
    }
    for (const row of claimed) {
      this.backedOff.delete(row.endpoint_id);
      const unanswered = Number(row.endpoint_unanswered ?? 0);
      if (unanswered > 0) this.unanswered.set(row.endpoint_id, unanswered);
      else this.unanswered.delete(row.endpoint_id);
    }
    for (const row of claimed) {
      // Deleted since the claim (a Postgres statement sees commits made after the claim's): nothing to send.
      const endpoint = this.endpoints.get(row.endpoint_id);
      const inHand = this.inHand.get(row.endpoint_id) ?? 0;
      const organisationInHand = this.organisationInHand.get(row.org_id) ?? 0;
      if (
        row.event_data === null ||
        !endpoint ||
        endpoint.disabled ||
        inHand >= this.sets * this.endpointLimit(row.endpoint_id) ||
        organisationInHand >= organisationCap
      ) {
        giveBack.push(row.id);
        continue;
      }
      this.inHand.set(row.endpoint_id, inHand + 1);
      this.organisationInHand.set(row.org_id, organisationInHand + 1);
      this.leased.set(row.id, token);
      this.queue.push({ row, token, endpoint });
    }
    this.pump();
    await this.release(token, giveBack);
    return claimed.length - giveBack.length;
  }

  /**
   * Starts queued rows, oldest first, while slots are free and their endpoints and organisations are under
   * their limits (fair-share.ts).
   */
  private pump(): void {
    if (this.stopping || this.queue.length === 0 || this.active >= this.settings.concurrency) return;
    const picked = startable(
      this.queue.map((ready) => ({ endpointId: ready.row.endpoint_id, orgId: ready.row.org_id })),
      { total: this.active, byEndpoint: this.perEndpoint, byOrganisation: this.perOrganisation },
      {
        concurrency: this.settings.concurrency,
        perOrganisation: this.settings.perOrganisationConcurrency,
        endpoint: (id) => this.endpointLimit(id),
      },
    );
    if (picked.length === 0) return;
    const chosen = new Set(picked);
    const starting = picked.map((i) => this.queue[i]!);
    this.queue = this.queue.filter((_, i) => !chosen.has(i));
    for (const ready of starting) {
      this.active += 1;
      increment(this.perEndpoint, ready.row.endpoint_id);
      increment(this.perOrganisation, ready.row.org_id);
      const attempt = this.attempt(ready).finally(() => this.inFlight.delete(attempt));
      this.inFlight.add(attempt);
    }
  }

  private done(row: ClaimedRow): void {
    this.active -= 1;
    decrement(this.perEndpoint, row.endpoint_id);
    decrement(this.perOrganisation, row.org_id);
    this.forgetInHand(row);
  }

  private forgetInHand(row: ClaimedRow): void {
    decrement(this.inHand, row.endpoint_id);
    decrement(this.organisationInHand, row.org_id);
  }

  /** On shutdown the rows not started go back at once, rather than waiting out their lease. */
  private releaseQueue(): Promise<void> {
    return this.releaseQueued(() => true);
  }

  /** Gives back the queued rows `which` picks. */
  private async releaseQueued(which: (ready: Ready) => boolean): Promise<void> {
    const byToken = new Map<string, string[]>();
    const kept: Ready[] = [];
    for (const ready of this.queue) {
      if (!which(ready)) {
        kept.push(ready);
        continue;
      }
      this.leased.delete(ready.row.id);
      this.forgetInHand(ready.row);
      byToken.set(ready.token, [...(byToken.get(ready.token) ?? []), ready.row.id]);
    }
    if (byToken.size === 0) return;
    this.queue = kept;
    for (const [token, ids] of byToken) await this.release(token, ids);
  }

  private async release(token: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.services.db
      .transaction((trx) =>
        trx('webhook_deliveries')
          .whereIn('id', ids)
          .where('locked_by', token)
          .update({ locked_by: null, locked_until: null }),
      )
      .catch((error: Error) =>
        // Not fatal: the lease lapses by itself.
        this.services.logger.warn({ err: error.message }, 'could not release claimed deliveries'),
      );
  }

  private async attempt({ row, token, endpoint }: Ready): Promise<void> {
    const { clock } = this.services;
    const startedAt = clock.now();
    const began = performance.now();
    let outcome: SendOutcome;
    let unanswered = false;
    try {
      const body = eventBody({
        id: row.event_id,
        type: row.event_type,
        created_at: Number(row.event_created_at),
        mode: row.mode,
        data: row.event_data!,
      });
      // Signed afresh for every attempt, with its own timestamp.
      const timestamp = Math.floor(this.wallClock.now() / 1000);
      const signature = signatureHeader(signingSecrets(endpoint, this.secrets, startedAt), timestamp, body);
      outcome = await this.sender.send(
        endpoint.url,
        mayReachPrivateAddresses(row.mode, endpoint.expires_at !== null, this.services.config.webhooks),
        {
          'content-type': 'application/json',
          'user-agent': this.userAgent,
          [this.headers.signature]: signature,
          [this.headers.eventId]: row.event_id,
        },
        body,
      );
      unanswered = outcome.statusCode === null;
    } catch (error) {
      // Our own failure (the secret would not open, say), not the receiver's: its health is left alone.
      outcome = {
        statusCode: null,
        ok: false,
        excerpt: null,
        error: `not sent: ${(error as Error).message}`.slice(0, 300),
      };
    }
    const took = performance.now() - began;
    this.finished.push({
      row,
      token,
      outcome,
      unanswered,
      startedAt,
      finishedAt: clock.now(),
      durationMs: Math.round(took),
    });
    this.pace.attemptMs = follow(this.pace.attemptMs, took);
    this.noteHealth(row.endpoint_id, outcome.ok, unanswered);
    this.done(row);
    this.pump();
    // Time to claim once a set has gone out, if more is due or this endpoint or organisation, skipped by
    // claims while at its mark, has room again; the cycle records this result with it. (Other endpoints' new
    // rows wake the loop themselves: a commit, the next-due timer or the poll.) Otherwise the result waits
    // for the flush window.
    const claimable =
      this.roomToClaim() &&
      (this.backlog ||
        (this.inHand.get(row.endpoint_id) ?? 0) === this.endpointMark(row.endpoint_id) ||
        (this.organisationInHand.get(row.org_id) ?? 0) === this.organisationMark());
    if (claimable && this.claimAlong) this.kick();
    else this.scheduleFlush();
  }

  /**
   * Our own attempts update what we know of their endpoint at once, before they are recorded: the next
   * queued row of an endpoint that has just gone unanswered waits for the one in flight, and one that has
   * reached the back-off threshold gets no more attempts from us (its queued rows go back at the next cycle).
   */
  private noteHealth(endpointId: string, ok: boolean, unanswered: boolean): void {
    if (ok) {
      this.unanswered.delete(endpointId);
      this.backedOff.delete(endpointId);
    } else if (unanswered) {
      const count = (this.unanswered.get(endpointId) ?? 0) + 1;
      this.unanswered.set(endpointId, count);
      if (count >= this.settings.backoffAfterUnanswered) this.backedOff.add(endpointId);
    }
  }

  /**
   * Results not carried by a claim are recorded together, at most FLUSH_WINDOW_MS late: fewer, larger
   * transactions on a writer connection that the claims need too (on SQLite there is one per process). A
   * crash loses at most the results of that window, whose attempts are then made again.
   */
  private scheduleFlush(): void {
    if (this.finished.length >= FLUSH_BATCH) this.kick();
    else this.flushTimer ??= setTimeout(() => this.kick(), FLUSH_WINDOW_MS);
  }

  /** Records every finished attempt, including those a cycle already running is recording. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.finished.length === 0) {
        await this.cycling;
        if (this.finished.length === 0) return;
      }
      try {
        await this.cycle(false);
        this.flushFailures = 0;
      } catch (error) {
        this.flushFailures += 1;
        const retryMs = Math.min(100 * 2 ** this.flushFailures, DATABASE_RETRY_CAP_MS);
        this.services.logger.error(
          { err: error, results: this.finished.length, retry_ms: retryMs },
          'could not record webhook attempts',
        );
        if (this.stopping && this.flushFailures > 3) {
          // Give up on shutdown: the leases lapse and these attempts are made again by whoever claims them.
          for (const item of this.finished.splice(0)) this.leased.delete(item.row.id);
          return;
        }
        await sleep(retryMs);
      }
    }
  }

  /**
   * One statement updates every delivery of the batch (`UPDATE … FROM` the results, bound as a few values),
   * where the lease is still ours; one more inserts the attempts of the rows it updated. Row by row it was
   * 0.45 ms a row on SQLite and 0.83 ms on Postgres, which capped a dispatcher at about 1,000 deliveries a
   * second. Both are raw SQL (knex's query builder cost more than the statements themselves) and named, so
   * Postgres plans them once per connection rather than every cycle (about 0.45 ms a cycle, 2-4 us of its CPU
   * per delivery).
   */
  private async record(trx: Knex, batch: Finished[]): Promise<void> {
    const { engine } = this.services.db;
    const schedule = this.settings.retryScheduleSeconds;
    const planned = batch.map((item) => {
      const { row, outcome } = item;
      const number = row.attempts + 1;
      const status = outcome.ok ? 'succeeded' : number >= schedule.length ? 'failed' : 'pending';
      const next = status === 'pending' ? item.finishedAt + Math.round((schedule[number] ?? 0) * 1000) : null;
      return { item, number, status, next };
    });
    const results = boundRows(
      engine,
      RESULT_COLUMNS,
      planned.map(({ item, number, status, next }) => [
        item.row.id,
        item.token,
        status,
        number,
        next,
        item.startedAt,
        item.outcome.statusCode,
        item.outcome.error,
        item.finishedAt,
      ]),
    );
    const recorded = await runNamed<{ id: string }>(
      trx,
      'svc_webhooks_record',
      `UPDATE webhook_deliveries SET status = v.status, attempts = v.attempts,
         next_attempt_at = v.next_attempt_at, last_attempt_at = v.last_attempt_at,
         last_response_status = v.last_response_status, last_error = v.last_error,
         locked_by = NULL, locked_until = NULL, updated_at = v.updated_at
       FROM ${results.sql} AS v
       WHERE webhook_deliveries.id = v.id AND webhook_deliveries.locked_by = v.token
       RETURNING webhook_deliveries.id`,
      results.bindings,
    );
    const updated = new Set(recorded.map((row) => row.id));
    const kept = planned.filter(({ item }) => {
      if (updated.has(item.row.id)) return true;
      // Our lease lapsed (we were presumed dead) and another dispatcher owns the row now: its result counts.
      this.services.logger.warn({ delivery: item.row.id }, 'lease lost before the attempt was recorded');
      return false;
    });
    if (kept.length === 0) return;
    await this.recordHealth(
      trx,
      kept.map(({ item }) => item),
    );
    const ids = attemptIds(kept.length);
    const attempts = boundRows(
      engine,
      ATTEMPT_COLUMNS,
      kept.map(({ item, number }, i) => [
        ids[i]!,
        item.row.id,
        number,
        item.startedAt,
        item.durationMs,
        item.outcome.statusCode,
        item.outcome.error,
        item.outcome.excerpt,
      ]),
    );
    await runNamed(
      trx,
      'svc_webhooks_attempts',
      `INSERT INTO webhook_attempts
         (id, delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt)
       SELECT id, delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt
       FROM ${attempts.sql} AS v`,
      attempts.bindings,
    );
  }

  /**
   * Counts the batch's unanswered attempts on their endpoints, and backs off those that reach the threshold.
   * One statement for the counts; it writes only endpoints whose health changes (an endpoint that keeps
   * succeeding is neither written nor locked, so emitters reading it `FOR SHARE` never wait on us). Backing
   * an endpoint off is rarer: its end and the move of its pending rows are written per endpoint.
   *
   * A success that arrives while another dispatcher's back-off of the same endpoint is running resets the
   * count but leaves the rows that back-off moved at its end (at most `backoffMaxSeconds`): learning the old
   * end would cost a read per cycle. A tenant's update or a redelivery pulls them back (`endBackoff`).
   */
  private async recordHealth(trx: Knex, batch: Finished[]): Promise<void> {
    const changes = healthChanges(
      batch.map((item) => ({
        endpointId: item.row.endpoint_id,
        ok: item.outcome.ok,
        unanswered: item.unanswered,
      })),
    );
    if (changes.length === 0) return;
    const values = boundRows(
      this.services.db.engine,
      HEALTH_COLUMNS,
      changes.map((change) => [change.endpointId, change.reset ? 1 : 0, change.added]),
    );
    const counted = await runNamed<{ id: string; unanswered_attempts: number; backoff_until: number | null }>(
      trx,
      'svc_webhooks_health',
      `UPDATE webhook_endpoints SET
         unanswered_attempts = CASE WHEN v.reset = 1 THEN v.added
           ELSE webhook_endpoints.unanswered_attempts + v.added END,
         backoff_until = CASE WHEN v.reset = 1 THEN NULL ELSE webhook_endpoints.backoff_until END
       FROM ${values.sql} AS v
       WHERE webhook_endpoints.id = v.id AND (v.added > 0 OR webhook_endpoints.unanswered_attempts <> 0
         OR webhook_endpoints.backoff_until IS NOT NULL)
       RETURNING webhook_endpoints.id, webhook_endpoints.unanswered_attempts, webhook_endpoints.backoff_until`,
      values.bindings,
    );
    const added = new Map(changes.map((change) => [change.endpointId, change.added]));
    const now = this.services.clock.now();
    for (const row of counted) {
      if ((added.get(row.id) ?? 0) === 0) continue;
      const unanswered = Number(row.unanswered_attempts);
      const current = row.backoff_until === null ? null : Number(row.backoff_until);
      const until = backoffUntil(unanswered, current, now, this.settings);
      if (until === null) continue;
      this.backedOff.add(row.id);
      if (until === current) continue;
      await trx('webhook_endpoints').where({ id: row.id }).update({ backoff_until: until });
      await holdDeliveriesUntil(trx, row.id, until, now);
      this.services.logger.warn(
        { endpoint: row.id, unanswered_attempts: unanswered, backoff_until: new Date(until).toISOString() },
        'webhook endpoint backed off: its attempts go unanswered',
      );
    }
  }

  private async renewLeases(): Promise<void> {
    if (this.leased.size === 0) return;
    const entries = [...this.leased];
    const until = this.services.clock.now() + this.leaseMs;
    try {
      await this.services.db.transaction(async (trx) => {
        for (let i = 0; i < entries.length; i += 400) {
          const chunk = entries.slice(i, i + 400);
          await trx('webhook_deliveries')
            .whereIn(
              'id',
              chunk.map(([id]) => id),
            )
            .whereIn('locked_by', [...new Set(chunk.map(([, token]) => token))])
            .update({ locked_until: until });
        }
      });
    } catch (error) {
      // Retried at the next beat; recording checks the lease anyway.
      this.services.logger.warn({ err: (error as Error).message }, 'could not renew delivery leases');
    }
  }
}

/**
 * `newId('wa')` for a whole batch (prefix and 16 hex characters from the CSPRNG) from one draw: a draw per
 * id cost as much as signing the attempt.
 */
function attemptIds(count: number): string[] {
  const hex = randomBytes(8 * count).toString('hex');
  return Array.from({ length: count }, (_, i) => `wa_${hex.slice(16 * i, 16 * i + 16)}`);
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
