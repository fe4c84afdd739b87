import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import { recordAudit } from '../audit/audit-log.js';
import { fetchPage, type PageWindow } from '../db/paging.js';
import type { RateGroup, RateLimit } from '../config/defaults.js';
import { effectiveLimits, type RateLimitOverrides } from '../ratelimit/overrides.js';

export interface Organisation {
  object: 'organisation';
  id: string;
  name: string;
  /** The groups whose ceiling the operator set; the others' is the configured default. */
  rate_limit_ceilings: RateLimitOverrides | null;
  /** How many live API keys the organisation may hold (the operator's cap, else DEFAULT_MAX_LIVE_KEYS). */
  max_live_keys: number;
  /** Whether the operator set `max_live_keys`; false when it is the default. */
  max_live_keys_set: boolean;
  created_at: string;
}

/**
 * Live keys an organisation may hold until the operator says otherwise. `svc install` makes four (a secret
 * and a publishable key per mode); 20 leaves room for a key per service and a rotation or two, and bounds
 * what an admin can issue: each key is another credential to leak, and before issue 44 another set of rate
 * buckets.
 */
export const DEFAULT_MAX_LIVE_KEYS = 20;

/** The highest cap the operator may set: a sanity bound, not a budget (the buckets are organisation-wide). */
export const MAX_LIVE_KEYS_LIMIT = 10_000;

interface OrganisationRow {
  id: string;
  name: string;
  rate_limit_ceilings: string | null;
  max_live_keys: number | null;
  created_at: number;
}

const storedCeilings = (row: Pick<OrganisationRow, 'rate_limit_ceilings'> | undefined) =>
  row?.rate_limit_ceilings ? (JSON.parse(row.rate_limit_ceilings) as RateLimitOverrides) : null;

const present = (row: OrganisationRow): Organisation => ({
  object: 'organisation',
  id: row.id,
  name: row.name,
  rate_limit_ceilings: storedCeilings(row),
  max_live_keys: row.max_live_keys ?? DEFAULT_MAX_LIVE_KEYS,
  max_live_keys_set: row.max_live_keys !== null && row.max_live_keys !== undefined,
  created_at: toIso(row.created_at)!,
});

export async function createOrganisation(
  trx: Knex,
  name: string,
  actor: string,
  now: number,
): Promise<Organisation> {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) {
    throw errors.invalidParameter('name', 'An organisation name must have 1 to 200 characters.');
  }
  const row: OrganisationRow = {
    id: newId('org'),
    name: trimmed,
    rate_limit_ceilings: null,
    max_live_keys: null,
    created_at: now,
  };
  await trx('organisations').insert(row);
  await recordAudit(
    trx,
    { orgId: row.id, actor, action: 'organisation.created', targetType: 'organisation', targetId: row.id },
    now,
  );
  return present(row);
}

export async function listOrganisations(db: Knex): Promise<Organisation[]> {
  const rows: OrganisationRow[] = await db('organisations').select('*').orderBy('created_at').orderBy('id');
  return rows.map(present);
}

/** One page of organisations, oldest first (the console's list for operators). */
export async function pageOrganisations(
  db: Knex,
  window: PageWindow,
): Promise<{ data: Organisation[]; total: number }> {
  const { rows, total } = await fetchPage<OrganisationRow>(
    () => db<OrganisationRow>('organisations'),
    [
      ['created_at', 'asc'],
      ['id', 'asc'],
    ],
    window.offset,
    window.limit,
  );
  return { data: rows.map(present), total };
}

export async function getOrganisation(db: Knex, id: string): Promise<Organisation> {
  const row: OrganisationRow | undefined = await db('organisations').where({ id }).first();
  if (!row) throw errors.notFound(`No organisation ${id}.`, 'org');
  return present(row);
}

/**
 * Holds the organisation's row until the transaction ends, so that count-then-insert checks across its rows
 * are taken one at a time: on Postgres a second transaction waits here for the first to commit (SQLite's
 * writers take turns already). A no-op update, as SQLite has no `FOR UPDATE`.
 */
