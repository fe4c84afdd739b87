import type { Knex } from 'knex';
import { boundList } from '../db/bound-rows.js';
import type { Engine } from '../db/dialect.js';
import { CREDENTIAL_FAILURES, ENDING_FAILURES, type ConnectorErrorCode } from '../banks/connector.js';
import { transition, type Transitions } from '../errors/illegal-transition.js';
import type { RutDigests } from './rut-search.js';
import type { LinkChanges, LinkRow, LinkStatus } from './store.js';

/*
 * Everything that changes a link after it is made, by name: its status (`active` ⇄ `expired`, the table
 * below), its refresh indicator, its pause flag. Callers (the sync engine, the refresh intents, the jobs,
 * the widget) say what happened; this file decides the columns. A change of status is written on the
 * condition of the table (`WHERE status IN (…)`), so a stale read cannot expire a link twice or reconnect an
 * active one.
 */

export type LinkChange =
  'sync_succeeded' | 'expire' | 'reconnect' | 'reconnect_failed' | 'consent_ended' | 'consent_renewed';

export const LINK_TRANSITIONS = {
  /** A sync succeeded: the link is active, whatever it was (a reconnect's first sync, or a race with one). */
  sync_succeeded: { from: ['active', 'expired'], to: 'active' },
  /**
   * `sync.failuresToExpire` syncs in a row failed on the credentials, or one sync met a failure the bank
   * states as final (`consent_revoked`): the user must reconnect.
   */
  expire: { from: ['active'], to: 'expired' },
  /** The widget's reconnect stored new credentials for an expired link. */
  reconnect: { from: ['expired'], to: 'active' },
  /** The reconnect's first sync refused them: the link is expired again, as before the reconnect. */
  reconnect_failed: { from: ['active'], to: 'expired' },
  /** A consent link's consent reached its end (`validTo`): the end user must renew it at the bank. */
  consent_ended: { from: ['active'], to: 'expired' },
  /**
   * The widget's reconnect of a consent link recorded a new consent: from `expired` (it ended, or was
   * revoked) or from `active` (renewed early, while it is `expiring` or before: OPEN-FINANCE.md, users ask).
   */
  consent_renewed: { from: ['active', 'expired'], to: 'active' },
} as const satisfies Transitions<LinkStatus, LinkChange>;

const MACHINE = 'link';

/** What a successful sync found, for `markLinkSynced`. */
export interface SyncSuccess {
  /** The holder the bank named; null when nothing was fetched (the link's own stays). */
  holderName: string | null;
  /** The accounts the bank listed; null when nothing was fetched (the link's counter stays). */
  accountsCount: number | null;
  newMovements: number;
  nextSyncAt: number;
  /** A backfill that fetched: statements now reach back to here (the coverage only grows). */
  backfillFrom: number | null;
  /**
   * The sync read every list and every account's movements (a first sync, an on-demand refresh, the daily
   * full pass): the grant's `full_sync_at` moves, and the next scheduled syncs may read balances only until a
   * day has passed.
   */
  fullPass?: boolean;
  /**
   * The sync asked the bank for the holder's name (a consent link's first sync or daily full pass) and had an
   * answer, a name or none: the grant's `holder_read_at` moves, and no sync asks again for a day.
   */
  holderRead?: boolean;
}

/** The columns a successful sync writes. Pure. */
export function syncSucceeded(link: LinkRow, outcome: SyncSuccess, now: number): LinkChanges {
  return {
    status: transition(MACHINE, LINK_TRANSITIONS, link.status, 'sync_succeeded', link.id),
    holder_name: outcome.holderName ?? link.holder_name,
    accounts_count: outcome.accountsCount ?? link.accounts_count,
    new_movements_count: outcome.newMovements,
    consecutive_failures: 0,
    last_error_code: null,
    last_synced_at: now,
    next_sync_at: outcome.nextSyncAt,
    refresh_status: 'idle',
    sync_attempts: link.sync_attempts + 1,
    sync_successes: link.sync_successes + 1,
    ...(outcome.backfillFrom !== null
      ? { backfill_covered_from: Math.min(link.backfill_covered_from ?? Infinity, outcome.backfillFrom) }
      : {}),
    updated_at: now,
  };
}

/** What a failed sync met, for `markLinkSyncFailed`. */
export interface SyncFailure {
  errorCode: string;
  /** `sync.failuresToExpire`: credential failures in a row that expire an active link. */
  failuresToExpire: number;
  nextSyncAt: number;
  /**
   * The first sync after a reconnect of an expired link: when it was expired. A refusal of the new login
   * puts the link back to `expired` as of then, without a second `link.expired`; null otherwise.
   */
  reconnectOf?: number | null;
}

