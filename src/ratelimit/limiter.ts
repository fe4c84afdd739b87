import type { Knex } from 'knex';
import type { RateLimit } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { floorSql } from '../db/dialect.js';
import {
  describe,
  shareGrant,
  spareTokensToTake,
  take,
  type BucketState,
  type Decision,
} from './token-bucket.js';

export interface RateLimiter {
  take(bucketKey: string, limit: RateLimit, now: number): Promise<Decision>;
}

/** Buckets in this process's memory: the fast path for a single API node (DESIGN §2). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, BucketState>();

  async take(bucketKey: string, limit: RateLimit, now: number): Promise<Decision> {
    const decision = take(this.buckets.get(bucketKey), limit, now);
    this.buckets.set(bucketKey, decision.state);
    if (this.buckets.size > 100_000) this.prune(now, limit);
    return decision;
  }

  private prune(now: number, limit: RateLimit): void {
    const fullAfterMs = (limit.burst / limit.perMinute) * 60_000;
    for (const [key, state] of this.buckets)
      if (now - state.updatedAt > fullAfterMs) this.buckets.delete(key);
  }
}

interface Waiter {
  now: number;
  resolve(decision: Decision): void;
  reject(error: unknown): void;
}

/** Tokens this process took beyond its requests' need, with the bucket as the database left it. */
interface Spare {
  tokens: number;
  /** The bucket after the grant, less the spare tokens. */
  after: BucketState;
  expiresAt: number;
}

/** Spare tokens lapse soon, so a process that stops getting requests does not hold them for long. */
const SPARE_LIFETIME_MS = 1000;

/**
 * Buckets in the database, shared by every API process. One atomic upsert computes the refill and takes
 * as many whole tokens as it can, up to the number asked for, so two processes can never both spend the
 * last token. Requests of one bucket that arrive while its statement runs wait and are charged together
 * by the next one: a statement per request would queue every request of a busy key on that key's row lock.
 * A key with a large burst also takes a few spare tokens per statement and spends them from memory
 * (`spareTokensToTake`).
 */
export class DatabaseRateLimiter implements RateLimiter {
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly charging = new Set<string>();
  private readonly spares = new Map<string, Spare>();
  private readonly sql: string;

  constructor(private readonly db: Database) {
    // Casts fix the parameters' types, which Postgres would otherwise infer from the columns.
    const elapsed =
      'CASE WHEN CAST(:now AS BIGINT) > rate_limit_buckets.updated_at THEN CAST(:now AS BIGINT) - rate_limit_buckets.updated_at ELSE 0 END';
    const grown = `rate_limit_buckets.tokens + (${elapsed}) * CAST(:rate AS DOUBLE PRECISION)`;
    const refilled = `(CASE WHEN ${grown} > CAST(:burst AS DOUBLE PRECISION) THEN CAST(:burst AS DOUBLE PRECISION) ELSE ${grown} END)`;
    const whole = floorSql(db.engine, refilled);
    const granted = `(CASE WHEN ${whole} >= CAST(:wanted AS INTEGER) THEN CAST(:wanted AS INTEGER) ELSE ${whole} END)`;
    this.sql = `INSERT INTO rate_limit_buckets (bucket_key, tokens, granted, updated_at)
       VALUES (:key, CAST(:freshTokens AS DOUBLE PRECISION), CAST(:freshGranted AS INTEGER), CAST(:now AS BIGINT))
       ON CONFLICT (bucket_key) DO UPDATE SET
         tokens = ${refilled} - ${granted},
         granted = ${granted},
         updated_at = CASE WHEN CAST(:now AS BIGINT) > rate_limit_buckets.updated_at
           THEN CAST(:now AS BIGINT) ELSE rate_limit_buckets.updated_at END
       RETURNING tokens, granted, updated_at`;
  }

