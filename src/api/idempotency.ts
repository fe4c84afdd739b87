import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { Knex } from 'knex';
import type { Principal } from '../auth/principal.js';
import { ApiError, errors } from '../errors/api-error.js';
import { isUniqueViolation } from '../db/errors.js';
import type { AppServices } from './services.js';
import type { Database } from '../db/database.js';
import { idempotencyContext } from '../secrets/sealed-columns.js';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const IN_FLIGHT_LEASE_MS = 60_000;

interface IdempotencyRow {
  request_hash: string;
  status_code: number | null;
  response_body: string | null;
  locked_until: number | null;
  created_at: number;
}

/**
 * `Idempotency-Key` on any POST: the first request's response is kept for the configured time (24 h) and
 * replayed for a repeat with the same body; a different body is 409 `idempotency_key_reused`. Server errors
 * are not kept, so a retry after a 5xx runs again. The kind of credential is part of the request: a
 * publishable key (which lives in browsers) must never be handed an answer first made for the secret key,
 * such as a widget token, nor the reverse; a rotated secret key's successor is the same kind and replays.
 */
export async function withIdempotency(
  ctx: Context,
  services: AppServices,
  principal: Principal,
  body: unknown,
  next: (requestServices?: AppServices) => Promise<void>,
) {
  const key = ctx.get('Idempotency-Key');
  if (ctx.method !== 'POST' || key === '') return next();
  if (!KEY_PATTERN.test(key)) {
    throw errors.invalidParameter(
      'Idempotency-Key',
      'An Idempotency-Key must be 1 to 255 printable ASCII characters.',
    );
  }
  const db = services.db;
  const now = services.clock.now();
  const where = { org_id: principal.orgId, mode: principal.mode, idempotency_key: key };
  const requestHash = createHash('sha256')
    .update(`${principal.kind} ${ctx.method} ${ctx.path}\n${JSON.stringify(body ?? null)}`)
    .digest('hex');
  const ttlMs = services.config.idempotency.ttlHours * 3_600_000;
  // A kept answer can carry a secret shown once (a webhook signing secret, a widget token), so it is sealed
  // at rest like the secrets themselves.
  const context = idempotencyContext(where);
  const keep = (answer: unknown) => services.secrets.seal(JSON.stringify(answer ?? null), context);

  const claimed = await db
    .transaction(async (trx) => {
      const existing: IdempotencyRow | undefined = await trx('idempotency_keys').where(where).first();
      if (existing && existing.created_at > now - ttlMs) {
        if (existing.request_hash !== requestHash) {
          throw errors.conflict(
            'idempotency_key_reused',
            'This Idempotency-Key was already used with a different request. Use a new key for a new request.',
          );
        }
        if (existing.status_code !== null) return existing;
        if ((existing.locked_until ?? 0) > now) {
          throw errors.conflict(
            'idempotency_key_in_use',
            'A request with this Idempotency-Key is still being processed; retry shortly.',
            {
              'Retry-After': '1',
            },
          );
        }
      }
      if (existing) await trx('idempotency_keys').where(where).delete();
      await trx('idempotency_keys').insert({
        ...where,
        request_hash: requestHash,
        status_code: null,
        response_body: null,
        locked_until: now + IN_FLIGHT_LEASE_MS,
        created_at: now,
      });
      return null;
    })
    .catch((error: unknown) => {
      if (isUniqueViolation(error)) {
        throw errors.conflict(
          'idempotency_key_in_use',
          'A request with this Idempotency-Key is still being processed; retry shortly.',
          {
            'Retry-After': '1',
          },
        );
      }
      throw error;
    });

  if (claimed) {
    ctx.status = claimed.status_code!;
    ctx.body = JSON.parse(services.secrets.open(claimed.response_body!, context));
    ctx.set('Idempotent-Replayed', 'true');
    return;
  }

  const store = (status: number, responseBody: unknown) =>
    db.transaction((trx) =>
      trx('idempotency_keys')
        .where(where)
        .update({ status_code: status, response_body: keep(responseBody), locked_until: null }),
    );
  const release = () => db.transaction((trx) => trx('idempotency_keys').where(where).delete());
  // The change and the answer are written by different transactions; a process killed between the two
  // would leave the key held (409 for the lease) and then run the request a second time. So when the
  // route's own transaction returns an API resource (`object: …`, as create and update routes do, answering
  // 200 with it), that transaction also records it as the answer; `store` below replaces it with the exact
  // answer once the route has returned. Other transactions (e.g. an MFA code's, whose outcome may be a 409)
  // record nothing. Found by test/e2e/crash-api-writes.test.ts: with kills at random moments, one in ten
  // left a key so.
  const recording: Database = {
    ...db,
    transaction: (work) =>
      db.transaction(async (trx) => {
        const result = await work(trx);
        if (isApiResource(result))
          await trx('idempotency_keys')
            .where(where)
            .update({ status_code: 200, response_body: keep(result), locked_until: null });
        return result;
      }),
  };
  try {
    await next({ ...services, db: recording });
  } catch (error) {
    if (error instanceof ApiError && error.status < 500 && error.status !== 429)
      await store(error.status, error.toEnvelope());
    else await release();
    throw error;
  }
  if (ctx.status < 500) await store(ctx.status, ctx.body ?? null);
  else await release();
}

function isApiResource(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && typeof (value as { object?: unknown }).object === 'string'
  );
}

/**
 * Removes about `limit` of the oldest keys recorded before `cutoff` (housekeeping, after
 * `idempotency.ttlHours`), walking the `created_at` index; returns how many. The key is three columns, so a
 * batch is bounded by the `created_at` of its last row rather than by ids: keys recorded in the same
 * millisecond go together, a few rows over `limit` at most.
 */
export async function pruneExpiredIdempotencyKeys(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const last: { created_at: number | string } | undefined = await trx('idempotency_keys')
    .where('created_at', '<', cutoff)
    .orderBy('created_at')
    .offset(limit - 1)
    .first('created_at');
  const expired = trx('idempotency_keys').where('created_at', '<', cutoff);
  if (last) expired.where('created_at', '<=', Number(last.created_at));
  return expired.delete();
}
