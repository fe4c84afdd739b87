import type { Knex } from 'knex';
import { auditChange } from '../audit/audit-log.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { generateIntentToken } from '../auth/tokens.js';
import { EVENT_TYPES, isEventType, type EventType } from '../events/catalogue.js';
import * as payloads from '../events/payloads.js';
import type { EventInput, EventRecord } from '../events/store.js';
import { someAccountOfLink } from '../accounts/store.js';
import type { LinkRow } from '../links/store.js';
import { CONSENT_EXPIRED, consentsOfLinks } from '../links/consent/consent-life.js';
import { publishEvent } from '../webhooks/fan-out.js';

/** How long the made-up MFA token of a fired `refresh_intent.requires_mfa` claims to live (the spec's 10 min). */
const MFA_TOKEN_TTL_MS = 10 * 60_000;

export interface FireInput {
  type: string;
  link_id: string;
}

export interface SandboxSettings {
  syncIntervalMinutes: number;
  /** `links.consentExpiryWarningDays`: how far off a fired consent warning's made-up end is. */
  consentExpiryWarningDays: number;
}

/**
 * `POST /v1/sandbox/events/fire`: a realistic event of any catalogue type about one of the caller's test
 * links, emitted through the outbox like a real one (so it is stored, listed by `GET /v1/events` and
 * delivered, signed and retried as any other) to the organisation's test-mode endpoints only. Nothing about
 * the link changes and no sync runs: the data is the link as it is, plus what the event would add (a made-up
 * `ri_` refresh intent, a completion time). Account events use one of the link's accounts when it has one.
 */
export async function fireSandboxEvent(
  trx: Knex,
  principal: Principal,
  input: FireInput,
  settings: SandboxSettings,
  now: number,
): Promise<EventRecord> {
  if (principal.mode !== 'test') {
    throw errors.wrongMode('Sandbox events fire in test mode only: use a test secret key (sk_test_…).');
  }
  if (!isEventType(input.type)) {
    throw errors.invalidParameter(
      'type',
      `Unknown event type '${input.type}'. Known types: ${EVENT_TYPES.join(', ')}.`,
    );
  }
  const link = await findOwned<LinkRow>(trx, 'links', input.link_id, principal, 'link');
  const sample = {
    link,
    account: await someAccount(trx, link.id),
    endpoint: await someEndpoint(trx, principal.orgId),
    intentId: newId('ri'),
    now,
    syncIntervalMinutes: settings.syncIntervalMinutes,
    consent: await consentOfSample(trx, link.id, now, settings.consentExpiryWarningDays),
  };
  const event = await publishEvent(trx, sampleEvent(input.type, sample));
  await auditChange(
    trx,
    principal,
    {
      action: 'sandbox.fire',
      targetType: 'event',
      targetId: event.id,
      details: { type: input.type, link_id: link.id },
    },
    now,
  );
  return event;
}

/** What a fired event is made of: the link as it is, one of its accounts, a made-up intent, the time. */
export interface EventSample {
  link: LinkRow;
  account: { id: string; name: string; type: string; currency: string; last_4: string | null };
  /** One of the organisation's test endpoints, or a made-up one: what a fired endpoint event is about. */
  endpoint: { id: string; url: string };
  /** A new `ri_` id: no intent waits behind a fired intent event. */
  intentId: string;
  now: number;
  syncIntervalMinutes: number;
  /**
   * The link's consent: whether it is a consent link, and when its consent ends (a consent link's own end,
   * else a made-up one the warning days away, so a credential link can fire the warning too).
   */
  consent: { isConsentLink: boolean; expiresAt: number };
}

/**
 * A sample event of each type from sample rows, through the builder the real flow uses
 * (src/events/payloads.ts), so only the values differ from a real event. The compiler requires a case for
 * every catalogue type.
 */