  take(bucketKey: string, limit: RateLimit, now: number): Promise<Decision> {
    const fromSpare = this.spendSpare(bucketKey, limit, now);
    if (fromSpare) return Promise.resolve(fromSpare);
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(bucketKey);
      if (queue) queue.push({ now, resolve, reject });
      else this.waiting.set(bucketKey, [{ now, resolve, reject }]);
      if (!this.charging.has(bucketKey)) void this.chargeWaiting(bucketKey, limit);
    });
  }

  private async chargeWaiting(bucketKey: string, limit: RateLimit): Promise<void> {
    this.charging.add(bucketKey);
    try {
      for (let batch = this.waiting.get(bucketKey); batch; batch = this.waiting.get(bucketKey)) {
        this.waiting.delete(bucketKey);
        // Spare tokens taken by the statement these requests waited for are theirs first.
        while (batch.length > 0) {
          const decision = this.spendSpare(bucketKey, limit, batch[0]!.now);
          if (!decision) break;
          batch.shift()!.resolve(decision);
        }
        if (batch.length === 0) continue;
        try {
          const now = Math.max(...batch.map((waiter) => waiter.now));
          const spare = spareTokensToTake(this.spares.get(bucketKey)?.after, limit);
          const { granted, after } = await this.takeTokens(bucketKey, limit, now, batch.length + spare);
          const used = Math.min(granted, batch.length);
          const kept = { tokens: granted - used, after, expiresAt: now + SPARE_LIFETIME_MS };
          if (this.spares.size > 100_000) this.spares.clear();
          this.spares.set(bucketKey, kept);
          const seen = { tokens: after.tokens + kept.tokens, updatedAt: after.updatedAt };
          shareGrant(used, seen, batch.length, limit).forEach((decision, index) =>
            batch![index]!.resolve(decision),
          );
        } catch (error) {
          for (const waiter of batch) waiter.reject(error);
        }
      }
    } finally {
      this.charging.delete(bucketKey);
    }
  }

  private spendSpare(bucketKey: string, limit: RateLimit, now: number): Decision | undefined {
    const spare = this.spares.get(bucketKey);
    if (!spare || spare.tokens < 1 || now >= spare.expiresAt || now < spare.after.updatedAt) return undefined;
    spare.tokens -= 1;
    return describe(
      true,
      { tokens: spare.after.tokens + spare.tokens, updatedAt: spare.after.updatedAt },
      limit,
    );
  }

  private async takeTokens(
    bucketKey: string,
    limit: RateLimit,
    now: number,
    wanted: number,
  ): Promise<{ granted: number; after: BucketState }> {
    const freshGranted = Math.min(wanted, Math.floor(limit.burst));
    const result = await this.db.volatileWriter.raw(this.sql, {
      key: bucketKey,
      now,
      rate: limit.perMinute / 60_000,
      burst: limit.burst,
      wanted,
      freshTokens: limit.burst - freshGranted,
      freshGranted,
    });
    const row = (Array.isArray(result) ? result[0] : result.rows[0]) as {
      tokens: number;
      granted: number;
      updated_at: number;
    };
    return {
      granted: Number(row.granted),
      after: { tokens: Number(row.tokens), updatedAt: Number(row.updated_at) },
    };
  }
}

/**
 * Removes up to `limit` buckets of the database store whose key starts with `prefix` and that nobody took
 * from since `idleBefore`: buckets of things that end (a widget session's consent starts), which would
 * otherwise stay one row each for ever. A removed bucket is a full one, as an idle bucket is by then.
 */
export async function pruneIdleBuckets(
  db: Knex,
  prefix: string,
  idleBefore: number,
  limit: number,
): Promise<number> {
  const keys = db('rate_limit_buckets')
    .select('bucket_key')
    .whereRaw("bucket_key LIKE ? ESCAPE '\\'", [`${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`])
    .where('updated_at', '<', idleBefore)
    .limit(limit);
  return db('rate_limit_buckets').whereIn('bucket_key', keys).delete();
}
