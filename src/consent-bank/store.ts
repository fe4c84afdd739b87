import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Database } from '../db/database.js';

/*
 * The consent bank's state: every oidc-provider model (sessions, interactions, PAR requests, codes, grants,
 * access and refresh tokens, registered clients) in one table this room owns, `consent_bank_state`, so that
 * grants and tokens survive a restart and work across processes on PostgreSQL.
 *
 * Nothing secret lies there in the clear. An opaque token's value is its id, and a grant id is a bearer
 * of consent, so rows are found by an HMAC of the id (`key`, `grant_key`, `uid_key`), never by the id, and
 * the payload is sealed with AES-256-GCM (the row's model and key are its associated data, so a payload
 * moved to another row does not open). Both keys come from the test CA's state secret.
 *
 * Expiry follows oidc-provider's own clock (the system clock): the library stamps `exp` with it.
 */

export const STATE_TABLE = 'consent_bank_state';

export interface StateKeys {
  hmac: Buffer;
  seal: Buffer;
}

export function stateKeys(stateSecretHex: string): StateKeys {
  const secret = Buffer.from(stateSecretHex, 'hex');
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, 32));
  return { hmac: derive('consent-bank state lookup'), seal: derive('consent-bank state seal') };
}

export function lookupKey(keys: StateKeys, value: string): string {
  return createHmac('sha256', keys.hmac).update(value).digest('hex');
}

export function seal(keys: StateKeys, aad: string, payload: unknown): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keys.seal, iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

export function unseal<T>(keys: StateKeys, aad: string, sealed: string): T {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', keys.seal, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(raw.subarray(12, 28));
  return JSON.parse(
    Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8'),
  ) as T;
}

interface StateRow {
  model: string;
  key: string;
  payload: string;
  grant_key: string | null;
  uid_key: string | null;
  user_code_key: string | null;
  expires_at: number | string | null;
  consumed_at: number | string | null;
}

export type Payload = Record<string, unknown> & { grantId?: string; uid?: string; userCode?: string };

/** What the bank's faults may change in the adapter: a payload as it is stored, whether a consume counts. */
export interface AdapterHooks {
  /** Called before a payload is stored; returns the payload to store. */
  beforeStore?(model: string, payload: Payload): Payload;
  /** False leaves a consumed code usable again (the replayed-code fault). */
  shouldConsume?(model: string, payload: Payload): boolean;
  /** True: rows of this model are not found for now (the invalidate-all fault); they stay stored. */
  hides?(model: string): boolean;
}

export interface StateStoreOptions {
  db: Database;
  keys: StateKeys;
  hooks?: AdapterHooks;
  /** Milliseconds; oidc-provider's own time. */
  now?: () => number;
}

