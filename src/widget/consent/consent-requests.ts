import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { HolderType } from '../../banks/connector.js';
import type { AuthorizationDetail } from '../../banks/consent/authorization-details.js';
import { sha256Hex, type SecretBox } from '../../secrets/secret-box.js';
import { consentRequestContext } from '../../secrets/sealed-columns.js';

/*
 * The only code that writes `widget_consent_requests`: one row per trip of an end user to a consent bank's
 * page (consent-flow.ts). The `state` in the bank's URL is kept as its SHA-256, the PKCE verifier sealed
 * under the row, so a copy of the table neither finds a callback nor finishes one.
 */

export interface ConsentRequestRow {
  id: string;
  session_id: string;
  org_id: string;
  mode: 'live' | 'test';
  bank_id: string;
  holder_type: HolderType;
  consent_client_id: string;
  state_hash: string;
  verifier_sealed: string;
  /** JSON: the `authorization_details` pushed to the bank (what the consent screen worded). */
  authorization_details: string;
  consent_text_hash: string;
  expires_at: number;
  completed_at: number | null;
  /** `linked`, `renewed` (a reconnect's consent), `superseded`, or the problem code the callback ended with; null while the bank has it. */
  outcome: string | null;
  link_id: string | null;
  /** SHA-256 of the cookie the trip's browser got at the start; null on rows of a build before issue 44. */
  browser_hash: string | null;
  created_at: number;
}

export interface NewConsentRequest {
  sessionId: string;
  orgId: string;
  mode: 'live' | 'test';
  bankId: string;
  holderType: HolderType;
  consentClientId: string;
  state: string;
  verifier: string;
  details: AuthorizationDetail[];
  consentTextHash: string;
  expiresAt: number;
  /** SHA-256 of the browser cookie set with the start (`tripCookie`). */
  browserHash: string;
}

/** The outcome of a trip whose callback is exchanging its code, until it settles. */
export const CLAIMED = 'in_progress';

const verifierContext = (id: string) => consentRequestContext(id, 'verifier_sealed');

/** The outcome of a trip the scheduler ended: past its wait, and the bank never sent the person back. */
export const ABANDONED = 'abandoned';

/**
 * Records a trip to the bank; an earlier trip of the same session still open is superseded, so only the
 * newest authorisation page can finish the widget (a late callback of the old one finds it used). Returns
 * the trip and the ones it superseded (their consents at the bank are the caller's to release).
 */
export async function insertConsentRequest(
  trx: Knex,
  secrets: SecretBox,
  request: NewConsentRequest,
  now: number,
): Promise<{ trip: ConsentRequestRow; superseded: ConsentRequestRow[] }> {
  const superseded: ConsentRequestRow[] = [];
  const open: ConsentRequestRow[] = await trx('widget_consent_requests')
    .where({ session_id: request.sessionId })
    .whereNull('completed_at');
  for (const trip of open) if (await endTrip(trx, trip.id, 'superseded', now)) superseded.push(trip); // unless its callback took it first
  const id = `wcr_${randomBytes(8).toString('hex')}`;
  const row: ConsentRequestRow = {
    id,
    session_id: request.sessionId,
    org_id: request.orgId,
    mode: request.mode,
    bank_id: request.bankId,
    holder_type: request.holderType,
    consent_client_id: request.consentClientId,
    state_hash: sha256Hex(request.state),
    verifier_sealed: secrets.seal(request.verifier, verifierContext(id)),
    authorization_details: JSON.stringify(request.details),
    consent_text_hash: request.consentTextHash,
    expires_at: request.expiresAt,
    completed_at: null,
    outcome: null,
    link_id: null,
    browser_hash: request.browserHash,
    created_at: now,
  };
  await trx('widget_consent_requests').insert(row);
  return { trip: row, superseded };
}

/** Ends a trip still at the bank, once: false when its callback (or another scheduler) took it first. */
async function endTrip(db: Knex, id: string, outcome: string, now: number): Promise<boolean> {
  const ended = await db('widget_consent_requests')
    .where({ id })
    .whereNull('completed_at')
    .update({ completed_at: now, outcome });
  return ended === 1;
}

/**
 * Trips past their wait whose callback never came, oldest first: `widget_consent_requests_open_idx`
 * (completed_at, expires_at) walks exactly them.
 */
export async function expiredOpenTrips(db: Knex, now: number, limit: number): Promise<ConsentRequestRow[]> {
  return db<ConsentRequestRow>('widget_consent_requests')
    .whereNull('completed_at')
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit);
}

/** Ends an expired trip as abandoned, once (a conditional update: of two schedulers, or a late callback, one wins). */
export function abandonTrip(trx: Knex, id: string, now: number): Promise<boolean> {
  return endTrip(trx, id, ABANDONED, now);
}

export async function findConsentRequestByState(
  db: Knex,
  state: string,
): Promise<ConsentRequestRow | undefined> {
  return db<ConsentRequestRow>('widget_consent_requests')
    .where({ state_hash: sha256Hex(state) })
    .first();
}

/**
 * The trip a session is waiting on, not past its wait: at the bank (not completed), or back from it with its
 * code being exchanged (claimed by the callback, `outcome` still `in_progress`). The second counts too: until
 * the callback settles the trip (a link, or a problem) the session has neither, and a widget polling in that
 * moment must not read "nothing happening" (it went back to the consent screen and stopped polling).
 */
export async function openConsentRequest(
  db: Knex,
  sessionId: string,
  now: number,
): Promise<ConsentRequestRow | undefined> {
  return db<ConsentRequestRow>('widget_consent_requests')
    .where({ session_id: sessionId })
    .where((open) => open.whereNull('completed_at').orWhere({ outcome: CLAIMED }))
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .first();
}

/**
 * Takes the callback: true for the one caller that completed the row. A second callback with the same
 * state (a replay, a reload, a race) finds it completed and gets false.
 */
export function claimConsentRequest(db: Knex, id: string, now: number): Promise<boolean> {
  return endTrip(db, id, CLAIMED, now);
}

export async function settleConsentRequest(
  db: Knex,
  id: string,
  outcome: string,
  linkId: string | null = null,
): Promise<void> {
  await db('widget_consent_requests').where({ id }).update({ outcome, link_id: linkId });
}

export function openVerifier(
  row: Pick<ConsentRequestRow, 'id' | 'verifier_sealed'>,
  secrets: SecretBox,
): string {
  return secrets.open(row.verifier_sealed, verifierContext(row.id));
}
