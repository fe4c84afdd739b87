import { eventBody, type StoredEvent } from './payload.js';
import { headerNames, signatureHeader } from '../signature.js';

/** The names a delivery's headers go by: they follow the operator's brand (`Svc-Signature`, `Acme-Event-Id`). */
export interface RequestNames {
  signature: string;
  eventId: string;
  userAgent: string;
}

export function requestNames(brand: string): RequestNames {
  const { signature, eventId } = headerNames(brand);
  return { signature, eventId, userAgent: `${signature.replace(/-Signature$/, '')}-Webhooks/1.0` };
}

export interface DeliveryRequest {
  headers: Record<string, string>;
  body: string;
}

/**
 * What one attempt posts, as a pure function of the delivery's event, the endpoint's signing secrets (the
 * current one, and the previous one during a roll's grace: one `v1` each, `signingSecrets`) and the time it is
 * signed at. Every attempt is signed afresh, with its own `t`, from `signedAtMs`: the wall clock, since
 * receivers compare `t` with theirs.
 */
export function deliveryRequest(
  event: StoredEvent,
  secrets: readonly string[],
  signedAtMs: number,
  names: RequestNames,
): DeliveryRequest {
  const body = eventBody(event);
  const signature = signatureHeader(secrets, Math.floor(signedAtMs / 1000), body);
  return {
    headers: {
      'content-type': 'application/json',
      'user-agent': names.userAgent,
      [names.signature]: signature,
      [names.eventId]: event.id,
    },
    body,
  };
}