/** The class oidc-provider instantiates once per model name (its `adapter` option). */
export function stateAdapterClass(options: StateStoreOptions) {
  const { db, keys, hooks = {} } = options;
  const now = options.now ?? Date.now;
  const live = (query: Knex.QueryBuilder) =>
    query.where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', now()));

  const decode = (row: StateRow | undefined): Payload | undefined => {
    if (!row) return undefined;
    const payload = unseal<Payload>(keys, `${row.model}:${row.key}`, row.payload);
    if (row.consumed_at !== null) payload.consumed = Math.floor(Number(row.consumed_at) / 1000);
    return payload;
  };

  return class ConsentBankStateAdapter {
    constructor(readonly model: string) {}

    async upsert(id: string, payload: Payload, expiresIn?: number): Promise<void> {
      const stored = hooks.beforeStore ? hooks.beforeStore(this.model, payload) : payload;
      const key = lookupKey(keys, id);
      const row = {
        model: this.model,
        key,
        payload: seal(keys, `${this.model}:${key}`, stored),
        grant_key: typeof stored.grantId === 'string' ? lookupKey(keys, stored.grantId) : null,
        uid_key: typeof stored.uid === 'string' ? lookupKey(keys, stored.uid) : null,
        user_code_key: typeof stored.userCode === 'string' ? lookupKey(keys, stored.userCode) : null,
        expires_at: expiresIn ? now() + expiresIn * 1000 : null,
        consumed_at: null,
      };
      await db.knex(STATE_TABLE).insert(row).onConflict(['model', 'key']).merge();
    }

    async find(id: string): Promise<Payload | undefined> {
      if (hooks.hides?.(this.model)) return undefined;
      const row = await live(
        db.knex(STATE_TABLE).where({ model: this.model, key: lookupKey(keys, id) }),
      ).first();
      return decode(row as StateRow | undefined);
    }

    async findByUid(uid: string): Promise<Payload | undefined> {
      const row = await live(
        db.knex(STATE_TABLE).where({ model: this.model, uid_key: lookupKey(keys, uid) }),
      ).first();
      return decode(row as StateRow | undefined);
    }

    async findByUserCode(userCode: string): Promise<Payload | undefined> {
      const row = await live(
        db.knex(STATE_TABLE).where({ model: this.model, user_code_key: lookupKey(keys, userCode) }),
      ).first();
      return decode(row as StateRow | undefined);
    }

    async consume(id: string): Promise<void> {
      if (hooks.shouldConsume) {
        const payload = await this.find(id);
        if (payload && !hooks.shouldConsume(this.model, payload)) return;
      }
      await db
        .knex(STATE_TABLE)
        .where({ model: this.model, key: lookupKey(keys, id) })
        .update({ consumed_at: now() });
    }

    async destroy(id: string): Promise<void> {
      await db
        .knex(STATE_TABLE)
        .where({ model: this.model, key: lookupKey(keys, id) })
        .del();
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await db
        .knex(STATE_TABLE)
        .where({ model: this.model, grant_key: lookupKey(keys, grantId) })
        .del();
    }
  };
}

/** What the Grant Management endpoint keeps of a revoked grant, so a later query answers `Revoked`. */
export interface RevokedGrant {
  clientId: string;
  accountId: string;
  revokedAt: number;
  authorizationDetails: unknown[];
}

/** How long a revoked grant's record is kept: the longest consent the draft allows (36 months). */
const REVOKED_KEPT_MS = 3 * 366 * 86_400_000;

/**
 * Revokes a grant at once: its row and every code and token of it go in one transaction, and a record of
 * the revocation takes its place. A token presented a moment later is not found.
 */
export async function revokeGrant(
  options: StateStoreOptions,
  grantId: string,
  record: RevokedGrant,
): Promise<void> {
  const { db, keys } = options;
  const now = options.now ?? Date.now;
  const grantKey = lookupKey(keys, grantId);
  await db.transaction(async (trx) => {
    await trx(STATE_TABLE).where({ grant_key: grantKey }).del();
    await trx(STATE_TABLE).where({ model: 'Grant', key: grantKey }).del();
    await trx(STATE_TABLE)
      .insert({
        model: 'RevokedGrant',
        key: grantKey,
        payload: seal(keys, `RevokedGrant:${grantKey}`, record),
        grant_key: null,
        uid_key: null,
        user_code_key: null,
        expires_at: now() + REVOKED_KEPT_MS,
        consumed_at: null,
      })
      .onConflict(['model', 'key'])
      .merge();
  });
}

export async function findRevokedGrant(
  options: StateStoreOptions,
  grantId: string,
): Promise<RevokedGrant | null> {
  const key = lookupKey(options.keys, grantId);
  const row = (await options.db.knex(STATE_TABLE).where({ model: 'RevokedGrant', key }).first()) as
    StateRow | undefined;
  return row ? unseal<RevokedGrant>(options.keys, `RevokedGrant:${key}`, row.payload) : null;
}

/** Moves a row's expiry (the early-expiry fault on a pushed request), found by its id. */
export async function setExpiry(
  options: StateStoreOptions,
  model: string,
  id: string,
  at: number,
): Promise<void> {
  await options.db
    .knex(STATE_TABLE)
    .where({ model, key: lookupKey(options.keys, id) })
    .update({ expires_at: at });
}
