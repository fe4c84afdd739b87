import { toIso } from '../clock/clock.js';

/*
 * One builder per event type: the only code that gives an event's `data` its shape. The flows that emit
 * an event and the sandbox that fires a sample of it call the same builder, so a receiver cannot tell a
 * fired event from a real one by its keys. Inputs are the few columns a builder reads, declared here
 * structurally, so that the owners' rows satisfy them and events/ imports no capability.
 *
 * Key order is part of the payload: `JSON.stringify` keeps it, and the body a receiver gets is that text.
 */

type Iso = string | null;

export type LinkCreatedData = {
  object: 'link';
  id: string;
  bank_id: string;
  status: string;
  holder_name: string | null;
  created_at: Iso;
};

export function linkCreated(link: {
  id: string;
  bank_id: string;
  status: string;
  holder_name: string | null;
  created_at: number;
}): LinkCreatedData {
  return {
    object: 'link',
    id: link.id,
    bank_id: link.bank_id,
    status: link.status,
    holder_name: link.holder_name,
    created_at: toIso(link.created_at),
  };
}

export type LinkRefreshedData = {
  object: 'link';
  id: string;
  status: 'active';
  last_synced_at: Iso;
  next_sync_at: Iso;
  accounts_count: number;
  new_movements_count: number;
};

/** What one successful sync did; `accountsCount` is the accounts the bank listed this time. */
export interface SyncSummary {
  syncedAt: number;
  nextSyncAt: number;
  accountsCount: number;
  newMovements: number;
}

export function linkRefreshed(link: { id: string }, sync: SyncSummary): LinkRefreshedData {
  return {
    object: 'link',
    id: link.id,
    status: 'active',
    last_synced_at: toIso(sync.syncedAt),
    next_sync_at: toIso(sync.nextSyncAt),
    accounts_count: sync.accountsCount,
    new_movements_count: sync.newMovements,
  };
}

export type LinkExpiredData = {
  object: 'link';
  id: string;
  status: 'expired';
  last_error_code: string | null;
  expired_at: Iso;
};

export function linkExpired(link: {
  id: string;
  last_error_code: string | null;
  expired_at: number | null;
}): LinkExpiredData {
  return {
    object: 'link',
    id: link.id,
    status: 'expired',
    last_error_code: link.last_error_code,
    expired_at: toIso(link.expired_at),
  };
}

const DAY_MS = 86_400_000;

/** A consent link's consent ends soon (the whole days left, rounded up: 7 a week before, 1 on the last day). */
export type LinkConsentExpiringData = {
  object: 'consent';
  link_id: string;
  status: 'expiring';
  expires_at: Iso;
  days_left: number;
};

export function linkConsentExpiring(
  consent: { link_id: string; expires_at: number },
  now: number,
): LinkConsentExpiringData {
  return {
    object: 'consent',
    link_id: consent.link_id,
    status: 'expiring',
    expires_at: toIso(consent.expires_at),
    days_left: Math.max(0, Math.ceil((consent.expires_at - now) / DAY_MS)),
  };
}

export type LinkDeletedData = { object: 'link'; id: string; deleted_at: string };

export function linkDeleted(link: { id: string }, deletedAt: number): LinkDeletedData {
  return { object: 'link', id: link.id, deleted_at: toIso(deletedAt)! };
}

export type AccountCreatedData = {
  object: 'account';
  id: string;
  link_id: string;
  name: string;
  type: string;
  currency: string;
  last_4: string | null;
};

export function accountCreated(account: Omit<AccountCreatedData, 'object'>): AccountCreatedData {
  return {
    object: 'account',
    id: account.id,
    link_id: account.link_id,
    name: account.name,
    type: account.type,
    currency: account.currency,
    last_4: account.last_4,
  };
}

export type AccountRemovedData = {
  object: 'account';
  id: string;
  link_id: string;
  status: 'removed';
  removed_at: Iso;
};

export function accountRemoved(
  account: { id: string; link_id: string },
  removedAt: number,
): AccountRemovedData {
  return {
    object: 'account',
    id: account.id,
    link_id: account.link_id,
    status: 'removed',
    removed_at: toIso(removedAt),
  };
}

/** The columns every refresh intent event starts with. */
interface IntentRef {
  id: string;
  link_id: string;
}

type IntentHead<S extends string> = { object: 'refresh_intent'; id: string; link_id: string; status: S };

function intentHead<S extends string>(intent: IntentRef, status: S): IntentHead<S> {
  return { object: 'refresh_intent', id: intent.id, link_id: intent.link_id, status };
}

export type RefreshIntentCreatedData = IntentHead<'created'> & { refresh_type: string };

export function refreshIntentCreated(intent: IntentRef & { refresh_type: string }): RefreshIntentCreatedData {
  return { ...intentHead(intent, 'created'), refresh_type: intent.refresh_type };
}

export type RefreshIntentRequiresMfaData = IntentHead<'requires_mfa'> & {
  requires_mfa: { widget_token: string; expires_at: Iso };
};

export function refreshIntentRequiresMfa(
  intent: IntentRef,
  mfa: { widgetToken: string; expiresAt: number },
): RefreshIntentRequiresMfaData {
  return {
    ...intentHead(intent, 'requires_mfa'),
    requires_mfa: { widget_token: mfa.widgetToken, expires_at: toIso(mfa.expiresAt) },
  };
}

export type RefreshIntentSucceededData = IntentHead<'succeeded'> & {
  completed_at: Iso;
  summary: { accounts_updated: number; new_movements_count: number };
};

export function refreshIntentSucceeded(
  intent: IntentRef & { completed_at: number; accounts_updated: number; new_movements_count: number },
): RefreshIntentSucceededData {
  return {
    ...intentHead(intent, 'succeeded'),
    completed_at: toIso(intent.completed_at),
    summary: { accounts_updated: intent.accounts_updated, new_movements_count: intent.new_movements_count },
  };
}

export type RefreshIntentFailedData = IntentHead<'failed'> & { error_code: string; completed_at: Iso };

export function refreshIntentFailed(
  intent: IntentRef & { error_code: string; completed_at: number },
): RefreshIntentFailedData {
  return {
    ...intentHead(intent, 'failed'),
    error_code: intent.error_code,
    completed_at: toIso(intent.completed_at),
  };
}

export type WebhookEndpointDisabledData = {
  object: 'webhook_endpoint';
  id: string;
  url: string;
  disabled: true;
  disabled_reason: 'failing';
  failing_since: Iso;
  disabled_at: Iso;
};

/** The appliance disabled an endpoint that had failed every attempt since `failing_since`. */
export function webhookEndpointDisabled(
  endpoint: { id: string; url: string; failing_since: number | null },
  disabledAt: number,
): WebhookEndpointDisabledData {
  return {
    object: 'webhook_endpoint',
    id: endpoint.id,
    url: endpoint.url,
    disabled: true,
    disabled_reason: 'failing',
    failing_since: toIso(endpoint.failing_since),
    disabled_at: toIso(disabledAt),
  };
}
