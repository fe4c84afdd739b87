import { queryBrasilConsent, revokeBrasilConsent } from './brasil-consents.js';
import type { ConsentClient } from './client.js';
import { queryGrant, revokeGrant, type GrantQuery, type RevokeOutcome } from './grant-management.js';

/*
 * A link's grant at its bank, whichever profile the bank speaks: Chile's draft keeps grants in Grant
 * Management (`grant_id`), Brazil in its consents API (the consent id). The sync, the revoke outbox and the
 * widget ask here and need not know which.
 */

/** Whether the bank still honours the grant (the sync asks when a token stops working). */
export function queryConsentGrant(bank: ConsentClient, grantId: string): Promise<GrantQuery> {
  return bank.security === 'fapi1-br' ? queryBrasilConsent(bank, grantId) : queryGrant(bank, grantId);
}

/** Ends the grant at the bank: a deleted link, a renewed one's old grant, a consent the widget cannot use. */
export function revokeConsentGrant(
  bank: ConsentClient,
  grantId: string,
  now: number,
): Promise<RevokeOutcome> {
  return bank.security === 'fapi1-br'
    ? revokeBrasilConsent(bank, grantId, now)
    : revokeGrant(bank, grantId, now);
}
