import * as payloads from './payloads.js';

/**
 * The spec's event catalogue: each type and the builder of its `data` (payloads.ts). Adding an event type is
 * one builder and one line here, then the flow that emits it; the sandbox's sample of it is then required
 * by the compiler (sandbox-events.ts switches over every type). A receiver subscribed with `["*"]` also gets
 * types added later. The order is the spec's, then the appliance's own, and the order the API lists the
 * types in.
 */
export const EVENT_PAYLOADS = {
  'link.created': payloads.linkCreated,
  'link.refreshed': payloads.linkRefreshed,
  'link.expired': payloads.linkExpired,
  'link.deleted': payloads.linkDeleted,
  'account.created': payloads.accountCreated,
  'account.removed': payloads.accountRemoved,
  'refresh_intent.created': payloads.refreshIntentCreated,
  'refresh_intent.requires_mfa': payloads.refreshIntentRequiresMfa,
  'refresh_intent.succeeded': payloads.refreshIntentSucceeded,
  'refresh_intent.failed': payloads.refreshIntentFailed,
  // Not in the spec's catalogue: the appliance's own. A consent link's consent ends soon (docs/open-finance.md;
  // when it ends, the link sends `link.expired`); an endpoint was disabled (docs/webhook-endpoints.md).
  'link.consent_expiring': payloads.linkConsentExpiring,
  'webhook_endpoint.disabled': payloads.webhookEndpointDisabled,
} as const;

export type EventType = keyof typeof EVENT_PAYLOADS;

/** The `data` of an event of type `T`: what its builder returns. */
export type EventData<T extends EventType> = ReturnType<(typeof EVENT_PAYLOADS)[T]>;

export const EVENT_TYPES = Object.keys(EVENT_PAYLOADS) as readonly EventType[];

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(EVENT_PAYLOADS, type);
}

export function subscribes(enabledEvents: string[], type: string): boolean {
  return enabledEvents.includes('*') || enabledEvents.includes(type);
}
