import type { Knex } from 'knex';
import { toIso, type Clock } from '../../clock/clock.js';
import type { ConsentClients } from '../../banks/consent/client.js';
import type { RevokeOutcome } from '../../banks/consent/profile.js';
import type { Database } from '../../db/database.js';
import { newId } from '../../ids/ids.js';
import { recordAudit } from '../../audit/audit-log.js';
import type { Logger } from '../../logging/logger.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { linkGrantContext } from '../../secrets/sealed-columns.js';
import { BudgetGate, withBankCalls, type GateServices } from '../../banks/budget/bank-calls.js';
import { BudgetWait } from '../../banks/budget/permits.js';

/*
 * The only code that writes `grant_revocations`: the revoke outbox. Deleting a consent link queues a row
 * in the deleting transaction (the link and its grant go at once; the bank is told after), as does renewing
 * one for the grant it replaces (links/consent/grants.ts: renewConsentLink), and a widget trip that leaves a
 * consent at the bank and no link (a refused grant, an abandoned trip: widget/consent/abandoned-trips.ts); the
 * scheduler's tick revokes due rows at the bank, retrying until it confirms or the attempts run out. The
 * row outlives the link so `svc links inspect` can still say whether the bank was told.
 *
 * The grant id is copied still sealed: it was sealed under its link (link_grants/<link>/grant_id_sealed),
 * and the row keeps the link id, so it opens here and nowhere else, with no key needed to delete a link.
 */

export type RevocationStatus = 'pending' | 'revoked' | 'failed';

/** The audit log's actor for the revoke calls the scheduler makes. */
export const REVOCATION_ACTOR = 'scheduler:grant-revocations';

export interface GrantRevocationRow {
  id: string;
  link_id: string;
  org_id: string;
  mode: 'live' | 'test';
  bank_id: string;
  client_id: string;
  grant_id_sealed: string;
  status: RevocationStatus;
  attempts: number;
  next_attempt_at: number;
  locked_until: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  revoked_at: number | null;
}

/**
 * After a failed attempt n (from 1), the next waits 1 minute doubled each time, at most 6 hours: 20
 * attempts span about three days (1+2+…+256 minutes, then 6 h each), long enough for a bank's planned
 * maintenance window, short enough that a revoke does not linger unseen.
 */
export const REVOKE_ATTEMPTS = 20;
const FIRST_RETRY_MS = 60_000;
const MAX_RETRY_MS = 6 * 3_600_000;
/** A claimed row is someone's for this long: well past one call's 4 s budget, short enough to recover a crash. */
const LEASE_MS = 60_000;
/** Rows revoked per tick and process: each is one call of at most 4 s, and the tick is a minute. */
const PER_TICK = 10;

export function retryDelayMs(attempts: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(attempts - 1, 0), MAX_RETRY_MS);
}

/** Queues the revoke of a link's grant, if it has one, in the transaction that deletes it or replaces its grant. */
export async function queueRevocation(
  trx: Knex,
  link: { id: string; org_id: string; mode: 'live' | 'test'; bank_id: string },
  /** Who asked for it, as the audit log names them (the deleting key or user, the renewing widget session). */
  actor: string,
  now: number,
): Promise<void> {
  // Read here, not through grants.ts, which builds on links.ts: links.ts calls this, and imports stay one-way.
  const grant: { client_id: string; grant_id_sealed: string } | undefined = await trx('link_grants')
    .where({ link_id: link.id })
    .first('client_id', 'grant_id_sealed');
  if (!grant) return;
  const row = pendingRevocation(link.id, { ...link, client_id: grant.client_id }, grant.grant_id_sealed, now);
  await trx('grant_revocations').insert(row);
  await auditRevocation(trx, row, actor, 'link.consent_revocation_queued', now);
}

/**
 * A revocation's step in the audit log (issue 44, item 9): queued (by whoever deleted or renewed the link)
 * and its end at the bank (by the scheduler, which makes the call). Ids only: never the grant id.
 */
async function auditRevocation(
  trx: Knex,
  row: Pick<GrantRevocationRow, 'id' | 'link_id' | 'org_id' | 'bank_id' | 'mode' | 'attempts' | 'last_error'>,
  actor: string,
  action: 'link.consent_revocation_queued' | 'link.consent_revoked' | 'link.consent_revocation_failed',
  now: number,
): Promise<void> {
  const ofTrip = row.link_id.startsWith('wcr_');
  await recordAudit(
    trx,
    {
      orgId: row.org_id,
      actor,
      action,
      targetType: ofTrip ? 'consent_request' : 'link',
      targetId: row.link_id,
      details: {
        revocation: row.id,
        bank_id: row.bank_id,
        mode: row.mode,
        ...(action === 'link.consent_revocation_queued'
          ? {}
          : { attempts: row.attempts, ...(row.last_error ? { last_error: row.last_error } : {}) }),
      },
    },
    now,
  );
}