/**
 * The columns a failed sync writes, and whether it expires the link. Only a refusal of the credentials
 * counts towards expiry (a bank that is down says nothing about them), a final one (ENDING_FAILURES)
 * expires it at once, and only an active link expires. Pure.
 */
export function syncFailed(
  link: LinkRow,
  failure: SyncFailure,
  now: number,
): { changes: LinkChanges; expires: boolean } {
  const counts = CREDENTIAL_FAILURES.has(failure.errorCode as ConnectorErrorCode);
  const failures = counts ? link.consecutive_failures + 1 : link.consecutive_failures;
  const ends = ENDING_FAILURES.has(failure.errorCode as ConnectorErrorCode);
  const reconnectOf = failure.reconnectOf ?? null;
  const recorded = {
    consecutive_failures: failures,
    last_error_code: failure.errorCode,
    refresh_status: 'idle',
    sync_attempts: link.sync_attempts + 1,
    next_sync_at: failure.nextSyncAt,
    updated_at: now,
  } as const;
  if (counts && reconnectOf !== null && link.status === 'active') {
    // The reconnect's new login was refused: the link is as it was before it, expired since then. Its
    // customer heard `link.expired` then; a second one for the same outage would say nothing new.
    return {
      changes: {
        ...recorded,
        status: transition(MACHINE, LINK_TRANSITIONS, link.status, 'reconnect_failed', link.id),
        expired_at: reconnectOf,
      },
      expires: false,
    };
  }
  const expires = link.status === 'active' && (ends || failures >= failure.failuresToExpire);
  return {
    changes: {
      ...recorded,
      ...(expires
        ? { status: transition(MACHINE, LINK_TRANSITIONS, link.status, 'expire', link.id), expired_at: now }
        : {}),
    },
    expires,
  };
}

/**
 * Writes `changes`, on the condition of the table when they carry `change` (a change of status). A link
 * found in a state the table does not allow throws; a link that is gone (deleted meanwhile) is left gone.
 */
async function writeLink(trx: Knex, id: string, change: LinkChange | null, changes: LinkChanges) {
  const query = trx('links').where({ id });
  if (change) query.whereIn('status', LINK_TRANSITIONS[change].from);
  if ((await query.update(changes)) > 0 || !change) return;
  const row: Pick<LinkRow, 'status'> | undefined = await trx('links').where({ id }).first('status');
  if (row) transition(MACHINE, LINK_TRANSITIONS, row.status, change, id);
}

/** A sync succeeded: counters, schedule and holder updated, failures forgotten, the link active. */
export async function markLinkSynced(
  trx: Knex,
  link: LinkRow,
  outcome: SyncSuccess,
  now: number,
): Promise<void> {
  await writeLink(trx, link.id, 'sync_succeeded', syncSucceeded(link, outcome, now));
  // On the grant, not the link: see migration 30 (a consent link has one; another link never reads by balance).
  const marks = {
    ...(outcome.fullPass ? { full_sync_at: now } : {}),
    ...(outcome.holderRead ? { holder_read_at: now } : {}),
  };
  if (Object.keys(marks).length > 0) await trx('link_grants').where({ link_id: link.id }).update(marks);
}

/** A sync failed: the failure counted, the next one scheduled, and the link expired at the limit. */
export async function markLinkSyncFailed(
  trx: Knex,
  link: LinkRow,
  failure: SyncFailure,
  now: number,
): Promise<{ expired: boolean }> {
  const { changes, expires } = syncFailed(link, failure, now);
  const change = expires ? 'expire' : changes.status === 'expired' ? 'reconnect_failed' : null;
  await writeLink(trx, link.id, change, changes);
  return { expired: expires };
}

/** The widget's reconnect: new credentials (and their RUT digests and consent), the link active again. */
export async function reconnectLink(
  trx: Knex,
  id: string,
  input: RutDigests & {
    credentials_encrypted: string;
    consent_version: string | null;
    consent_text_hash: string | null;
  },
  now: number,
): Promise<void> {
  await writeLink(trx, id, 'reconnect', {
    ...input,
    status: 'active',
    expired_at: null,
    consecutive_failures: 0,
    updated_at: now,
  });
}

/**
 * A consent link renewed through the widget (links/consent/grants.ts holds the new grant): active again,
 * failures forgotten, with the new consent's text and, re-sealed, its holder.
 */
