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

interface Finished {
  row: DeliveryRow;
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

/** Rows written per flush transaction (7 bound values per attempt row: far below SQLite's limit). */
const FLUSH_BATCH = 250;

/**
 * The webhook dispatcher of one process.
 *
 * Work flows in batches because on SQLite every claim and every result is a write through the one writer
 * connection of the process: a claim takes up to `min(free slots, perEndpointConcurrency)` due rows in one
 * statement (`claimBatch`: `UPDATE … RETURNING`, `FOR UPDATE SKIP LOCKED` on Postgres), and finished
 * attempts are recorded together, in one transaction per flush (the attempt rows and the delivery updates).
 * A slot is given back when the HTTP exchange ends, not when its result is written; the row's lease, kept
 * until then, stops anyone from claiming it twice.
 *
 * Isolation: at most `concurrency` attempts in flight, at most `perEndpointConcurrency` to one endpoint.
 * Claims skip endpoints that are at their limit, so a slow receiver holds its few slots and every other
 * endpoint keeps flowing.
 *
 * Wake-up: a cheap indexed read tells whether anything is due and when the next row will be; the loop
 * sleeps until then, at most `pollIntervalMs`, and wakes early on another process's commit (Postgres
 * LISTEN/NOTIFY, the SQLite WAL watched; see src/db/notify.ts) or when a slot frees up.
 *
 * Crash safety: a claim sets a lease (renewed every third of its length while the attempt runs). A `kill -9`
 * loses the attempt in flight and its result; the lease lapses and the row is claimed again: the receiver
 * may get the event twice, always with the same event id. Attempts are counted when their result is
 * recorded, so a crash never uses up one of the six.
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
  /** Every row we hold a lease on (in flight or waiting to be recorded), with its lease token. */
  private readonly leased = new Map<string, string>();
  private readonly inFlight = new Set<Promise<void>>();
  private finished: Finished[] = [];
  private flushing: Promise<void> | null = null;
  private flushScheduled = false;
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
      if (started === 0 && this.inFlight.size === 0) {
        await this.flush();
        return total;
      }
      total += started;
      await Promise.allSettled([...this.inFlight]);
      await this.flush();
    }
  }

  async close(): Promise<void> {
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

  /** Claims due rows until the slots are full or nothing more is due; returns when the next row is due. */
  private async fill(): Promise<{ started: number; nextDueAt: number | null }> {
    const { concurrency, perEndpointConcurrency } = this.settings;
    let started = 0;
    for (;;) {
      const room = concurrency - this.active;
      if (room <= 0 || this.stopping) return { started, nextDueAt: null };
      const busy = [...this.perEndpoint].filter(([, n]) => n >= perEndpointConcurrency).map(([id]) => id);
      const now = this.services.clock.now();
      const nextDueAt = await this.nextDue(now, busy);
      if (nextDueAt === null || nextDueAt > now) return { started, nextDueAt };
      const limit = Math.min(room, perEndpointConcurrency);
      const token = `${this.owner}:${(this.batches += 1)}`;
      const exclude = busy.length > 0 ? ` AND endpoint_id NOT IN (${busy.map(() => '?').join(', ')})` : '';
      const rows = await claimBatch<DeliveryRow>(this.services.db, {
        table: 'webhook_deliveries',
        owner: token,
        now,
        leaseMs: this.leaseMs,
        where: DUE + exclude,
        bindings: [now, now, false, ...busy],
        orderBy: 'next_attempt_at',
        limit,
      });
      if (rows.length === 0) return { started, nextDueAt: null };
      started += await this.start(rows, token);
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

  /** Takes the claimed rows its slots allow, gives the others back, and starts an attempt for each. */
  private async start(claimed: DeliveryRow[], token: string): Promise<number> {
    const { concurrency, perEndpointConcurrency } = this.settings;
    claimed.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));
    const accepted: DeliveryRow[] = [];
    const giveBack: string[] = [];
    for (const row of claimed) {
      const count = this.perEndpoint.get(row.endpoint_id) ?? 0;
      if (count < perEndpointConcurrency && this.active < concurrency) {
        this.take(row);
        this.leased.set(row.id, token);
        accepted.push(row);
      } else {
        giveBack.push(row.id);
      }
    }
    let started = 0;
    try {
      const [events, endpoints] = await Promise.all([
        this.services.db.reader<EventRow>('events').whereIn('id', [...new Set(accepted.map((r) => r.event_id))]),
        this.services.db
          .reader<WebhookEndpointRow>('webhook_endpoints')
          .whereIn('id', [...new Set(accepted.map((r) => r.endpoint_id))]),
      ]);
      const eventById = new Map(events.map((e) => [e.id, e]));
      const endpointById = new Map(endpoints.map((e) => [e.id, e]));
      for (const row of accepted) {
        const event = eventById.get(row.event_id);
        const endpoint = endpointById.get(row.endpoint_id);
        if (!event || !endpoint || endpoint.disabled) {
          // Deleted or disabled since the claim: nothing to send (a deleted one's rows are gone already).
          this.giveSlot(row);
          this.leased.delete(row.id);
          giveBack.push(row.id);
          continue;
        }
        const attempt = this.attempt(row, token, endpoint, event).finally(() => this.inFlight.delete(attempt));
        this.inFlight.add(attempt);
        started += 1;
      }
    } catch (error) {
      for (const row of accepted) {
        if (this.leased.get(row.id) !== token) continue;
        this.giveSlot(row);
        this.leased.delete(row.id);
        giveBack.push(row.id);
      }
      await this.release(token, giveBack);
      throw error;
    }
    await this.release(token, giveBack);
    return started;
  }

  private take(row: DeliveryRow): void {
    this.active += 1;
    this.perEndpoint.set(row.endpoint_id, (this.perEndpoint.get(row.endpoint_id) ?? 0) + 1);
  }

  private giveSlot(row: DeliveryRow): void {
    this.active -= 1;
    const left = (this.perEndpoint.get(row.endpoint_id) ?? 1) - 1;
    if (left > 0) this.perEndpoint.set(row.endpoint_id, left);
    else this.perEndpoint.delete(row.endpoint_id);
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

  private async attempt(
    row: DeliveryRow,
    token: string,
    endpoint: WebhookEndpointRow,
    event: EventRow,
  ): Promise<void> {
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
    this.giveSlot(row);
    this.scheduleFlush();
    this.wake();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
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
      for (const item of batch) if (this.leased.get(item.row.id) === item.token) this.leased.delete(item.row.id);
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

  private async record(trx: Knex, batch: Finished[]): Promise<void> {
    const schedule = this.settings.retryScheduleSeconds;
    const attempts: AttemptRow[] = [];
    for (const item of batch) {
      const { row, outcome } = item;
      const number = row.attempts + 1;
      const exhausted = number >= schedule.length;
      const status = outcome.ok ? 'succeeded' : exhausted ? 'failed' : 'pending';
      const updated = await trx('webhook_deliveries')
        .where({ id: row.id, locked_by: item.token })
        .update({
          status,
          attempts: number,
          next_attempt_at:
            status === 'pending' ? item.finishedAt + Math.round((schedule[number] ?? 0) * 1000) : null,
          last_attempt_at: item.startedAt,
          last_response_status: outcome.statusCode,
          last_error: outcome.error,
          locked_by: null,
          locked_until: null,
          updated_at: item.finishedAt,
        });
      if (updated !== 1) {
        // Our lease lapsed (we were presumed dead) and another dispatcher owns the row now: its result counts.
        this.services.logger.warn({ delivery: row.id }, 'lease lost before the attempt was recorded');
        continue;
      }
      attempts.push({
        id: newId('wa'),
        delivery_id: row.id,
        number,
        started_at: item.startedAt,
        duration_ms: item.durationMs,
        status_code: outcome.statusCode,
        error: outcome.error,
        response_excerpt: outcome.excerpt,
      });
    }
    for (let i = 0; i < attempts.length; i += 100) {
      await trx('webhook_attempts').insert(attempts.slice(i, i + 100));
    }
    if (attempts.length > 0) {
      this.services.logger.debug({ recorded: attempts.length }, 'webhook attempts recorded');
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
