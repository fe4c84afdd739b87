import type { Clock } from '../../clock/clock.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../logging/logger.js';
import { releaseClaims, renewLeases } from './queue.js';

/**
 * The leases a dispatcher holds on the rows it claimed, from the claim until the row's result is written or
 * the row is given back: renewed every third of their length while held, so that only a dead dispatcher's
 * lapse. Whose a lease is, is its token (one per claim); recording checks it anyway.
 */
export class Leases {
  /** Every row we hold a lease on (in flight or waiting to be recorded), with its lease token. */
  private readonly held = new Map<string, string>();

  constructor(
    private readonly services: { db: Database; clock: Clock; logger: Logger },
    readonly ms: number,
  ) {}

  hold(id: string, token: string): void {
    this.held.set(id, token);
  }

  /** No longer ours to renew: recorded, given back, or given up. With `token`, only if it is still that lease. */
  drop(id: string, token?: string): void {
    if (token === undefined || this.held.get(id) === token) this.held.delete(id);
  }

  /** Renews the leases held every third of their length, until the returned function is called. */
  keepRenewed(): () => void {
    const timer = setInterval(() => void this.renew(), Math.max(100, Math.floor(this.ms / 3)));
    return () => clearInterval(timer);
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0) return;
    const { db, clock, logger } = this.services;
    try {
      await renewLeases(db, [...this.held], clock.now() + this.ms);
    } catch (error) {
      // Retried at the next beat; recording checks the lease anyway.
      logger.warn({ err: (error as Error).message }, 'could not renew delivery leases');
    }
  }

  /** Gives back rows in hand not attempted (on shutdown, or of endpoints backed off), whatever their claim. */
  async giveBack(rows: readonly { id: string; token: string }[]): Promise<void> {
    const byToken = new Map<string, string[]>();
    for (const { id, token } of rows) {
      this.drop(id);
      byToken.set(token, [...(byToken.get(token) ?? []), id]);
    }
    for (const [token, ids] of byToken) await this.release(token, ids);
  }

  /** Gives back rows of the claim `token` not attempted: claimable at once rather than when the lease lapses. */
  async release(token: string, ids: readonly string[]): Promise<void> {
    for (const id of ids) this.drop(id, token);
    if (ids.length === 0) return;
    await releaseClaims(this.services.db, token, ids).catch((error: Error) =>
      // Not fatal: the lease lapses by itself.
      this.services.logger.warn({ err: error.message }, 'could not release claimed deliveries'),
    );
  }
}