export async function markConsentRenewed(
  trx: Knex,
  id: string,
  input: {
    credentials_encrypted: string;
    /** Null when the holder's subject is not a RUT (a bank's opaque `sub`). */
    rut_digest: string | null;
    company_rut_digest: string | null;
    consent_version: string;
    consent_text_hash: string;
    /** The holder's name the renewal's code exchange gave, when it gave one. */
    holder_name?: string;
  },
  now: number,
): Promise<void> {
  await writeLink(trx, id, 'consent_renewed', {
    ...input,
    status: 'active',
    expired_at: null,
    consecutive_failures: 0,
    updated_at: now,
  });
}

/**
 * A reconnect that failed puts the link back to `expired`, unless something else already changed it: the
 * condition is on the row, not on what the caller read, and a link no longer active is left as it is.
 */
export async function expireFailedReconnect(
  trx: Knex,
  id: string,
  expiredAt: number,
  now: number,
): Promise<void> {
  await trx('links')
    .where({ id })
    .whereIn('status', LINK_TRANSITIONS.reconnect_failed.from)
    .update({ status: LINK_TRANSITIONS.reconnect_failed.to, expired_at: expiredAt, updated_at: now });
}

/**
 * A consent link's consent ended: the link is `expired` with `errorCode` (`consent_expired`) as of `endedAt`,
 * the consent's end, not the tick that noticed. Only an active link changes (one expired for another reason
 * keeps that reason); answers whether this call expired it, so its event is sent once.
 */
export async function expireEndedConsentLink(
  trx: Knex,
  id: string,
  errorCode: string,
  endedAt: number,
  now: number,
): Promise<boolean> {
  const updated = await trx('links')
    .where({ id })
    .whereIn('status', LINK_TRANSITIONS.consent_ended.from)
    .update({
      status: LINK_TRANSITIONS.consent_ended.to,
      last_error_code: errorCode,
      expired_at: endedAt,
      updated_at: now,
    });
  return updated > 0;
}

/** Pausing stops the scheduler; on-demand refreshes keep working. The flag is independent of the status. */
export async function markLinkPaused(trx: Knex, id: string, now: number): Promise<LinkChanges> {
  const changes = { paused: true, paused_at: now, updated_at: now };
  await trx('links').where({ id }).update(changes);
  return changes;
}

/** Resuming clears the flag and makes the link due now, so the next scheduler tick picks it up. */
export async function markLinkResumed(trx: Knex, id: string, now: number): Promise<LinkChanges> {
  const changes = { paused: false, paused_at: null, next_sync_at: now, updated_at: now };
  await trx('links').where({ id }).update(changes);
  return changes;
}

/*
 * The refresh indicator (`refresh_status`: idle, queued, in_progress, requires_mfa) shows what the link's
 * sync job is doing, and is written in the job's own transaction by whoever moves the job. It is not checked
 * against a table: the job's statements already are (jobs/jobs.ts), and a stale indicator (a link synced
 * by a test or a bench that inserted its job directly) must heal at the next change rather than wedge
 * the scheduler.
 */

/** A sync of the link was queued (on demand, a new link, a reconnect, or an MFA code that arrived). */
export async function markLinkQueued(trx: Knex, id: string, now: number): Promise<void> {
  await trx('links').where({ id }).update({ refresh_status: 'queued', updated_at: now });
}

/**
 * The links a scheduler tick queued: marked `queued`, and their next sync one interval on. One statement
 * however many (the ids bound as one value, `boundList`).
 */
export async function markScheduled(
  trx: Knex,
  engine: Engine,
  ids: readonly string[],
  nextSyncAt: number,
  now: number,
): Promise<void> {
  if (ids.length === 0) return;
  const list = boundList(engine, ids);
  await trx('links')
    .whereRaw(`id IN ${list.sql}`, list.bindings)
    .update({ next_sync_at: nextSyncAt, refresh_status: 'queued', updated_at: now });
}

/** A worker started the link's sync. */
export async function markLinkSyncing(trx: Knex, id: string, now: number): Promise<void> {
  await trx('links').where({ id }).update({ refresh_status: 'in_progress', updated_at: now });
}

/** The link's sync waits for an MFA code from the person (an on-demand refresh). */
export async function markLinkAwaitingMfa(trx: Knex, id: string, now: number): Promise<void> {
  await trx('links').where({ id }).update({ refresh_status: 'requires_mfa', updated_at: now });
}

/** The link's refresh ended without a sync (its MFA wait failed): nothing under way. */
export async function markLinkRefreshIdle(trx: Knex, id: string, now: number): Promise<void> {
  await trx('links').where({ id }).update({ refresh_status: 'idle', updated_at: now });
}
