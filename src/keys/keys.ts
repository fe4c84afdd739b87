import type { Knex } from 'knex';
import type { Database } from '../db/database.js';
import { fetchPage, NEWEST_FIRST, type PageWindow } from '../db/paging.js';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import { recordAudit } from '../audit/audit-log.js';
import { sha256Hex } from '../secrets/secret-box.js';
import type { RateGroup, RateLimit } from '../config/defaults.js';
import { aboveCeiling, withinCeilings, type RateLimitOverrides } from '../ratelimit/overrides.js';
import { liveKeyCap, lockOrganisation, organisationCeilings } from '../orgs/orgs.js';
import { generateApiKey, type KeyType, type Mode } from './key-format.js';

export interface ApiKeyRow {
  id: string;
  org_id: string;
  mode: Mode;
  type: KeyType;
  token_hash: string;
  prefix: string;
  last4: string;
  name: string | null;
  rate_limits: string | null;
  bucket_id: string;
  rotated_from: string | null;
  rotated_to: string | null;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
}

export type KeyStatus = 'active' | 'expiring' | 'expired' | 'revoked';

export interface ApiKeyView {
  object: 'api_key';
  id: string;
  org_id: string;
  mode: Mode;
  type: KeyType;
  /** Prefix and last four characters only: the key itself is shown once, at creation. */
  redacted: string;
  name: string | null;
  status: KeyStatus;
  rate_limits: RateLimitOverrides | null;
  rotated_from: string | null;
  rotated_to: string | null;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

export function keyStatus(row: Pick<ApiKeyRow, 'revoked_at' | 'expires_at'>, now: number): KeyStatus {
  if (row.revoked_at !== null) return 'revoked';
  if (row.expires_at !== null) return row.expires_at <= now ? 'expired' : 'expiring';
  return 'active';
}

export function presentKey(row: ApiKeyRow, now: number): ApiKeyView {
  return {
    object: 'api_key',
    id: row.id,
    org_id: row.org_id,
    mode: row.mode,
    type: row.type,
    redacted: `${row.prefix}…${row.last4}`,
    name: row.name,
    status: keyStatus(row, now),
    rate_limits: row.rate_limits ? (JSON.parse(row.rate_limits) as RateLimitOverrides) : null,
    rotated_from: row.rotated_from,
    rotated_to: row.rotated_to,
    created_at: toIso(row.created_at)!,
    last_used_at: toIso(row.last_used_at),
    expires_at: toIso(row.expires_at),
    revoked_at: toIso(row.revoked_at),
  };
}

export interface CreateKeyInput {
  brand: string;
  orgId: string;
  mode: Mode;
  type: KeyType;
  name?: string | null;
  rateLimits?: RateLimitOverrides | null;
  actor: string;
  now: number;
}

export interface IssuedKey {
  key: ApiKeyView;
  /** The plaintext key: returned here and nowhere else, ever. */
  secret: string;
}

/**
 * Issues a key, within the organisation's cap on live keys (issue 44, item 2): the count and the insert are
 * taken one organisation at a time (`lockOrganisation`), so parallel requests cannot all pass the count.
 */
export async function createApiKey(trx: Knex, input: CreateKeyInput): Promise<IssuedKey> {
  const org = await trx('organisations').where({ id: input.orgId }).first('id');
  if (!org) throw errors.notFound(`No organisation ${input.orgId}.`, 'org');
  await lockOrganisation(trx, input.orgId);
  const [cap, live] = [await liveKeyCap(trx, input.orgId), await countLiveKeys(trx, input.orgId, input.now)];
  if (live >= cap)
    throw errors.conflict(
      'key_limit_reached',
      `Organisation ${input.orgId} holds ${live} live API keys, its cap is ${cap}: revoke one, or ask the operator to raise the cap (svc orgs ceilings ${input.orgId} --max-live-keys N).`,
    );
  const id = newId('key');
  const issued = await insertKey(trx, { ...input, id, bucketId: id, rotatedFrom: null, expiresAt: null });
  await recordAudit(
    trx,
    {
      orgId: input.orgId,
      actor: input.actor,
      action: 'api_key.created',
      targetType: 'api_key',
      targetId: id,
      details: { mode: input.mode, type: input.type, rate_limits: input.rateLimits ?? null },
    },
    input.now,
  );
  return issued;
}

async function insertKey(
  trx: Knex,
  input: CreateKeyInput & {
    id: string;
    bucketId: string;
    rotatedFrom: string | null;
    expiresAt: number | null;
  },
): Promise<IssuedKey> {
  const secret = generateApiKey(input.brand, input.type, input.mode);
  const row: ApiKeyRow = {
    id: input.id,
    org_id: input.orgId,
    mode: input.mode,
    type: input.type,
    token_hash: sha256Hex(secret),
    prefix: secret.slice(0, secret.indexOf(`_${input.mode}_`) + input.mode.length + 2),
    last4: secret.slice(-4),
    name: input.name ?? null,
    rate_limits:
      input.rateLimits && Object.keys(input.rateLimits).length > 0 ? JSON.stringify(input.rateLimits) : null,
    bucket_id: input.bucketId,
    rotated_from: input.rotatedFrom,
    rotated_to: null,
    created_at: input.now,
    last_used_at: null,
    expires_at: input.expiresAt,
    revoked_at: null,
  };
  await trx('api_keys').insert(row);
  return { key: presentKey(row, input.now), secret };
}

export async function listApiKeys(
  db: Knex,
  filter: { orgId?: string; includeRevoked?: boolean },
  now: number,
): Promise<ApiKeyView[]> {
  const query = db<ApiKeyRow>('api_keys').select('*').orderBy('created_at').orderBy('id');
  if (filter.orgId) query.where('org_id', filter.orgId);
  if (!filter.includeRevoked) query.whereNull('revoked_at');
  return (await query).map((row) => presentKey(row, now));
}

/** One page of an organisation's keys in a mode, newest first (the console's table). */
export async function pageApiKeys(
  db: Knex,
  filter: { orgId: string; mode: Mode },
  window: PageWindow,
  now: number,
): Promise<{ data: ApiKeyView[]; total: number }> {
  const { rows, total } = await fetchPage<ApiKeyRow>(
    () => db<ApiKeyRow>('api_keys').where({ org_id: filter.orgId, mode: filter.mode }),
    NEWEST_FIRST,
    window.offset,
    window.limit,
  );
  return { data: rows.map((row) => presentKey(row, now)), total };
}

/** A key of this organisation and mode, or a 404 that names nothing of another's. */
export async function findScopedKey(
  db: Knex,
  scope: { orgId: string; mode: Mode },
  keyId: string,
  now: number,
): Promise<ApiKeyView> {
  const row: ApiKeyRow | undefined = await db('api_keys')
    .where({ id: keyId, org_id: scope.orgId, mode: scope.mode })
    .first();
  if (!row) throw errors.notFound(`No API key ${keyId}.`, 'key');
  return presentKey(row, now);
}

async function loadKey(trx: Knex, keyId: string): Promise<ApiKeyRow> {
  const row: ApiKeyRow | undefined = await trx('api_keys').where({ id: keyId }).first();
  if (!row) throw errors.notFound(`No API key ${keyId}.`, 'key');
  return row;
}

/**
 * Issues a successor with the same organisation, mode, type and rate bucket; the old key keeps working for
 * `graceSeconds` and then answers 401 (Stripe's "roll key"). The successor's own limits are the old key's
 * held to the organisation's ceilings of today (issue 44, item 2): a key set above a since-lowered ceiling
 * does not hand its limits on; what was cut is in the audit row and in `limits_lowered`.
 */
export async function rotateApiKey(
  trx: Knex,
  input: {
    brand: string;
    keyId: string;
    graceSeconds: number;
    actor: string;
    now: number;
    /** The configured rate limits (`config.rateLimits`): the ceilings of an organisation the operator left. */
    defaultLimits: Record<RateGroup, RateLimit>;
  },
): Promise<IssuedKey & { previous: ApiKeyView; limits_lowered: RateGroup[] }> {
  const old = await loadKey(trx, input.keyId);
  const status = keyStatus(old, input.now);
  if (status === 'revoked' || status === 'expired') {
    throw errors.conflict('key_inactive', `API key ${old.id} is ${status} and cannot be rotated.`);
  }
  if (old.rotated_to)
    throw errors.conflict(
      'key_already_rotated',
      `API key ${old.id} was already rotated to ${old.rotated_to}.`,
    );
  const id = newId('key');
  const ceilings = await organisationCeilings(trx, old.org_id, input.defaultLimits);
  const inherited = old.rate_limits ? (JSON.parse(old.rate_limits) as RateLimitOverrides) : null;
  const held = inherited ? withinCeilings(inherited, ceilings) : { limits: null, lowered: [] };
  const issued = await insertKey(trx, {
    brand: input.brand,
    orgId: old.org_id,
    mode: old.mode,
    type: old.type,
    name: old.name,
    rateLimits: held.limits,
    actor: input.actor,
    now: input.now,
    id,
    bucketId: old.bucket_id,
    rotatedFrom: old.id,
    expiresAt: null,
  });
  await recordAudit(
    trx,
    {
      orgId: old.org_id,
      actor: input.actor,
      action: 'api_key.created',
      targetType: 'api_key',
      targetId: id,
      details: {
        rotated_from: old.id,
        rate_limits: held.limits,
        ...(held.lowered.length > 0 ? { limits_lowered_to_ceiling: held.lowered } : {}),
      },
    },
    input.now,
  );
  const expiresAt = input.now + input.graceSeconds * 1000;
  await trx('api_keys').where({ id: old.id }).update({ rotated_to: id, expires_at: expiresAt });
  await recordAudit(
    trx,
    {
      orgId: old.org_id,
      actor: input.actor,
      action: 'api_key.rotated',
      targetType: 'api_key',
      targetId: old.id,
      details: { successor: id, grace_seconds: input.graceSeconds },
    },
    input.now,
  );
  return {
    ...issued,
    previous: presentKey({ ...old, rotated_to: id, expires_at: expiresAt }, input.now),
    limits_lowered: held.lowered,
  };
}

export async function revokeApiKey(
  trx: Knex,
  input: { keyId: string; actor: string; now: number },
): Promise<ApiKeyView> {
  const row = await loadKey(trx, input.keyId);
  if (row.revoked_at !== null) return presentKey(row, input.now);
  await trx('api_keys').where({ id: row.id }).update({ revoked_at: input.now });
  await recordAudit(
    trx,
    {
      orgId: row.org_id,
      actor: input.actor,
      action: 'api_key.revoked',
      targetType: 'api_key',
      targetId: row.id,
    },
    input.now,
  );
  return presentKey({ ...row, revoked_at: input.now }, input.now);
}

export async function setKeyRateLimits(
  trx: Knex,
  input: { keyId: string; rateLimits: RateLimitOverrides; actor: string; now: number },
): Promise<ApiKeyView> {
  const row = await loadKey(trx, input.keyId);
  const merged = {
    ...(row.rate_limits ? (JSON.parse(row.rate_limits) as RateLimitOverrides) : {}),
    ...input.rateLimits,
  };
  const rateLimits = JSON.stringify(merged);
  await trx('api_keys').where({ id: row.id }).update({ rate_limits: rateLimits });
  await recordAudit(
    trx,
    {
      orgId: row.org_id,
      actor: input.actor,
      action: 'api_key.rate_limits_changed',
      targetType: 'api_key',
      targetId: row.id,
      details: { rate_limits: merged },
    },
    input.now,
  );
  return presentKey({ ...row, rate_limits: rateLimits }, input.now);
}

/**
 * Notes when a key was last used. The authenticator calls it off the request's path, at most once per key
 * per cache period, so a busy key costs one write a minute rather than one a request.
 */
export async function recordKeyUse(
  db: Pick<Database, 'transaction'>,
  keyId: string,
  at: number,
): Promise<void> {
  await db.transaction((trx) => trx('api_keys').where({ id: keyId }).update({ last_used_at: at }));
}

/**
 * How many keys of an organisation and mode work now, by type, and how many of them have rate limits of
 * their own (the console's overview). A count over `api_keys(org_id, mode, type)`: an organisation has few.
 */
export async function keyFiguresOfScope(
  db: Knex,
  scope: { orgId: string; mode: Mode },
  now: number,
): Promise<{ secret: number; publishable: number; ownLimits: number }> {
  const rows: { type: string; n: number | string; own_limits: number | string | null }[] = await db(
    'api_keys',
  )
    .where({ org_id: scope.orgId, mode: scope.mode })
    .whereNull('revoked_at')
    .where((live) => live.whereNull('expires_at').orWhere('expires_at', '>', now))
    .groupBy('type')
    .select('type')
    .count({ n: '*' })
    .select(db.raw('sum(case when rate_limits is null then 0 else 1 end) as own_limits'));
  const of = (type: string) => Number(rows.find((row) => row.type === type)?.n ?? 0);
  return {
    secret: of('secret'),
    publishable: of('publishable'),
    ownLimits: rows.reduce((sum, row) => sum + Number(row.own_limits ?? 0), 0),
  };
}

/** The organisation's live keys whose own limits are above `ceilings` (kept when the operator lowers one). */
export async function keysAboveCeilings(
  db: Knex,
  orgId: string,
  ceilings: Record<RateGroup, RateLimit>,
  now: number,
): Promise<string[]> {
  const rows: Pick<ApiKeyRow, 'id' | 'rate_limits'>[] = await db('api_keys')
    .where({ org_id: orgId })
    .whereNotNull('rate_limits')
    .whereNull('revoked_at')
    .where((live) => live.whereNull('expires_at').orWhere('expires_at', '>', now))
    .orderBy('id')
    .select('id', 'rate_limits');
  return rows
    .filter((row) => aboveCeiling(JSON.parse(row.rate_limits!) as RateLimitOverrides, ceilings) !== null)
    .map((row) => row.id);
}

/**
 * The organisation's live keys, both modes and types, counted against its cap. A key in its rotation grace
 * is not counted: its successor is, and both share one bucket and expire into one key.
 */
export async function countLiveKeys(db: Knex, orgId: string, now: number): Promise<number> {
  const row = await db('api_keys')
    .where({ org_id: orgId })
    .whereNull('revoked_at')
    .whereNull('rotated_to')
    .where((live) => live.whereNull('expires_at').orWhere('expires_at', '>', now))
    .count({ n: '*' })
    .first();
  return Number((row as { n: number | string } | undefined)?.n ?? 0);
}

/** Working live-mode keys of every organisation (`svc doctor`: is this box serving live tenants?). */
export async function countLiveModeKeys(db: Knex, now: number): Promise<number> {
  const row = await db('api_keys')
    .where({ mode: 'live' })
    .whereNull('revoked_at')
    .where((live) => live.whereNull('expires_at').orWhere('expires_at', '>', now))
    .count({ n: '*' })
    .first();
  return Number((row as { n: number | string } | undefined)?.n ?? 0);
}