/** A revocation row to try at once: the owner (a link, or a widget trip) and its grant id, sealed under it. */
function pendingRevocation(
  ownerId: string,
  bank: { org_id: string; mode: 'live' | 'test'; bank_id: string; client_id: string },
  grantIdSealed: string,
  now: number,
): GrantRevocationRow {
  return {
    id: newId('grev'),
    link_id: ownerId,
    org_id: bank.org_id,
    mode: bank.mode,
    bank_id: bank.bank_id,
    client_id: bank.client_id,
    grant_id_sealed: grantIdSealed,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    locked_until: null,
    last_error: null,
    created_at: now,
    updated_at: now,
    revoked_at: null,
  };
}

/**
 * Queues the revoke of a grant the widget obtained and will not keep (a grant refused at the callback: what
 * it allows is unreadable, its token unbound, another person's on a renewal, or the link could not be made),
 * or of the consent a trip created at the bank and never came back with (widget/consent/abandoned-trips.ts):
 * the same retried outbox as a deleted link's, so a bank that fails the first attempt is asked again rather
 * than left holding an active consent for an app that holds nothing. `ownerId` is the link being renewed, or
 * the widget's consent request (`wcr_…`) when no link was made; the grant id is sealed under it.
 */
export async function queueRefusedGrant(
  trx: Knex,
  refused: { ownerId: string; orgId: string; mode: 'live' | 'test'; bankId: string; clientId: string },
  grantId: string,
  secrets: SecretBox,
  /** The widget session whose trip brought the grant back. */
  actor: string,
  now: number,
): Promise<void> {
  const sealed = secrets.seal(grantId, linkGrantContext(refused.ownerId, 'grant_id_sealed'));
  const row = pendingRevocation(
    refused.ownerId,
    { org_id: refused.orgId, mode: refused.mode, bank_id: refused.bankId, client_id: refused.clientId },
    sealed,
    now,
  );
  await trx('grant_revocations').insert(row);
  await auditRevocation(trx, row, actor, 'link.consent_revocation_queued', now);
}

/** The latest revocation of a link's grants: a deleted link's is its last (renewals queue earlier ones). */
export async function revocationOfLink(db: Knex, linkId: string): Promise<GrantRevocationRow | undefined> {
  return db<GrantRevocationRow>('grant_revocations')
    .where({ link_id: linkId })
    .orderBy('created_at', 'desc')
    .first();
}

/** A live link's revocations not yet settled (pending) or given up (failed), newest first, at most 5. */
export async function openRevocationsOfLink(db: Knex, linkId: string): Promise<GrantRevocationRow[]> {
  return db<GrantRevocationRow>('grant_revocations')
    .where({ link_id: linkId })
    .whereIn('status', ['pending', 'failed'])
    .orderBy('created_at', 'desc')
    .limit(5);
}

/**
 * Revocations still waiting for the bank, and those that gave up (the bank may hold those consents until
 * they expire): the queue depths `svc status` and `/metrics` show. The (status, next_attempt_at) index
 * answers it; failed rows are kept with their audit trail, so that count only grows until someone acts.
 */
export async function revocationCounts(db: Knex): Promise<{ pending: number; failed: number }> {
  const rows: { status: string; n: number | string }[] = await db('grant_revocations')
    .select('status')
    .count({ n: '*' })
    .whereIn('status', ['pending', 'failed'])
    .groupBy('status');
  const byStatus = new Map(rows.map((row) => [row.status, Number(row.n)]));
  return { pending: byStatus.get('pending') ?? 0, failed: byStatus.get('failed') ?? 0 };
}

/**
 * Retention (`retention.grantRevocationsDays`, 90 by default): removes up to `limit` rows the bank confirmed
 * revoked before `cutoff`, oldest first. Pending rows are still being told; failed ones wait for someone to
 * act, and stay. Walks `grant_revocations_revoked_idx (status, revoked_at, id)`.
 */
export async function pruneRevokedGrants(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const ids = trx('grant_revocations')
    .select('id')
    .where({ status: 'revoked' })
    .where('revoked_at', '<', cutoff)
    .orderBy([{ column: 'revoked_at' }, { column: 'id' }])
    .limit(limit);
  return trx('grant_revocations').whereIn('id', ids).delete();
}

/** Takes one due row with a lease (a conditional update: two schedulers never take the same row). */
async function claimDue(db: Knex, now: number): Promise<GrantRevocationRow | null> {
  const candidates: GrantRevocationRow[] = await db<GrantRevocationRow>('grant_revocations')
    .where({ status: 'pending' })
    .where('next_attempt_at', '<=', now)
    .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', now))
    .orderBy('next_attempt_at')
    .limit(5);
  for (const row of candidates) {
    const taken = await db('grant_revocations')
      .where({ id: row.id, status: 'pending' })
      .where('next_attempt_at', '<=', now) // another scheduler may have tried it since the read
      .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', now))
      .update({ locked_until: now + LEASE_MS, updated_at: now });
    if (taken === 1) return row;
  }
  return null;
}

