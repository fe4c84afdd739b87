import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Request signing of the HTTP connector protocol (docs/connector-protocol.md): HMAC-SHA256 keyed with the
 * shared secret over `<timestamp>.<METHOD>.<path>.<raw body>`. The method and path are signed, not just the
 * body, so a captured `/v1/accounts` request cannot be replayed against `/_admin/faults`; the timestamp
 * bounds a replay to the tolerance window.
 */
export const TIMESTAMP_HEADER = 'Svc-Gateway-Timestamp';
export const SIGNATURE_HEADER = 'Svc-Gateway-Signature';
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** Hex HMAC-SHA256 of `<timestamp>.<METHOD>.<path>.<raw body>`. */
export function gatewaySignature(
  secret: string,
  timestamp: number,
  method: string,
  path: string,
  rawBody: Uint8Array | string,
): string {
  return createHmac('sha256', secret)
    .update(`${timestamp}.${method.toUpperCase()}.${path}.`)
    .update(rawBody)
    .digest('hex');
}

/** The two headers of a signed request, stamped with `nowMs` (the real clock, which the gateway checks). */
export function signatureHeaders(
  secret: string,
  method: string,
  path: string,
  rawBody: Uint8Array | string,
  nowMs: number,
): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    [TIMESTAMP_HEADER]: String(timestamp),
    [SIGNATURE_HEADER]: `v1=${gatewaySignature(secret, timestamp, method, path, rawBody)}`,
  };
}

export interface SignedRequest {
  method: string;
  /** The request target exactly as it arrived on the request line (path and query, if any). */
  path: string;
  rawBody: Uint8Array;
  timestampHeader: string | undefined;
  signatureHeader: string | undefined;
}

export type VerifyResult = { ok: true } | { ok: false; reason: string };

/**
 * Checks a request's signature against `secret`. The signature header may carry several comma-separated
 * `v1=` values (one per secret while a secret is being rotated); one match is enough. The reason never
 * includes the expected signature.
 */
export function verifyGatewaySignature(
  request: SignedRequest,
  secret: string,
  nowMs: number,
  toleranceSeconds: number = SIGNATURE_TOLERANCE_SECONDS,
): VerifyResult {
  const { timestampHeader, signatureHeader } = request;
  if (!timestampHeader || !signatureHeader) {
    return { ok: false, reason: `the request is not signed (${TIMESTAMP_HEADER} and ${SIGNATURE_HEADER})` };
  }
  if (!/^\d{1,12}$/.test(timestampHeader.trim())) {
    return { ok: false, reason: `${TIMESTAMP_HEADER} must be unix seconds` };
  }
  const timestamp = Number(timestampHeader.trim());
  if (Math.abs(nowMs / 1000 - timestamp) > toleranceSeconds) {
    return {
      ok: false,
      reason: `${TIMESTAMP_HEADER} is more than ${toleranceSeconds} s away from the gateway's clock`,
    };
  }
  const expected = Buffer.from(
    gatewaySignature(secret, timestamp, request.method, request.path, request.rawBody),
    'hex',
  );
  const candidates = signatureHeader
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1='))
    .map((part) => part.slice(3));
  for (const candidate of candidates) {
    if (!/^[0-9a-f]{64}$/i.test(candidate)) continue;
    if (timingSafeEqual(Buffer.from(candidate, 'hex'), expected)) return { ok: true };
  }
  return { ok: false, reason: 'the signature does not match' };
}