export function sampleEvent(type: EventType, sample: EventSample): EventInput {
  const { link, account, now } = sample;
  const base = { orgId: link.org_id, mode: 'test' as const, linkId: link.id, now };
  const intent = { id: sample.intentId, link_id: link.id };
  switch (type) {
    case 'link.created':
      return { ...base, type, data: payloads.linkCreated(link) };
    case 'link.refreshed': {
      const sync = {
        syncedAt: now,
        nextSyncAt: now + sample.syncIntervalMinutes * 60_000,
        accountsCount: link.accounts_count,
        newMovements: link.new_movements_count,
      };
      return { ...base, type, data: payloads.linkRefreshed(link, sync) };
    }
    case 'link.expired': {
      // A consent link expires when its consent ends; a credential link when its password is refused.
      const reason = sample.consent.isConsentLink ? CONSENT_EXPIRED : 'rejected_credentials';
      const expired = { id: link.id, last_error_code: reason, expired_at: now };
      return { ...base, type, data: payloads.linkExpired(expired) };
    }
    case 'link.deleted':
      return { ...base, type, data: payloads.linkDeleted(link, now) };
    case 'account.created':
      return { ...base, type, data: payloads.accountCreated({ ...account, link_id: link.id }) };
    case 'account.removed':
      return { ...base, type, data: payloads.accountRemoved({ id: account.id, link_id: link.id }, now) };
    case 'refresh_intent.created':
      return { ...base, type, data: payloads.refreshIntentCreated({ ...intent, refresh_type: 'only_last' }) };
    case 'refresh_intent.requires_mfa': {
      // The form of a real one; it opens nothing, since no intent waits behind it.
      const mfa = { widgetToken: generateIntentToken(intent.id), expiresAt: now + MFA_TOKEN_TTL_MS };
      return { ...base, type, data: payloads.refreshIntentRequiresMfa(intent, mfa) };
    }
    case 'refresh_intent.succeeded': {
      const summary = {
        accounts_updated: link.accounts_count,
        new_movements_count: link.new_movements_count,
      };
      return {
        ...base,
        type,
        data: payloads.refreshIntentSucceeded({ ...intent, completed_at: now, ...summary }),
      };
    }
    case 'refresh_intent.failed': {
      const failure = { error_code: 'bank_unavailable', completed_at: now };
      return { ...base, type, data: payloads.refreshIntentFailed({ ...intent, ...failure }) };
    }
    case 'link.consent_expiring': {
      const consent = { link_id: link.id, expires_at: sample.consent.expiresAt };
      return { ...base, type, data: payloads.linkConsentExpiring(consent, now) };
    }
    case 'webhook_endpoint.disabled': {
      // Nothing is disabled: the data says what a real one would, failing for the default three days.
      const failing = { ...sample.endpoint, failing_since: now - 3 * 86_400_000 };
      return { ...base, linkId: null, type, data: payloads.webhookEndpointDisabled(failing, now) };
    }
  }
}

/** The link's consent for a sample: its end when it has one and it is set, else the warning days from now. */
async function consentOfSample(trx: Knex, linkId: string, now: number, warningDays: number) {
  const facts = (await consentsOfLinks(trx, [linkId])).get(linkId);
  const madeUp = now + warningDays * 86_400_000;
  const expiresAt = facts?.expires_at == null ? madeUp : Number(facts.expires_at);
  return { isConsentLink: facts !== undefined, expiresAt };
}

/** The organisation's oldest test endpoint, else a made-up one. */
async function someEndpoint(trx: Knex, orgId: string): Promise<{ id: string; url: string }> {
  const row: { id: string; url: string } | undefined = await trx('webhook_endpoints')
    .where({ org_id: orgId, mode: 'test' })
    .orderBy('created_at')
    .first('id', 'url');
  return row ?? { id: newId('we'), url: 'https://example.com/webhooks' };
}

/** The link's first active account, else a made-up checking account of the shape the sandbox banks use. */
async function someAccount(trx: Knex, linkId: string) {
  return (
    (await someAccountOfLink(trx, linkId)) ?? {
      id: newId('acc'),
      name: 'Cuenta Corriente',
      type: 'checking' as const,
      currency: 'CLP',
      last_4: String(1000 + (Number.parseInt(linkId.slice(-4), 16) % 9000)),
      status: 'active' as const,
    }
  );
}
