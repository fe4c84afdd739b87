import type { Knex } from 'knex';
import type { HolderType } from '../banks/connector.js';
import { fetchPage, NEWEST_FIRST, type PageWindow } from '../db/paging.js';
import type { RutDigests } from './rut-search.js';

/*
 * With link-states.ts, the only code that writes `links`: here the row's shape, its making and removal, and
 * the reads others need; there every change of a link's state, by name (the sync engine records a sync's
 * outcome, jobs mark a link queued, the widget reconnects one), so what can happen to a link is listed in
 * one file, and a new writer shows up in review (scripts/check-table-owners.js).
 */

export type LinkStatus = 'active' | 'expired';
export type RefreshStatus = 'idle' | 'queued' | 'in_progress' | 'requires_mfa';

export interface LinkRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  bank_id: string;
  holder_type: HolderType;
  holder_name: string | null;
  status: LinkStatus;
  paused: boolean | number;
  paused_at: number | null;
  external_user_id: string | null;
  consent_version: string | null;
  consent_text_hash: string | null;
  credentials_encrypted: string;
  refresh_status: RefreshStatus;
  accounts_count: number;
  new_movements_count: number;
  consecutive_failures: number;
  sync_attempts: number;
  sync_successes: number;
  last_error_code: string | null;
  last_synced_at: number | null;
  next_sync_at: number | null;
  expired_at: number | null;
  backfill_covered_from?: number | null;
  /** Keyed digests of the holder's RUTs, for finding a link by RUT (rut-search.ts). */
  rut_digest?: string | null;
  company_rut_digest?: string | null;
  created_at: number;
  updated_at: number;
}

/** What may change on a link: everything but who owns it and when it was made. */
export type LinkChanges = Partial<Omit<LinkRow, 'id' | 'org_id' | 'mode' | 'created_at'>>;

export async function insertLink(trx: Knex, row: LinkRow): Promise<void> {
  await trx('links').insert(row);
}

export async function findLink(db: Knex, id: string): Promise<LinkRow | undefined> {
  return db<LinkRow>('links').where({ id }).first();
}

export async function deleteLinkRow(trx: Knex, id: string, orgId?: string): Promise<void> {
  await trx('links')
    .where({ id, ...(orgId ? { org_id: orgId } : {}) })
    .delete();
}

/** How many links one customer user has in an organisation and mode (a widget's `connection_limit`). */
export async function countLinksOfUser(
  db: Knex,
  owner: { orgId: string; mode: 'live' | 'test'; externalUserId: string },
): Promise<number> {
  const [count] = await db('links')
    .where({ org_id: owner.orgId, mode: owner.mode, external_user_id: owner.externalUserId })
    .count({ n: '*' });
  return Number((count as { n: number | string }).n);
}

/**
 * Links the scheduler should sync, in the order they fell due: active, not paused and due, `limit` at a
 * time after `after` (the last of the previous batch), walking `links_due_idx`. Whether one already has a
 * sync under way is the jobs' business (`linksWithActiveSync`), asked batch by batch: a `NOT EXISTS` on
 * jobs here let Postgres plan an anti-join over every active job when its statistics were stale, 2.4 s
 * a tick at 100,000 links (bench/growth.ts).
 */
export async function dueLinkBatch(
  trx: Knex,
  now: number,
  limit: number,
  after: { nextSyncAt: number; id: string } | null,
): Promise<{ id: string; org_id: string; next_sync_at: number; bank_id: string; mode: 'live' | 'test' }[]> {
  const query = trx('links').where({ status: 'active', paused: false }).where('next_sync_at', '<=', now);
  if (after)
    query.where((later) =>
      later
        .where('next_sync_at', '>', after.nextSyncAt)
        .orWhere((same) => same.where('next_sync_at', after.nextSyncAt).where('id', '>', after.id)),
    );
  return query
    .orderBy([{ column: 'next_sync_at' }, { column: 'id' }])
    .limit(limit)
    .select('id', 'org_id', 'next_sync_at', 'bank_id', 'mode');
}

export interface OperatorLinkFilter {
  org?: string;
  mode?: string;
  status?: string;
  bank?: string;
  externalUser?: string;
  paused?: boolean;
  limit: number;
}

