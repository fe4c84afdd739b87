import type { Knex } from 'knex';

/*
 * With intent-states.ts, the only code that writes `refresh_intents`: here the row's shape, its making and
 * removal, and the reads others need; there every change of an intent's state, by name (the sync engine
 * moves an intent through its states, the widget and the API hand it an MFA code, housekeeping fails
 * forgotten MFA waits).
 */

export type RefreshType = 'only_last' | 'historical' | 'full' | 'backfill';
export type IntentStatus = 'created' | 'in_progress' | 'requires_mfa' | 'succeeded' | 'failed';

export interface IntentRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  link_id: string;
  refresh_type: RefreshType;
  status: IntentStatus;
  error_code: string | null;
  accounts_updated: number | null;
  new_movements_count: number | null;
  mfa_token_hash: string | null;
  mfa_expires_at: number | null;
  mfa_code_encrypted: string | null;
  mfa_challenge_encrypted?: string | null;
  mfa_token_encrypted?: string | null;
  /** Wrong codes given in the current MFA wait (the wait ends with `mfa_invalid` at the limit). */
  mfa_attempts?: number;
  backfill_months: number | null;
  force: boolean | number;
  started_at: number | null;
  completed_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The columns a change of state writes (intent-states.ts). */
export type IntentChanges = Partial<Omit<IntentRow, 'id' | 'org_id' | 'mode' | 'link_id' | 'created_at'>>;

export async function insertIntent(trx: Knex, row: IntentRow): Promise<void> {
  await trx('refresh_intents').insert(row);
}

export async function findIntent(db: Knex, id: string): Promise<IntentRow | undefined> {
  return db<IntentRow>('refresh_intents').where({ id }).first();
}

/** The intent an `ri_…_sec_…` token opens the widget for (only its hash is stored). */
export async function findIntentByMfaToken(db: Knex, tokenHash: string): Promise<IntentRow | undefined> {
  return db<IntentRow>('refresh_intents').where({ mfa_token_hash: tokenHash }).first();
}

/** A link's first intent: for a link the widget has just created, the intent of its first sync. */
export async function firstIntentOfLink(db: Knex, linkId: string): Promise<Pick<IntentRow, 'id'>> {
  return db('refresh_intents').where({ link_id: linkId }).first('id');
}

/** When the link's last refresh of this type that did not fail was asked for (cooldowns count from it). */
export async function lastRefreshAt(db: Knex, linkId: string, type: RefreshType): Promise<number | null> {
  const last: Pick<IntentRow, 'created_at'> | undefined = await db('refresh_intents')
    .where({ link_id: linkId, refresh_type: type })
    .whereNot('status', 'failed')
    .orderBy('created_at', 'desc')
    .first('created_at');
  return last ? last.created_at : null;
}

/** A link's latest intents, newest first. */
export async function recentIntentsOfLink(db: Knex, linkId: string, limit: number): Promise<IntentRow[]> {
  return db<IntentRow>('refresh_intents')
    .where({ link_id: linkId })
    .orderBy('created_at', 'desc')
    .limit(limit);
}

/** The ids of intents still waiting for an MFA code, as a subquery for the caller's statement. */
export function waitingForMfaIds(db: Knex, now: number): Knex.QueryBuilder {
  return db('refresh_intents').select('id').where('status', 'requires_mfa').where('mfa_expires_at', '>', now);
}

/** Intents whose MFA wait passed `expires_at` unanswered, a batch at a time. */
export async function expiredMfaWaits(trx: Knex, now: number, limit: number): Promise<IntentRow[]> {
  return trx<IntentRow>('refresh_intents')
    .where({ status: 'requires_mfa' })
    .where('mfa_expires_at', '<', now)
    .limit(limit);
}

/**
 * Retention: removes up to `limit` succeeded or failed intents created before `cutoff`. An
 * intent that waits (created, in progress, requires MFA) stays, as does one that `jobsOf` finds jobs for
 * (housekeeping passes the intent's jobs: its foreign key would take them along, active or not, so an
 * intent goes only once jobs retention has removed them). Walks `refresh_intents_finished_idx (status,
 * created_at)`, with no ORDER BY: across two statuses it would sort every old intent before the LIMIT.
 */
export async function pruneFinishedIntents(
  trx: Knex,
  cutoff: number,
  limit: number,
  jobsOf: (intentIdColumn: string) => Knex.QueryBuilder,
): Promise<number> {
  const ids = trx('refresh_intents as ri')
    .select('ri.id')
    .whereIn('ri.status', ['succeeded', 'failed'])
    .where('ri.created_at', '<', cutoff)
    .whereNotExists(jobsOf('ri.id'))
    .limit(limit);
  return trx('refresh_intents').whereIn('id', ids).delete();
}
