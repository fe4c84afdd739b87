import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock, type Clock } from '../../clock/clock.js';
import type { Config } from '../../config/defaults.js';
import type { Database } from '../../db/database.js';
import { Waker } from '../../db/wake.js';
import type { Logger } from '../../logging/logger.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { DELIVERY_CHANNEL } from '../deliveries.js';
import { DeliveryAttempts } from './attempt.js';
import { EndpointCache, ENDPOINTS_CACHED } from './endpoint-cache.js';
import { KnownHealth } from './endpoint-health.js';
import type { Keyed } from './fair-share.js';
import { Hand } from './hand.js';
import { Leases } from './leases.js';
import { claimDue, nextDueAt, type ClaimedRow, type Endpoint } from './queue.js';
import { PendingResults, recordAttempts, type RecordContext } from './record.js';
import { ownRetryDelayMs } from './retry-policy.js';

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

interface Ready extends Keyed {
  row: ClaimedRow;
  token: string;
  endpoint: Endpoint;
}

/**
 * The webhook dispatcher of one process: a loop over its statements (queue.ts), its hand of claimed rows and
 * their fair shares (hand.ts), its endpoints' health (endpoint-health.ts), the retry policy (retry-policy.ts)
 * and the request (request.ts, attempt.ts); when it wakes is db/wake.ts's.
 *
 * Work flows in batches because every claim and every result is a write (on SQLite through the one writer
 * connection of the process) and a few round trips. One write transaction at a time, a cycle, records the
 * attempts finished since the last one and claims the next rows (record.ts, then one claim that returns each
 * row's event and its endpoint's version with it). Each finished attempt starts the next queued row at once,
 * with no database work, and a cycle runs as soon as a set has gone out (or, when nothing is to be claimed,
 * within a few milliseconds of a result: `PendingResults`). A row's lease, held from its claim until its
 * result is written, stops anyone from claiming it twice.
 *
 * Measured with bench/webhooks.ts on a shared 2-core machine at 16 in flight, beside a bare loop posting the
 * same bodies with the same client, in interleaved runs: claiming per freed slot and recording row by row,
 * 745 deliveries/s; claims and results in separate transactions, each claim followed by reads of its events
 * and endpoints, 29-38% of the bare loop on SQLite and 27-34% on Postgres; as here, 58-69% and 40-48% (what
 * is left on Postgres: see queue.ts).
 *
 * Crash safety: a claim sets a lease (renewed every third of its length while the row is in hand). A
 * `kill -9` loses the attempts in flight and their results; the leases lapse and the rows are claimed again:
 * the receiver may get an event twice, always with the same event id.
 */
export class Dispatcher {
  private readonly settings: Config['dispatcher'];
  private readonly attempts: DeliveryAttempts;
  private readonly owner: string;
  private readonly health: KnownHealth;
  private readonly hand: Hand<Ready>;
  private readonly leases: Leases;
  private readonly endpoints = new EndpointCache();
  private readonly recording: RecordContext;
  private readonly waker = new Waker();
  private batches = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly results: PendingResults;
  /** The cycle running or last run (the next waits for it), and how many are waiting. */
  private cycling: Promise<unknown> = Promise.resolve();
  private waitingCycles = 0;
  /** Under `run`, cycles started by finished attempts claim too; `dispatchDue` claims only in its own steps. */
  private claimAlong = false;
  /** The last claim came back full: more is due, so freed room is worth a claim without looking first. */
  private backlog = false;
  private stopping = false;

