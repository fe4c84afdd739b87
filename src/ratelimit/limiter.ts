import type { Knex } from 'knex';
import type { RateLimit } from '../config/defaults.js';
import { describe, take, type BucketState, type Decision } from './token-bucket.js';

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

/**
 * Buckets in the database, shared by every API process: one atomic upsert computes the refill, takes a
 * token if there is one and returns the result, so two processes can never both spend the last token.
 * Written with CASE rather than LEAST/MIN so the one statement serves both engines.
 */
export class DatabaseRateLimiter implements RateLimiter {
  constructor(private readonly db: Knex) {}

  async take(bucketKey: string, limit: RateLimit, now: number): Promise<Decision> {
    // Casts fix the parameters' types, which Postgres would otherwise infer from the bigint columns.
    const elapsed =
      'CASE WHEN CAST(:now AS BIGINT) > rate_limit_buckets.updated_at THEN CAST(:now AS BIGINT) - rate_limit_buckets.updated_at ELSE 0 END';
    const grown = `rate_limit_buckets.tokens + (${elapsed}) * CAST(:rate AS DOUBLE PRECISION)`;
    const refilled = `(CASE WHEN ${grown} > CAST(:burst AS DOUBLE PRECISION) THEN CAST(:burst AS DOUBLE PRECISION) ELSE ${grown} END)`;
    const result = await this.db.raw(
      `INSERT INTO rate_limit_buckets (bucket_key, tokens, allowed, updated_at)
       VALUES (:key, CAST(:burst AS DOUBLE PRECISION) - 1, true, CAST(:now AS BIGINT))
       ON CONFLICT (bucket_key) DO UPDATE SET
         tokens = CASE WHEN ${refilled} >= 1 THEN ${refilled} - 1 ELSE ${refilled} END,
         allowed = CASE WHEN ${refilled} >= 1 THEN true ELSE false END,
         updated_at = CASE WHEN CAST(:now AS BIGINT) > rate_limit_buckets.updated_at
           THEN CAST(:now AS BIGINT) ELSE rate_limit_buckets.updated_at END
       RETURNING tokens, allowed, updated_at`,
      { key: bucketKey, now, rate: limit.perMinute / 60_000, burst: limit.burst },
    );
    const row = (Array.isArray(result) ? result[0] : result.rows[0]) as {
      tokens: number;
      allowed: boolean | number;
      updated_at: number;
    };
    return describe(
      Boolean(row.allowed),
      { tokens: Number(row.tokens), updatedAt: Number(row.updated_at) },
      limit,
    );
  }
}
