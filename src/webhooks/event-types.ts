/** The spec's event catalogue. A receiver subscribed with `["*"]` also gets types added later. */
export const EVENT_TYPES = [
  'link.created',
  'link.refreshed',
  'link.expired',
  'link.deleted',
  'account.created',
  'account.removed',
  'refresh_intent.created',
  'refresh_intent.requires_mfa',
  'refresh_intent.succeeded',
  'refresh_intent.failed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function subscribes(enabledEvents: string[], type: string): boolean {
  return enabledEvents.includes('*') || enabledEvents.includes(type);
}