  constructor(
    private readonly services: DispatcherServices,
    options: DispatcherOptions = {},
  ) {
    const { config } = services;
    this.settings = config.dispatcher;
    this.attempts = new DeliveryAttempts(services, options.wallClock ?? systemClock);
    // locked_by is 64 characters: a long host name is cut.
    this.owner = `${hostname().slice(0, 24)}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.health = new KnownHealth(config.dispatcher, ENDPOINTS_CACHED);
    this.hand = new Hand(config.dispatcher, (id) => this.health.limit(id));
    this.leases = new Leases(services, config.dispatcher.leaseSeconds * 1000);
    this.results = new PendingResults(services.logger, () => this.kick());
    const { clock, logger, db } = services;
    const backedOff = (id: string) => this.health.backOff(id);
    this.recording = {
      clock,
      logger,
      engine: db.engine,
      settings: config.dispatcher,
      disableAfterFailingDays: config.webhooks.disableAfterFailingDays,
      backedOff,
    };
  }

  /**
   * Runs until `signal` aborts, then stops claiming, lets the attempts in flight finish (each is bounded by
   * its deadline), records them and returns.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { logger, config, clock } = this.services;
    // Each pass reads when the next row is due and sleeps until then (at most the poll), woken early by
    // another process's commit of a delivery unless `wakeOnCommit` is off.
    if (config.dispatcher.wakeOnCommit)
      this.waker.listen({
        url: config.databaseUrl,
        channel: DELIVERY_CHANNEL,
        onError: (error) => logger.warn({ err: error.message }, 'commit wake-ups unavailable; polling'),
      });
    const stopRenewing = this.leases.keepRenewed();
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
          if (nextDueAt !== null) waitMs = Math.max(0, Math.min(waitMs, nextDueAt - clock.now()));
        } catch (error) {
          // Our own trouble (the database, usually): back off rather than spin.
          waitMs = ownRetryDelayMs((failures += 1), this.settings.pollIntervalMs);
          logger.error({ err: error, retry_ms: waitMs }, 'dispatcher could not claim deliveries');
        }
        if (!signal.aborted) await this.waker.wait(waitMs);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.claimAlong = false;
      await this.close();
      stopRenewing();
      await this.waker.close();
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

  /** Stops claiming; the rows not started go back at once, rather than waiting out their lease. */
  async close(): Promise<void> {
    this.stopping = true;
    await this.giveBack(() => true);
    await Promise.allSettled([...this.inFlight]);
    await this.flush();
    this.results.cancel();
    await this.attempts.close();
  }

  wake(): void {
    this.waker.wake();
  }

  /**
   * Claims due rows into the queue until enough are in hand or nothing more is due, starting them as slots
   * allow; returns when the next row will be due, when that is known.
   */
  private async fill(): Promise<{ started: number; nextDueAt: number | null }> {
    let started = 0;
    for (;;) {
      if (this.stopping || !this.hand.roomToClaim()) return { started, nextDueAt: null };
      const now = this.services.clock.now();
      // The read that says whether anything is due keeps an idle SQLite dispatcher off the write lock; after
      // a full claim there is probably more, so it is skipped.
      const expected = this.backlog;
      if (!expected) {
        const next = await nextDueAt(this.services.db, now, this.hand.busy());
        if (next === null || next > now) return { started, nextDueAt: next };
      }
      const queued = await this.cycle(true);
      started += queued;
      // Due, yet taken by someone else between the read and the claim: look again shortly, not at once.
      if (queued === 0) return { started, nextDueAt: expected ? null : now + 50 };
    }
  }

  /**
   * Queues a cycle: one write transaction that records a batch of finished attempts and, with `claim`,
   * claims as many due rows as there is room for, which it queues and starts; resolves to how many it
   * queued. Cycles run one at a time, each on the state it finds when its turn comes.
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
    this.results.cancel();
    if (this.waitingCycles > 0) return;
    this.cycle(this.claimAlong && !this.stopping).then(
      () => (this.results.failures = 0),
      (error: unknown) => {
        const retryMs = this.results.failed(error);
        // On the way out, `flush` retries (and gives up) by itself.
        if (!this.stopping) this.results.retryIn(retryMs);
      },
    );
  }

  private async runCycle(claim: boolean): Promise<number> {
    const { db, clock } = this.services;
    const batch = this.results.take();
    const busy = claim && !this.stopping && this.hand.roomToClaim() ? this.hand.busy() : null;
    const limit = busy ? this.hand.claimLimit(busy) : 0;
    if (batch.length === 0 && limit <= 0) return 0;
    const began = performance.now();
    const token = `${this.owner}:${(this.batches += 1)}`;
    let claimed: ClaimedRow[];
    try {
      claimed = await db.transaction(async (trx) => {
        if (batch.length > 0) await recordAttempts(trx, batch, this.recording);
        if (!busy || limit <= 0) return [];
        const rows = await claimDue(db, trx, {
          token,
          now: clock.now(),
          leaseMs: this.leases.ms,
          busy,
          limit,
        });
        await this.endpoints.refresh(trx, rows);
        return rows;
      });
    } catch (error) {
      this.results.putBack(batch);
      throw error;
    }
    for (const item of batch) this.leases.drop(item.row.id, item.token);
    // Rows of endpoints that reached the back-off threshold go back rather than wait in hand: the record
    // above has moved them to the back-off's end (or, if it has not backed the endpoint off after all, the
    // next claim takes them again).
    if (this.health.anyBackedOff()) await this.giveBack((ready) => this.health.isBackedOff(ready.endpointId));
    let queued = 0;
    if (limit > 0) {
      this.backlog = claimed.length === limit;
      queued = await this.enqueue(claimed, token);
    }
    this.hand.adapt(performance.now() - began);
    if (this.results.count > 0) this.results.soon();
    return queued;
  }

  /**
   * Queues claimed rows and starts them; rows beyond their endpoint's or organisation's share, or without
   * their event, go back.
   */
  private async enqueue(claimed: ClaimedRow[], token: string): Promise<number> {
    const giveBack: string[] = [];
    claimed.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at));
    this.health.claimed(claimed);
    for (const row of claimed) {
      // Deleted since the claim (a Postgres statement sees commits made after the claim's): nothing to send.
      const endpoint = this.endpoints.get(row.endpoint_id);
      const ready = endpoint && { endpointId: row.endpoint_id, orgId: row.org_id, row, token, endpoint };
      if (row.event_data === null || !ready || ready.endpoint.disabled || !this.hand.admit(ready)) {
        giveBack.push(row.id);
        continue;
      }
      this.leases.hold(row.id, token);
    }
    this.pump();
    await this.leases.release(token, giveBack);
    return claimed.length - giveBack.length;
  }

  /** Starts queued rows as slots allow (hand.ts). */
  private pump(): void {
    if (this.stopping) return;
    for (const ready of this.hand.start()) {
      const attempt = this.attempt(ready).finally(() => this.inFlight.delete(attempt));
      this.inFlight.add(attempt);
    }
  }

  /** Gives back the queued rows `which` picks. */
  private giveBack(which: (ready: Ready) => boolean): Promise<void> {
    return this.leases.giveBack(this.hand.takeQueued(which).map(({ row, token }) => ({ id: row.id, token })));
  }

  private async attempt(ready: Ready): Promise<void> {
    const { finished, tookMs } = await this.attempts.make(ready.row, ready.token, ready.endpoint);
    const { outcome, unanswered } = finished;
    this.results.push(finished);
    this.health.attempted({ endpointId: ready.endpointId, ok: outcome.ok, unanswered });
    this.hand.finish(ready, tookMs);
    this.pump();
    // Time to claim once a set has gone out, if more is due or this endpoint or organisation, skipped by
    // claims while at its mark, has room again; the cycle records this result with it. (Other endpoints' new
    // rows wake the loop themselves: a commit, the next-due timer or the poll.) Otherwise the result waits
    // for the flush window.
    const claimable = this.hand.roomToClaim() && (this.backlog || this.hand.atMark(ready));
    if (claimable && this.claimAlong) this.kick();
    else this.results.soon();
  }

  /** Records every finished attempt, including those a cycle already running is recording. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.results.count === 0) {
        await this.cycling;
        if (this.results.count === 0) return;
      }
      try {
        await this.cycle(false);
        this.results.failures = 0;
      } catch (error) {
        const retryMs = this.results.failed(error);
        if (this.stopping && this.results.failures > 3) {
          // Give up on shutdown: the leases lapse and these attempts are made again by whoever claims them.
          for (const item of this.results.giveUp()) this.leases.drop(item.row.id);
          return;
        }
        await sleep(retryMs);
      }
    }
  }
}