/** Links across organisations, newest first, for operators (`svc links list`). */
export async function listAllLinks(db: Knex, filter: OperatorLinkFilter): Promise<LinkRow[]> {
  const query = db<LinkRow>('links').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(filter.limit);
  if (filter.org) query.where('org_id', filter.org);
  if (filter.mode) query.where('mode', filter.mode);
  if (filter.status) query.where('status', filter.status);
  if (filter.bank) query.where('bank_id', filter.bank);
  if (filter.externalUser) query.where('external_user_id', filter.externalUser);
  if (filter.paused !== undefined) query.where('paused', filter.paused);
  return query;
}

/**
 * One page of an organisation's links in a mode, newest first, found by `query`: a link id, an
 * `external_user_id`, or the start of the holder's name (any case). The console's search.
 */
/** Links after `afterId` whose RUT digest is missing or not under the key whose digests start with `prefix`. */
export async function linksWithoutCurrentRutDigest(
  db: Knex,
  prefix: string,
  afterId: string,
  limit: number,
): Promise<Pick<LinkRow, 'id' | 'credentials_encrypted'>[]> {
  return db<LinkRow>('links')
    .where('id', '>', afterId)
    .where((stale) =>
      stale.whereNull('rut_digest').orWhereRaw('substr(rut_digest, 1, ?) <> ?', [prefix.length, prefix]),
    )
    .orderBy('id')
    .limit(limit)
    .select('id', 'credentials_encrypted');
}

/** Housekeeping gave the link its RUT digests under the active key (rut-digest-fill.ts). */
export async function storeRutDigests(db: Knex, id: string, digests: RutDigests): Promise<void> {
  await db('links').where({ id }).update(digests);
}

/**
 * An organisation's links in a mode, newest first, found by id, by RUT (through its digests), or by
 * `external_user_id` or the start of the holder's name.
 */
export async function searchLinks(
  db: Knex,
  scope: { orgId: string; mode: 'live' | 'test' },
  filter: { query?: string; status?: LinkStatus; rutDigests?: string[] | null },
  window: PageWindow,
): Promise<{ rows: LinkRow[]; total: number }> {
  const query = filter.query?.trim().slice(0, 200) ?? '';
  const rutDigests = filter.rutDigests ?? [];
  const scoped = () => {
    const rows = db<LinkRow>('links').where({ org_id: scope.orgId, mode: scope.mode });
    if (filter.status) rows.where('status', filter.status);
    if (/^link_[0-9a-f]{16}$/.test(query)) rows.where('id', query);
    else if (query !== '') {
      const prefix = `${query.toLowerCase().replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
      rows.where((match) => {
        match.where('external_user_id', query).orWhereRaw("lower(holder_name) LIKE ? ESCAPE '\\'", [prefix]);
        // A RUT may also be someone's external_user_id: either matches.
        if (rutDigests.length > 0)
          match.orWhereIn('rut_digest', rutDigests).orWhereIn('company_rut_digest', rutDigests);
      });
    }
    return rows;
  };
  return fetchPage<LinkRow>(scoped, NEWEST_FIRST, window.offset, window.limit);
}

/** An organisation's links in a mode by state, as the console's overview shows them. */
export interface LinkFigures {
  /** `status = active`, paused or not: what the links list's `active` filter shows. */
  active: number;
  /** Of the active ones, those the scheduler skips. */
  paused: number;
  expired: number;
  /** Active links whose last sync failed (`last_error_code` set): `svc links inspect` names why. */
  failing: number;
}

/**
 * The figures above in one grouped count over `links(org_id, mode, …)`: the rows the links list's total
 * already counts, never loaded. The failing sum is a CASE rather than a filter, so one pass gives all four.
 */
export async function linkFiguresOfScope(
  db: Knex,
  scope: { orgId: string; mode: 'live' | 'test' },
): Promise<LinkFigures> {
  const rows: { status: string; paused: boolean | number; n: number | string; failing: number | string }[] =
    await db('links')
      .where({ org_id: scope.orgId, mode: scope.mode })
      .groupBy('status', 'paused')
      .select('status', 'paused')
      .count({ n: '*' })
      .select(db.raw('sum(case when last_error_code is null then 0 else 1 end) as failing'));
  const figures: LinkFigures = { active: 0, paused: 0, expired: 0, failing: 0 };
  for (const row of rows) {
    const n = Number(row.n);
    if (row.status === 'expired') figures.expired += n;
    if (row.status !== 'active') continue;
    figures.active += n;
    if (row.paused) figures.paused += n;
    figures.failing += Number(row.failing ?? 0);
  }
  return figures;
}
