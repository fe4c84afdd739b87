import type { Knex } from 'knex';
import type { AuthorizationDetail } from '../../banks/consent/authorization-details.js';
import { findRegistration } from '../../banks/consent/registrations.js';
import type { Database } from '../../db/database.js';
import { queueRefusedGrant } from '../../links/consent/revocations.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { ABANDONED, abandonTrip, expiredOpenTrips, type ConsentRequestRow } from './consent-requests.js';

/*
 * The consent a trip leaves at the bank when it makes no link (issue 43, item 4; docs/open-finance.md, "Bank
 * limits"). A Brazilian start creates the consent before the person is sent to the bank (consents API 3.3.1,
 * `POST /consents`: `AWAITING_AUTHORISATION`), so a trip that never comes back, one the person replaced by
 * starting again, or one whose return failed before a link was made, leaves a consent at the bank: waiting,
 * or authorised by a person whose way back failed. Each is revoked through the revoke outbox
 * (links/consent/revocations.ts), as a refused grant is: `DELETE /consents/{consentId}` (consents-3.3.1.yml,
 * operation `consentsDeleteConsentsConsentId`, "Pedido de revogação do consentimento"; the bank answers 204
 * and the consent is `REJECTED`, or 422 `CONSENTIMENTO_EM_STATUS_REJEITADO` when it already was), retried up
 * to REVOKE_ATTEMPTS, in the background share of the bank's budget, below the syncs (revokePriority). A
 * Chilean trip's grant is made only when the person consents, so it leaves nothing to revoke.
 */

/** The audit log's actor for a trip the scheduler found abandoned. */
export const ABANDONED_TRIPS_ACTOR = 'scheduler:abandoned-trips';

/** Expired trips ended per housekeeping pass, each in its own short transaction: far more than a minute's starts. */
const TRIPS_PER_PASS = 200;

/**
 * The consent a trip created at the bank before the person got there: the `identifier` of the details it
 * pushed (profiles/brasil.ts names its consent there), or null (a Chilean trip's details name none). Pure.
 */
export function tripConsentId(trip: Pick<ConsentRequestRow, 'authorization_details'>): string | null {
  let details: AuthorizationDetail[];
  try {
    details = JSON.parse(trip.authorization_details) as AuthorizationDetail[];
  } catch {
    return null;
  }
  const identifier = Array.isArray(details) ? details[0]?.identifier : undefined;
  return typeof identifier === 'string' && identifier !== '' ? identifier : null;
}

/** Whether the scheduler ended the trip (a callback that finds it so is late, not a replay). */
export function isAbandoned(trip: Pick<ConsentRequestRow, 'outcome'>): boolean {
  return trip.outcome === ABANDONED;
}

/**
 * Queues the revoke of the consents some ended trips left at the bank, in the transaction that ends them.
 * A trip of a registration since replaced is left: its consent is the old client's, which the bank would not
 * let the new one delete (the bank rejects an unauthorised one itself after 60 minutes). Returns how many.
 */
export async function releaseTripConsents(
  trx: Knex,
  trips: readonly ConsentRequestRow[],
  context: { secrets: SecretBox; actor: string; now: number },
): Promise<number> {
  let queued = 0;
  for (const trip of trips) {
    const consentId = tripConsentId(trip);
    if (consentId === null) continue;
    const registration = await findRegistration(trx, trip.bank_id, trip.mode);
    if (!registration || registration.id !== trip.consent_client_id) continue;
    await queueRefusedGrant(
      trx,
      {
        ownerId: trip.id,
        orgId: trip.org_id,
        mode: trip.mode,
        bankId: trip.bank_id,
        clientId: registration.client_id,
      },
      consentId,
      context.secrets,
      context.actor,
      context.now,
    );
    queued += 1;
  }
  return queued;
}

/**
 * Housekeeping: ends the trips past their wait (`CONSENT_WAIT_MS`, 10 minutes) whose callback never came,
 * as abandoned, and queues the revoke of the consent each left at the bank. Each trip is ended once (a
 * conditional update) with its revoke queued in the same transaction, so a late callback and two schedulers
 * never queue it twice.
 */
export async function abandonExpiredTrips(
  services: { db: Database; secrets: SecretBox },
  now: number,
): Promise<{ abandoned: number; consentsQueued: number }> {
  const trips = await expiredOpenTrips(services.db.knex, now, TRIPS_PER_PASS);
  let abandoned = 0;
  let consentsQueued = 0;
  for (const trip of trips)
    await services.db.transaction(async (trx) => {
      if (!(await abandonTrip(trx, trip.id, now))) return;
      abandoned += 1;
      consentsQueued += await releaseTripConsents(trx, [trip], {
        secrets: services.secrets,
        actor: ABANDONED_TRIPS_ACTOR,
        now,
      });
    });
  return { abandoned, consentsQueued };
}