export async function lockOrganisation(trx: Knex, orgId: string): Promise<void> {
  await trx('organisations')
    .where({ id: orgId })
    .update({ name: trx.ref('name') });
}

/**
 * The most an organisation admin may give a key of the organisation, per group: what the operator set, else
 * the configured default. The operator's own changes (`svc keys limits`, the console as operator) are not
 * bound by them.
 */
export async function organisationCeilings(
  db: Knex,
  orgId: string,
  defaults: Record<RateGroup, RateLimit>,
): Promise<Record<RateGroup, RateLimit>> {
  const row: Pick<OrganisationRow, 'rate_limit_ceilings'> | undefined = await db('organisations')
    .where({ id: orgId })
    .first('rate_limit_ceilings');
  if (!row) throw errors.notFound(`No organisation ${orgId}.`, 'org');
  return effectiveLimits(defaults, storedCeilings(row));
}

/**
 * Sets the operator's ceilings for some groups (the others keep theirs), or with `reset` returns every group
 * to the configured default. Keys already above a lowered ceiling keep their limits (the caller lists them).
 */
export async function setOrganisationCeilings(
  trx: Knex,
  input: { orgId: string; ceilings: RateLimitOverrides; reset: boolean; actor: string; now: number },
): Promise<Organisation> {
  const row: OrganisationRow | undefined = await trx('organisations').where({ id: input.orgId }).first();
  if (!row) throw errors.notFound(`No organisation ${input.orgId}.`, 'org');
  const merged = { ...(input.reset ? {} : (storedCeilings(row) ?? {})), ...input.ceilings };
  const stored = Object.keys(merged).length > 0 ? JSON.stringify(merged) : null;
  await trx('organisations').where({ id: row.id }).update({ rate_limit_ceilings: stored });
  await recordAudit(
    trx,
    {
      orgId: row.id,
      actor: input.actor,
      action: 'organisation.rate_limit_ceilings_changed',
      targetType: 'organisation',
      targetId: row.id,
      details: { rate_limit_ceilings: stored ? merged : null },
    },
    input.now,
  );
  return present({ ...row, rate_limit_ceilings: stored });
}

/** The most live API keys the organisation may hold (checked by `createApiKey`). */
export async function liveKeyCap(db: Knex, orgId: string): Promise<number> {
  const row: Pick<OrganisationRow, 'max_live_keys'> | undefined = await db('organisations')
    .where({ id: orgId })
    .first('max_live_keys');
  if (!row) throw errors.notFound(`No organisation ${orgId}.`, 'org');
  return row.max_live_keys ?? DEFAULT_MAX_LIVE_KEYS;
}

/**
 * Sets the operator's cap on the organisation's live keys, or with null returns it to the default. Keys
 * already beyond a lowered cap keep working (revoking is the operator's call); no new one is issued until
 * the organisation is under it.
 */
export async function setOrganisationKeyCap(
  trx: Knex,
  input: { orgId: string; maxLiveKeys: number | null; actor: string; now: number },
): Promise<Organisation> {
  const cap = input.maxLiveKeys;
  if (cap !== null && (!Number.isInteger(cap) || cap < 1 || cap > MAX_LIVE_KEYS_LIMIT))
    throw errors.invalidParameter(
      'max_live_keys',
      `The cap on live keys must be a whole number from 1 to ${MAX_LIVE_KEYS_LIMIT}.`,
    );
  const row: OrganisationRow | undefined = await trx('organisations').where({ id: input.orgId }).first();
  if (!row) throw errors.notFound(`No organisation ${input.orgId}.`, 'org');
  await trx('organisations').where({ id: row.id }).update({ max_live_keys: cap });
  await recordAudit(
    trx,
    {
      orgId: row.id,
      actor: input.actor,
      action: 'organisation.key_cap_changed',
      targetType: 'organisation',
      targetId: row.id,
      details: { max_live_keys: cap ?? DEFAULT_MAX_LIVE_KEYS, set_by_operator: cap !== null },
    },
    input.now,
  );
  return present({ ...row, max_live_keys: cap });
}
