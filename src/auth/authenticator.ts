import type { Knex } from 'knex';
import type { Clock } from '../clock/clock.js';
import type { RateGroup, RateLimit } from '../config/defaults.js';
import { errors } from '../errors/api-error.js';
import { parseApiKey } from '../keys/key-format.js';
import { keyStatus, type ApiKeyRow } from '../keys/keys.js';
import { effectiveLimits, type RateLimitOverrides } from '../ratelimit/overrides.js';
import { organisationCeilings } from '../orgs/orgs.js';
import { findIntentByMfaToken } from '../refresh/store.js';
import { sameDigest, sha256Hex } from '../secrets/secret-box.js';
import type { Principal } from './principal.js';
import { EXCHANGE_TOKEN, INTENT_TOKEN, WIDGET_TOKEN } from './tokens.js';

export interface AuthenticatorOptions {
  db: Knex;
  clock: Clock;
  brand: string;
  defaultLimits: Record<RateGroup, RateLimit>;
  /** How long a key record is trusted from memory; a revocation takes effect within this (at most 5 s). */
  cacheSeconds: number;
  /** Called with a key id when its `last_used_at` is worth writing (at most once a minute per key). */
  onKeyUsed?: (keyId: string, at: number) => void;
}

interface CachedKey {
  row: ApiKeyRow | null;
  /** Shared by every request of the key; nothing downstream changes it. */
  principal: Principal | null;
  fetchedAt: number;
}

const MISSING = 'No API key provided. Send it as `Authorization: Bearer <key>`.';
const MALFORMED = 'The credential is malformed. Check that it was copied whole.';
const UNKNOWN = 'The credential is not valid: it does not exist, was revoked or has expired.';

/**
 * Resolves `Authorization: Bearer …` to a principal for the four credential kinds of the spec. A malformed
 * key (wrong shape, brand or checksum) is refused before any database read; key records are cached briefly
 * in memory because a lookup per request costs 25–35% of throughput (DESIGN §2).
 */
export class Authenticator {
  private readonly cache = new Map<string, CachedKey>();
  private readonly lastTouched = new Map<string, number>();

  constructor(private readonly options: AuthenticatorOptions) {}

  async authenticate(header: string | undefined): Promise<Principal> {
    if (!header) throw errors.invalidCredential(MISSING);
    const match = /^Bearer +(\S+)\s*$/i.exec(header);
    if (!match) throw errors.invalidCredential('The Authorization header must be `Bearer <key>`.');
    const token = match[1]!;
    if (WIDGET_TOKEN.test(token)) return this.widgetToken(token);
    if (INTENT_TOKEN.test(token)) return this.intentToken(token);
    if (EXCHANGE_TOKEN.test(token)) return this.exchangeToken(token);
    return this.apiKey(token);
  }

  private async apiKey(token: string): Promise<Principal> {
    const hash = sha256Hex(token);
    const now = this.options.clock.now();
    // A cached record means this token was parsed and found before, so only a new one is parsed first.
    let entry = this.cached(hash, now);
    if (!entry) {
      if (!parseApiKey(token, this.options.brand)) throw errors.invalidCredential(MALFORMED);
      entry = await this.fetch(hash, now);
    }
    const { row, principal } = entry;
    const status = row && keyStatus(row, now);
    if (!row || !principal || status === 'revoked' || status === 'expired') {
      throw errors.invalidCredential(UNKNOWN);
    }
    this.touch(row.id, now);
    return principal;
  }

  /**
   * Drops a key's cached record, so that a change made in this process (a revocation or new limits from
   * the console) applies to its next request here at once; other processes see it within `cacheSeconds`.
   */
  forgetKey(keyId: string): void {
    for (const [hash, entry] of this.cache) if (entry.row?.id === keyId) this.cache.delete(hash);
  }

