import type { Knex } from 'knex';
import { toIso } from '../../clock/clock.js';
import {
  coverageOf,
  type AuthorizationDetail,
  type ConsentCoverage,
} from '../../banks/consent/authorization-details.js';
import type { LinkStatus } from '../store.js';

/*
 * A consent's life on its link (docs/open-finance.md, "A consent's life"): when it ends, whether the end
 * user must act, what it covers; and the statements the scheduler's tick runs to warn before it ends and to
 * mark it ended. With grants.ts the only code that touches `link_grants`; it imports nothing of links.ts,
 * which presents a link with its consent from here (grants.ts builds on links.ts, so imports stay one-way).
 */

/** `last_error_code` of a link whose consent reached its end (`validTo`): the end user must renew it. */
export const CONSENT_EXPIRED = 'consent_expired';
/** `last_error_code` of a link whose grant the end user (or the bank) revoked (issue 31, item 3). */
export const CONSENT_REVOKED = 'consent_revoked';

/**
 * `active`: nothing to do; `expiring`: it ends within the warning days (`links.consentExpiryWarningDays`);
 * `expired`: it ended; `revoked`: the end user or the bank withdrew it. The last three need the end user.
 */
export type ConsentStatus = 'active' | 'expiring' | 'expired' | 'revoked';

/** The `consent` member of a consent link (null on a credential link). */
export interface LinkConsent {
  expires_at: string | null;
  status: ConsentStatus;
  covers: ConsentCoverage[];
}

/** What the API says of a consent: its end, and what `covers` is worded from. */
export interface ConsentFacts {
  expires_at: number | null;
  authorization_details: string;
}

/** When the status is read, and how far ahead a consent counts as `expiring`. */
export interface ConsentView {
  now: number;
  warningDays: number;
}

const DAY_MS = 86_400_000;

/** How a process reads consents now: `links.consentExpiryWarningDays` from its configuration. */
export function consentView(
  services: { config: { links: { consentExpiryWarningDays: number } } },
  now: number,
): ConsentView {
  return { now, warningDays: services.config.links.consentExpiryWarningDays };
}

/**
 * The consent's status. A revocation is said first: the link ended for it, whatever the date. Then the date:
 * a consent past its end is `expired` even before the tick has expired its link (up to a minute), so the API
 * never calls an ended consent active; and a link the tick expired for its consent stays `expired`. Pure.
 */
export function consentStatus(
  expiresAt: number | null,
  view: ConsentView,
  link: { status: LinkStatus; last_error_code: string | null; expired_at?: number | string | null },
): ConsentStatus {
  if (link.status === 'expired' && link.last_error_code === CONSENT_REVOKED) {
    // A bank refuses a consent that reached its end as it refuses a revoked one: a sync that met the end
    // before the tick did expired the link `consent_revoked`, but the consent simply ended.
    const endedFirst = expiresAt !== null && link.expired_at != null && expiresAt <= Number(link.expired_at);
    return endedFirst ? 'expired' : 'revoked';
  }
  if (link.status === 'expired' && link.last_error_code === CONSENT_EXPIRED) return 'expired';
  if (expiresAt === null) return 'active';
  if (expiresAt <= view.now) return 'expired';
  return expiresAt - view.now <= view.warningDays * DAY_MS ? 'expiring' : 'active';
}

/** Whether the end user must act on the consent (renew it at the bank): what the console's badge marks. */
export function consentNeedsUser(status: ConsentStatus): boolean {
  return status !== 'active';
}

/** A link's consent as the API shows it. Pure. */
export function presentConsent(
  facts: ConsentFacts,
  view: ConsentView,
  link: { status: LinkStatus; last_error_code: string | null; expired_at?: number | string | null },
): LinkConsent {
  const expiresAt = facts.expires_at === null ? null : Number(facts.expires_at);
  return {
    expires_at: toIso(expiresAt),
    status: consentStatus(expiresAt, view, link),
    covers: coverageOf(JSON.parse(facts.authorization_details) as AuthorizationDetail[]),
  };
}

/**
 * The consents of some links, by link id: one query for a page of links, however long (a link without one
 * is a credential link). The links' primary key answers it.
 */
export async function consentsOfLinks(db: Knex, linkIds: string[]): Promise<Map<string, ConsentFacts>> {
  const consents = new Map<string, ConsentFacts>();
  // In chunks: `svc links list` asks for up to 10,000, past what a statement may bind on older SQLite (999).
  for (let i = 0; i < linkIds.length; i += 500) {
    const rows: (ConsentFacts & { link_id: string })[] = await db('link_grants')
      .whereIn('link_id', linkIds.slice(i, i + 500))
      .select('link_id', 'expires_at', 'authorization_details');
    for (const { link_id, ...facts } of rows) consents.set(link_id, facts);
  }
  return consents;
}

/** A consent the tick acts on, with its link's owner (for the event) and state (only an active link acts). */
export interface ConsentDue {
  link_id: string;
  expires_at: number;
  org_id: string;
  mode: 'live' | 'test';
  status: LinkStatus;
}

async function dueConsents(
  db: Knex,
  marker: 'expiry_warned_at' | 'consent_ended_at',
  from: number | null,
  to: number,
  limit: number,
): Promise<ConsentDue[]> {
  const query = db('link_grants as g')
    .join('links as l', 'l.id', 'g.link_id')
    .whereNull(`g.${marker}`)
    .where('g.expires_at', '<=', to)
    .orderBy('g.expires_at')
    .limit(limit)
    .select('g.link_id', 'g.expires_at', 'l.org_id', 'l.mode', 'l.status');
  if (from !== null) query.where('g.expires_at', '>', from);
  const rows: ConsentDue[] = await query;
  return rows.map((row) => ({ ...row, expires_at: Number(row.expires_at) }));
}

/**
 * Consents that end within the warning days and were not warned of: `(expiry_warned_at IS NULL, expires_at)`
 * walks `link_grants_expiry_warning_idx` over exactly that window. One already ended is left to
 * `endedConsents` (a warning after the end would only confuse).
 */
export function consentsToWarn(db: Knex, view: ConsentView, limit: number): Promise<ConsentDue[]> {
  return dueConsents(db, 'expiry_warned_at', view.now, view.now + view.warningDays * DAY_MS, limit);
}

/** Consents past their end that the tick has not handled: walks `link_grants_consent_end_idx`. */
export function endedConsents(db: Knex, now: number, limit: number): Promise<ConsentDue[]> {
  return dueConsents(db, 'consent_ended_at', null, now, limit);
}

/**
 * Records the warning of one consent, once: a conditional update, so of two schedulers (or a retried tick)
 * exactly one sees true and sends the event.
 */
export async function markConsentWarned(trx: Knex, linkId: string, now: number): Promise<boolean> {
  const updated = await trx('link_grants')
    .where({ link_id: linkId })
    .whereNull('expiry_warned_at')
    .update({ expiry_warned_at: now, updated_at: now });
  return updated > 0;
}

/** Records that the tick found the consent ended, once (conditional, as `markConsentWarned`). */
export async function markConsentEnded(trx: Knex, linkId: string, now: number): Promise<boolean> {
  const updated = await trx('link_grants')
    .where({ link_id: linkId })
    .whereNull('consent_ended_at')
    .update({ consent_ended_at: now, updated_at: now });
  return updated > 0;
}
