import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { systemClock, type Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { claimBatch } from '../db/claims.js';
import type { Database } from '../db/database.js';
import { watchCommits, type CommitWatcher } from '../db/notify.js';
import { DELIVERY_CHANNEL, presentEvent, type EventRow } from '../events/outbox.js';
import { newId } from '../ids/ids.js';
import type { Logger } from '../logging/logger.js';
import type { SecretBox } from '../secrets/secret-box.js';
import type { AttemptRow, DeliveryRow } from './deliveries.js';
import { signingSecrets, type WebhookEndpointRow } from './endpoints.js';
import { DeliverySender, type SendOutcome } from './sender.js';
import { headerNames, signatureHeader } from './signature.js';

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

/** The columns a claim returns: what an attempt and its record need. */
const CLAIMED_COLUMNS = [
  'id',
  'org_id',
  'mode',
  'event_id',
  'event_type',
  'endpoint_id',
  'status',
  'attempts',
  'next_attempt_at',
] as const;
type ClaimedRow = Pick<DeliveryRow, (typeof CLAIMED_COLUMNS)[number]>;

interface Ready {
  row: ClaimedRow;
  token: string;
  endpoint: WebhookEndpointRow;
  event: EventRow;
}

interface Finished {
  row: ClaimedRow;
  token: string;
  outcome: SendOutcome;
  startedAt: number;
  finishedAt: number;
  durationMs: number;
}

/**
 * A row is due when it is pending, its time has come, nobody holds a live lease on it (an expired lease is
 * a dead dispatcher's: the row is claimed again, with the same event id) and its endpoint is enabled.
 */
const DUE = `status = 'pending' AND next_attempt_at <= ? AND (locked_until IS NULL OR locked_until < ?)
  AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE disabled = ?)`;

/** Rows written per flush transaction (9 bound values per row: far below SQLite's limit). */
const FLUSH_BATCH = 250;

/**
 * Rows kept in hand beyond those in flight, in sets of the concurrency: one set in flight and two queued,
 * overall and per endpoint. A claim is made while a set is still queued, so its latency (a few ms) is
 * hidden behind attempts already in hand.
 */
const SETS_IN_HAND = 3;

/** How long a finished attempt may wait for others to be recorded with it. */
const FLUSH_WINDOW_MS = 10;

/**
 * The webhook dispatcher of one process.
 *
 * Work flows in batches because every claim and every result is a write (on SQLite through the one writer
 * connection of the process) and a few round trips: a claim takes a batch of due rows in one statement
 * (`claimBatch`: `UPDATE … RETURNING`, `FOR UPDATE SKIP LOCKED` on Postgres) into a local queue, up to
 * three times `concurrency` rows in hand, and a new claim is made while a set is still queued, so its
 * latency is hidden behind attempts already in hand. Each finished attempt starts the next queued row at once,
 * with no database work; results are recorded together, one transaction per flush (one `UPDATE … FROM
 * (VALUES …)` for the deliveries, one insert for the attempts). A row's lease, held from its claim until its
 * result is written, stops anyone from claiming it twice. Measured on Postgres at 16 in flight: claiming per
 * freed slot and recording row by row, 745 deliveries/s; batched as here, about 4,000 (bench/webhooks.ts).
 *
 * Isolation: at most `concurrency` attempts in flight, at most `perEndpointConcurrency` to one endpoint,
 * and at most three times that many rows of one endpoint in hand. Claims skip endpoints at that mark, so a slow
 * receiver holds its few slots and every other endpoint keeps flowing.
 *
 * Wake-up: a cheap indexed read tells whether anything is due and when the next row will be; the loop
 * sleeps until then, at most `pollIntervalMs`, and wakes early on another process's commit (Postgres
 * LISTEN/NOTIFY, the SQLite WAL watched; see src/db/notify.ts) or when its queue runs low.
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
  private readonly owner: string;
  private readonly headers: { signature: string; eventId: string };
  private readonly userAgent: string;
  private batches = 0;
  /** HTTP exchanges in flight, overall and by endpoint. */
  private active = 0;
  private readonly perEndpoint = new Map<string, number>();
  /** Claimed rows, with what they need, waiting for a slot; and how many of each endpoint are in hand. */
  private queue: Ready[] = [];
  private readonly inHand = new Map<string, number>();
  /** Every row we hold a lease on (in flight or waiting to be recorded), with its lease token. */
  private readonly leased = new Map<string, string>();
  private readonly inFlight = new Set<Promise<void>>();
  private finished: Finished[] = [];
  private flushing: Promise<void> | null = null;
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
    this.sender = new DeliverySender({
      attemptTimeoutMs: config.dispatcher.attemptTimeoutMs,
      responseBytesKept: config.dispatcher.responseBytesKept,
      allowPrivateAddresses: config.webhooks.allowPrivateAddresses,
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
          // Our own trouble (the database, usually): back off rather than spin, up to 30 s.
          failures += 1;
          waitMs = Math.min(this.settings.pollIntervalMs * 2 ** failures, 30_000);
          logger.error({ err: error, retry_ms: waitMs }, 'dispatcher could not claim deliveries');
        }
        if (!signal.aborted) await this.waitForWake(waitMs);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.stopping = true;
      await this.releaseQueue();
      await Promise.allSettled([...this.inFlight]);
      await this.flush();
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
      if (this.inFlight.size === 0 && this.queue.length === 0) {
        await this.flush();
        if (started === 0) return total;
        continue;
      }
      // Finishing attempts start the queued rows; wait for all of them.
      while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
      await this.flush();
    }
  }

  async close(): Promise<void> {
    this.stopping = true;
    await this.releaseQueue();
    await Promise.allSettled([...this.inFlight]);
    await this.flush();
    await this.sender.close();
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

  /**
   * Claims due rows into the queue until enough are in hand or nothing more is due, starting them as slots
   * allow; returns when the next row will be due, when that is known.
   */
  private async fill(): Promise<{ started: number; nextDueAt: number | null }> {
    const { concurrency, perEndpointConcurrency } = this.settings;
    const capacity = SETS_IN_HAND * concurrency;
    let started = 0;
    let full = false;
    for (;;) {
      const held = this.active + this.queue.length;
      // Enough in hand: the next claim waits until half of it has gone out.
      if (this.stopping || (held > 0 && capacity - held < Math.ceil(concurrency / 2))) {
        return { started, nextDueAt: null };
      }
      // An endpoint with less than a set of room is skipped; every other has room for a whole batch, so a
      // claim never brings more rows of one endpoint than it may hold.
      const busy = [...this.inHand]
        .filter(([, n]) => n > (SETS_IN_HAND - 1) * perEndpointConcurrency)
        .map(([id]) => id);
      const now = this.services.clock.now();
      // The read that says whether anything is due keeps an idle SQLite dispatcher off the write lock; after
      // a full batch there is probably more, so it is skipped.
      const nextDueAt = full ? now : await this.nextDue(now, busy);
      if (nextDueAt === null || nextDueAt > now) return { started, nextDueAt };
      // As many as fit: overall, and for the fullest endpoint that may come back (any endpoint not skipped
      // may fill the whole batch).
      const fullest = Math.max(0, ...[...this.inHand].filter(([id]) => !busy.includes(id)).map(([, n]) => n));
      const limit = Math.min(capacity - held, SETS_IN_HAND * perEndpointConcurrency - fullest);
      const token = `${this.owner}:${(this.batches += 1)}`;
      const exclude = busy.length > 0 ? ` AND endpoint_id NOT IN (${busy.map(() => '?').join(', ')})` : '';
      const rows = await claimBatch<ClaimedRow>(this.services.db, {
        table: 'webhook_deliveries',
        owner: token,
        now,
        leaseMs: this.leaseMs,
        where: DUE + exclude,
        bindings: [now, now, false, ...busy],
        orderBy: 'next_attempt_at',
        limit,
        // What an attempt needs, not the whole row: measured 18% more deliveries/s on SQLite.
        returning: CLAIMED_COLUMNS.join(', '),
      });
      // Due, yet taken by someone else between the read and the claim: look again shortly, not at once.
      if (rows.length === 0) return { started, nextDueAt: full ? null : now + 50 };
      full = rows.length === limit;
      started += await this.enqueue(rows, token);
      this.pump();
    }
  }

  /** When the earliest claimable row is due (maybe in the past), or null when none is pending. */
  private async nextDue(now: number, busy: string[]): Promise<number | null> {
    let query = this.services.db
      .reader('webhook_deliveries')
      .where('status', 'pending')
      .whereNotNull('next_attempt_at')
      .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', now))
      .whereIn('endpoint_id', (q) => q.select('id').from('webhook_endpoints').where('disabled', false));
    if (busy.length > 0) query = query.whereNotIn('endpoint_id', busy);
    const row: { next_attempt_at: number } | undefined = await query
      .orderBy('next_attempt_at')
      .first('next_attempt_at');
    return row ? Number(row.next_attempt_at) : null;
  }

  /**
   * Loads the events and endpoints of claimed rows and queues them; rows beyond an endpoint's mark, and rows
   * whose endpoint was deleted or disabled since, are given back.
   */
  private async enqueue(claimed: ClaimedRow[], token: string): Promise<number> {
    const endpointCap = SETS_IN_HAND * this.settings.perEndpointConcurrency;
    const giveBack: string[] = [];
    let queued = 0;
    try {
      const [events, endpoints] = await Promise.all([
        this.services.db
          .reader<EventRow>('events')
          .whereIn('id', [...new Set(claimed.map((r) => r.event_id))]),
        this.services.db
          .reader<WebhookEndpointRow>('webhook_endpoints')
          .whereIn('id', [...new Set(claimed.map((r) => r.endpoint_id))]),
      ]);
      const eventById = new Map(events.map((e) => [e.id, e]));
      const endpointById = new Map(endpoints.map((e) => [e.id, e]));
      claimed.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));
      for (const row of claimed) {
        const event = eventById.get(row.event_id);
        const endpoint = endpointById.get(row.endpoint_id);
        const inHand = this.inHand.get(row.endpoint_id) ?? 0;
        if (!event || !endpoint || endpoint.disabled || inHand >= endpointCap) {
          giveBack.push(row.id);
          continue;
        }
        this.inHand.set(row.endpoint_id, inHand + 1);
        this.leased.set(row.id, token);
        this.queue.push({ row, token, endpoint, event });
        queued += 1;
      }
    } finally {
      // On an error (reading events), every claimed row goes back; otherwise the ones not taken.
      await this.release(token, queued === 0 ? claimed.map((r) => r.id) : giveBack);
    }
    return queued;
  }

  /** Starts queued rows, oldest first, while slots are free and their endpoints are under their limit. */
  private pump(): void {
    const { concurrency, perEndpointConcurrency } = this.settings;
    for (let i = 0; i < this.queue.length && this.active < concurrency && !this.stopping;) {
      const ready = this.queue[i]!;
      const endpointId = ready.row.endpoint_id;
      if ((this.perEndpoint.get(endpointId) ?? 0) >= perEndpointConcurrency) {
        i += 1;
        continue;
      }
      this.queue.splice(i, 1);
      this.active += 1;
      this.perEndpoint.set(endpointId, (this.perEndpoint.get(endpointId) ?? 0) + 1);
      const attempt = this.attempt(ready).finally(() => this.inFlight.delete(attempt));
      this.inFlight.add(attempt);
    }
  }

  private done(row: ClaimedRow): void {
    this.active -= 1;
    for (const counts of [this.perEndpoint, this.inHand]) {
      const left = (counts.get(row.endpoint_id) ?? 1) - 1;
      if (left > 0) counts.set(row.endpoint_id, left);
      else counts.delete(row.endpoint_id);
    }
  }

  /** On shutdown the rows not started go back at once, rather than waiting out their lease. */
  private async releaseQueue(): Promise<void> {
    const queued = this.queue;
    this.queue = [];
    const byToken = new Map<string, string[]>();
    for (const ready of queued) {
      this.leased.delete(ready.row.id);
      const left = (this.inHand.get(ready.row.endpoint_id) ?? 1) - 1;
      if (left > 0) this.inHand.set(ready.row.endpoint_id, left);
      else this.inHand.delete(ready.row.endpoint_id);
      byToken.set(ready.token, [...(byToken.get(ready.token) ?? []), ready.row.id]);
    }
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

  private async attempt({ row, token, endpoint, event }: Ready): Promise<void> {
    const { clock, secrets } = this.services;
    const startedAt = clock.now();
    const began = performance.now();
    let outcome: SendOutcome;
    try {
      const body = JSON.stringify(presentEvent(event));
      // Signed afresh for every attempt, with its own timestamp.
      const timestamp = Math.floor(this.wallClock.now() / 1000);
      const signature = signatureHeader(signingSecrets(endpoint, secrets, startedAt), timestamp, body);
      outcome = await this.sender.send(
        endpoint.url,
        row.mode,
        {
          'content-type': 'application/json',
          'user-agent': this.userAgent,
          [this.headers.signature]: signature,
          [this.headers.eventId]: event.id,
        },
        body,
      );
    } catch (error) {
      outcome = {
        statusCode: null,
        ok: false,
        excerpt: null,
        error: `not sent: ${(error as Error).message}`.slice(0, 300),
      };
    }
    this.finished.push({
      row,
      token,
      outcome,
      startedAt,
      finishedAt: clock.now(),
      durationMs: Math.round(performance.now() - began),
    });
    this.done(row);
    this.scheduleFlush();
    this.pump();
    // Time to claim more of this endpoint's rows once it has room for a set again. (Other endpoints' rows
    // wake the loop themselves: a commit, their own attempts, the next-due timer or the poll.)
    const { perEndpointConcurrency } = this.settings;
    if ((this.inHand.get(row.endpoint_id) ?? 0) <= (SETS_IN_HAND - 1) * perEndpointConcurrency) this.wake();
  }

  /**
   * Results are recorded together, at most FLUSH_WINDOW_MS late: fewer, larger transactions on a writer
   * connection that the claims need too (on SQLite there is one per process). A crash loses at most the
   * results of that window, whose attempts are then made again.
   */
  private scheduleFlush(): void {
    if (this.flushTimer) {
      if (this.finished.length < FLUSH_BATCH) return;
      clearTimeout(this.flushTimer);
    }
    const delay = this.finished.length >= FLUSH_BATCH ? 0 : FLUSH_WINDOW_MS;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      void this.flush();
    }, delay);
  }

  /** Records every finished attempt; one flush at a time, each a transaction of up to FLUSH_BATCH results. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.flushing) {
        await this.flushing;
        continue;
      }
      if (this.finished.length === 0) return;
      this.flushing = this.writeFinished().finally(() => {
        this.flushing = null;
      });
    }
  }

  private async writeFinished(): Promise<void> {
    const batch = this.finished.splice(0, FLUSH_BATCH);
    try {
      await this.services.db.transaction((trx) => this.record(trx, batch));
      this.flushFailures = 0;
      for (const item of batch)
        if (this.leased.get(item.row.id) === item.token) this.leased.delete(item.row.id);
    } catch (error) {
      this.flushFailures += 1;
      const retryMs = Math.min(100 * 2 ** this.flushFailures, 10_000);
      this.services.logger.error(
        { err: error, results: batch.length, retry_ms: retryMs },
        'could not record webhook attempts',
      );
      if (this.stopping && this.flushFailures > 3) {
        // Give up on shutdown: the leases lapse and these attempts are made again by whoever claims them.
        for (const item of batch) this.leased.delete(item.row.id);
        return;
      }
      this.finished.unshift(...batch);
      await sleep(retryMs);
    }
  }

  /**
   * One statement updates every delivery of the batch (`UPDATE … FROM (VALUES …)`, on both engines), where
   * the lease is still ours; one more inserts the attempts of the rows it updated. Row by row it was 0.45 ms
   * a row on SQLite and 0.83 ms on Postgres, which capped a dispatcher at about 1,000 deliveries a second.
   */
  private async record(trx: Knex, batch: Finished[]): Promise<void> {
    const schedule = this.settings.retryScheduleSeconds;
    const planned = batch.map((item) => {
      const { row, outcome } = item;
      const number = row.attempts + 1;
      const status = outcome.ok ? 'succeeded' : number >= schedule.length ? 'failed' : 'pending';
      const next = status === 'pending' ? item.finishedAt + Math.round((schedule[number] ?? 0) * 1000) : null;
      return { item, number, status, next };
    });
    const rows = planned
      .map(
        () =>
          '(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS BIGINT))',
      )
      .join(', ');
    const bindings = planned.flatMap(({ item, number, status, next }) => [
      item.row.id,
      item.token,
      status,
      number,
      next,
      item.startedAt,
      item.outcome.statusCode,
      item.outcome.error,
      item.finishedAt,
    ]);
    const result = await trx.raw(
      `UPDATE webhook_deliveries SET status = v.column3, attempts = v.column4, next_attempt_at = v.column5,
         last_attempt_at = v.column6, last_response_status = v.column7, last_error = v.column8,
         locked_by = NULL, locked_until = NULL, updated_at = v.column9
       FROM (VALUES ${rows}) AS v
       WHERE webhook_deliveries.id = v.column1 AND webhook_deliveries.locked_by = v.column2
       RETURNING webhook_deliveries.id`,
      bindings,
    );
    const updated = new Set(
      ((Array.isArray(result) ? result : result.rows) as { id: string }[]).map((row) => row.id),
    );
    const attempts: AttemptRow[] = [];
    for (const { item, number } of planned) {
      if (!updated.has(item.row.id)) {
        // Our lease lapsed (we were presumed dead) and another dispatcher owns the row now: its result counts.
        this.services.logger.warn({ delivery: item.row.id }, 'lease lost before the attempt was recorded');
        continue;
      }
      attempts.push({
        id: newId('wa'),
        delivery_id: item.row.id,
        number,
        started_at: item.startedAt,
        duration_ms: item.durationMs,
        status_code: item.outcome.statusCode,
        error: item.outcome.error,
        response_excerpt: item.outcome.excerpt,
      });
    }
    for (let i = 0; i < attempts.length; i += 100) {
      await trx('webhook_attempts').insert(attempts.slice(i, i + 100));
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