  private cached(hash: string, now: number): CachedKey | undefined {
    const cached = this.cache.get(hash);
    const age = now - (cached?.fetchedAt ?? -Infinity);
    return age >= 0 && age < this.options.cacheSeconds * 1000 ? cached : undefined;
  }

  private async fetch(hash: string, now: number): Promise<CachedKey> {
    const found: ApiKeyRow | undefined = await this.options
      .db('api_keys')
      .where({ token_hash: hash })
      .first();
    // The index found the row by its hash already; this guards against a lookup that matches loosely.
    const row = found && sameDigest(found.token_hash, hash) ? found : null;
    let bucketId = row?.bucket_id ?? '';
    let overrides = row?.rate_limits ? (JSON.parse(row.rate_limits) as RateLimitOverrides) : null;
    if (row?.type === 'publishable') {
      // A publishable key shares the bucket (and limits) of its organisation's oldest live secret key of
      // the same mode, as the spec's Limits section says.
      const owner: ApiKeyRow | undefined = await this.options
        .db('api_keys')
        .where({ org_id: row.org_id, mode: row.mode, type: 'secret' })
        .whereNull('revoked_at')
        .where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', now))
        .orderBy('created_at')
        .orderBy('id')
        .first();
      if (owner) {
        bucketId = owner.bucket_id;
        overrides = owner.rate_limits ? (JSON.parse(owner.rate_limits) as RateLimitOverrides) : null;
      }
    }
    // The organisation's ceilings bind all its keys together; a change reaches here within `cacheSeconds`.
    const ceilings =
      row && (await organisationCeilings(this.options.db, row.org_id, this.options.defaultLimits));
    const entry: CachedKey = {
      row,
      principal: row && {
        kind: row.type === 'secret' ? 'secret_key' : 'publishable_key',
        orgId: row.org_id,
        mode: row.mode,
        credentialId: row.id,
        actor: `key:${row.id}`,
        bucketId,
        limits: effectiveLimits(this.options.defaultLimits, overrides),
        organisation: { bucketId: `org:${row.org_id}:${row.mode}`, ceilings: ceilings! },
      },
      fetchedAt: now,
    };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, entry);
    return entry;
  }

  private touch(keyId: string, now: number): void {
    const last = this.lastTouched.get(keyId) ?? 0;
    if (now - last < 60_000) return;
    this.lastTouched.set(keyId, now);
    this.options.onKeyUsed?.(keyId, now);
  }

  private async widgetToken(token: string): Promise<Principal> {
    const row = await this.options
      .db('widget_tokens')
      .where({ token_hash: sha256Hex(token) })
      .first();
    if (!row || row.expires_at <= this.options.clock.now()) throw errors.invalidCredential(UNKNOWN);
    return this.tokenPrincipal('widget_token', row.id, row.org_id, row.mode);
  }

  private async intentToken(token: string): Promise<Principal> {
    const row = await findIntentByMfaToken(this.options.db, sha256Hex(token));
    if (!row || row.mfa_expires_at === null || row.mfa_expires_at <= this.options.clock.now()) {
      throw errors.invalidCredential(UNKNOWN);
    }
    return this.tokenPrincipal('widget_token', row.id, row.org_id, row.mode);
  }

  private async exchangeToken(token: string): Promise<Principal> {
    const row = await this.options
      .db('exchange_tokens')
      .where({ token_hash: sha256Hex(token) })
      .first();
    if (!row || row.consumed_at !== null || row.expires_at <= this.options.clock.now())
      throw errors.invalidCredential(UNKNOWN);
    return this.tokenPrincipal('exchange_token', row.id, row.org_id, row.mode);
  }

  private tokenPrincipal(
    kind: Principal['kind'],
    id: string,
    orgId: string,
    mode: Principal['mode'],
  ): Principal {
    return {
      kind,
      orgId,
      mode,
      credentialId: id,
      actor: `${kind}:${id}`,
      bucketId: `${orgId}:${mode}:${kind}`,
      limits: this.options.defaultLimits,
    };
  }
}