/** What an attempt's outcome does to its row. Pure, so the schedule is tested without a bank. */
export function afterAttempt(
  row: Pick<GrantRevocationRow, 'attempts'>,
  outcome: RevokeOutcome,
  now: number,
): Partial<GrantRevocationRow> {
  const attempts = row.attempts + 1;
  if (outcome.kind !== 'failed')
    return {
      status: 'revoked',
      attempts,
      revoked_at: now,
      locked_until: null,
      last_error: null,
      updated_at: now,
    };
  const base = { attempts, locked_until: null, last_error: outcome.reason.slice(0, 500), updated_at: now };
  if (attempts >= REVOKE_ATTEMPTS) return { ...base, status: 'failed' };
  return { ...base, next_attempt_at: Math.max(outcome.retryAt ?? 0, now + retryDelayMs(attempts)) };
}

export interface RevokeServices {
  db: Database;
  clock: Clock;
  secrets: SecretBox;
  logger: Logger;
  consentClients: ConsentClients;
  config: GateServices['config'];
}

/**
 * A revoke's calls (a `client_credentials` token, the revoke or Brazil's consent delete) count against the
 * bank's budget (`revokePriority`): the first permit is had before anything is sent, and a bank that is paused
 * or has spent its share of the minute keeps the row pending, its attempt not counted, until then. Later
 * calls wait up to 5 s for theirs.
 */
const REVOKE_PERMIT_WAIT_MS = 5_000;

/**
 * A linked consent's revoke (a deleted link's, a renewed link's old grant) goes at the scheduled share, like
 * a scheduled sync's. A consent no link holds (a widget trip's: abandoned, or a grant refused at the
 * callback; the row's owner is the trip, `wcr_…`) goes in the background, below the syncs
 * (banks/budget/budget.ts, BACKGROUND_SHARE): the appliance keeps no token of it, and nobody waits for it.
 */
export function revokePriority(row: Pick<GrantRevocationRow, 'link_id'>): 'scheduled' | 'background' {
  return row.link_id.startsWith('wcr_') ? 'background' : 'scheduled';
}

/** One tick's revokes: due rows, one at a time, each recorded in its own short write. Returns how many were tried. */
export async function revokeDueGrants(services: RevokeServices): Promise<number> {
  let tried = 0;
  for (; tried < PER_TICK; tried++) {
    const now = services.clock.now();
    const row = await claimDue(services.db.knex, now);
    if (!row) break;
    let outcome: RevokeOutcome;
    const gate = BudgetGate.of(
      services,
      { bankId: row.bank_id, mode: row.mode },
      row.org_id,
      revokePriority(row),
      REVOKE_PERMIT_WAIT_MS,
    );
    try {
      await gate.prepay();
      outcome = await withBankCalls(gate, async () => {
        const client = await services.consentClients.forBank(services.db.knex, row.bank_id, row.mode);
        return !client
          ? {
              kind: 'failed',
              reason: `no registration with ${row.bank_id} in ${row.mode} mode`,
              retryAt: null,
            }
          : client.registration.client_id !== row.client_id
            ? {
                kind: 'failed',
                reason: 'the grant belongs to a registration that was replaced',
                retryAt: null,
              }
            : await client.profile.revokeGrant(
                client,
                services.secrets.open(row.grant_id_sealed, linkGrantContext(row.link_id, 'grant_id_sealed')),
                services.clock.now(),
              );
      });
    } catch (error) {
      if (error instanceof BudgetWait) {
        await services.db.knex('grant_revocations').where({ id: row.id }).update({
          next_attempt_at: error.until,
          locked_until: null,
          last_error: error.jobError,
          updated_at: services.clock.now(),
        });
        continue;
      }
      outcome = {
        kind: 'failed',
        reason: "the bank's discovery could not be read over mutual TLS",
        retryAt: null,
      };
    }
    const changes = afterAttempt(row, outcome, services.clock.now());
    await services.db.transaction(async (trx) => {
      await trx('grant_revocations').where({ id: row.id }).update(changes);
      // Its end at the bank, either way, in the audit log beside who asked for it; a retry is not an end.
      if (changes.status === 'revoked' || changes.status === 'failed')
        await auditRevocation(
          trx,
          { ...row, ...changes },
          REVOCATION_ACTOR,
          changes.status === 'revoked' ? 'link.consent_revoked' : 'link.consent_revocation_failed',
          services.clock.now(),
        );
    });
    services.logger.info(
      {
        link: row.link_id,
        bank: row.bank_id,
        status: changes.status ?? 'pending',
        attempts: changes.attempts,
        error: changes.last_error ?? undefined,
      },
      'grant revocation attempted',
    );
  }
  return tried;
}

/** Whether the bank was told, in words, for `svc links inspect` on a deleted consent link. */
export function describeRevocation(row: GrantRevocationRow): string {
  const bank = row.bank_id;
  if (row.status === 'revoked')
    return `Its grant at ${bank} was revoked at ${toIso(Number(row.revoked_at))}.`;
  const last = row.last_error ? ` Last error: ${row.last_error}.` : '';
  if (row.status === 'failed')
    return `Revoking its grant at ${bank} failed after ${row.attempts} attempts; the bank may still hold the consent until it expires.${last}`;
  return `Its grant at ${bank} is being revoked: attempt ${row.attempts + 1} of ${REVOKE_ATTEMPTS} at ${toIso(Number(row.next_attempt_at))}.${last}`;
}
