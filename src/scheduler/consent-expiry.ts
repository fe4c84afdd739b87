import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { linkConsentExpiring, linkExpired } from '../events/payloads.js';
import {
  CONSENT_EXPIRED,
  consentsToWarn,
  consentView,
  endedConsents,
  markConsentEnded,
  markConsentWarned,
  type ConsentDue,
} from '../links/consent/consent-life.js';
import { expireEndedConsentLink } from '../links/link-states.js';
import type { Logger } from '../logging/logger.js';
import { publishEvent } from '../webhooks/fan-out.js';
import { winTick } from './housekeeping.js';

/*
 * The consents' clock, once a tick (docs/open-finance.md, "A consent's life"): a consent link is warned of
 * once, `links.consentExpiryWarningDays` before its consent ends (`link.consent_expiring`), and expired once
 * when it ends (`link.expired` with `consent_expired`), each with its marker on the grant in the event's
 * transaction. The markers are set on a condition (still null), so a second scheduler, or a tick retried
 * after a crash, sends nothing twice.
 */

/**
 * Consents read per tick and step. The usual load is a day's worth of consents (a 10,000-link appliance with
 * year-long consents ends about 30 a day); a backlog (the scheduler was down) drains 500 a minute, each in a
 * batch of short transactions, so SQLite's writer is never held long.
 */
const PER_TICK = 500;
const PER_TRANSACTION = 100;

export interface ConsentExpiryServices {
  db: Database;
  clock: Clock;
  config: Readonly<Config>;
  logger: Logger;
}

/** One tick: consents that ended expire their links, then those about to end are warned of. */
export async function runConsentExpiry(
  services: ConsentExpiryServices,
  tickPeriodMs = 60_000,
): Promise<{ ended: number; warned: number }> {
  const now = services.clock.now();
  if (!(await winTick(services, 'consent-expiry', now, tickPeriodMs / 2))) return { ended: 0, warned: 0 };
  const ended = await inBatches(services, await endedConsents(services.db.knex, now, PER_TICK), endConsent);
  const view = consentView(services, now);
  const warned = await inBatches(services, await consentsToWarn(services.db.knex, view, PER_TICK), warn);
  if (ended + warned > 0)
    services.logger.info({ consents_ended: ended, consents_warned: warned }, 'consents');
  return { ended, warned };
}

type Step = (trx: Database['knex'], consent: ConsentDue, now: number) => Promise<boolean>;

/** Runs `step` over `due`, a short transaction per batch; answers how many sent their event. */
async function inBatches(services: ConsentExpiryServices, due: ConsentDue[], step: Step): Promise<number> {
  let sent = 0;
  for (let i = 0; i < due.length; i += PER_TRANSACTION) {
    const batch = due.slice(i, i + PER_TRANSACTION);
    const now = services.clock.now();
    sent += await services.db.transaction(async (trx) => {
      let n = 0;
      for (const consent of batch) if (await step(trx, consent, now)) n++;
      return n;
    });
  }
  return sent;
}

/**
 * The consent ended: its link expires as of the consent's end, with its `link.expired`. A link already
 * expired for another reason (its grant revoked, say) keeps that reason and sends nothing more.
 */
const endConsent: Step = async (trx, consent, now) => {
  if (!(await markConsentEnded(trx, consent.link_id, now))) return false;
  if (!(await expireEndedConsentLink(trx, consent.link_id, CONSENT_EXPIRED, consent.expires_at, now)))
    return false;
  const data = linkExpired({
    id: consent.link_id,
    last_error_code: CONSENT_EXPIRED,
    expired_at: consent.expires_at,
  });
  await publishEvent(trx, { ...ownerOf(consent), type: 'link.expired', data, now });
  return true;
};

/** The consent ends soon: `link.consent_expiring`, unless the link already expired (it needs a reconnect anyway). */
const warn: Step = async (trx, consent, now) => {
  if (!(await markConsentWarned(trx, consent.link_id, now)) || consent.status !== 'active') return false;
  const data = linkConsentExpiring(consent, now);
  await publishEvent(trx, { ...ownerOf(consent), type: 'link.consent_expiring', data, now });
  return true;
};

const ownerOf = (consent: ConsentDue) => ({
  orgId: consent.org_id,
  mode: consent.mode,
  linkId: consent.link_id,
});
