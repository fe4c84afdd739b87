import { createHmac, timingSafeEqual } from 'node:crypto';

/** The spec's maximum signature age; a receiver may choose another. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

const HEX_SIGNATURE = /^[0-9a-f]{64}$/;

/** `svc` → `Svc-Signature`: the header names follow the operator's brand (DESIGN §3). */
export function headerNames(brand: string): { signature: string; eventId: string } {
  const prefix = brand.charAt(0).toUpperCase() + brand.slice(1);
  return { signature: `${prefix}-Signature`, eventId: `${prefix}-Event-Id` };
}

/** HMAC-SHA256, hex, over `<t>.<raw body>` keyed with the endpoint secret string. */
export function computeSignature(secret: string, timestamp: number, rawBody: string | Uint8Array): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/** `t=<unix>,v1=<hex>[,v1=<hex>]`: one `v1` per active secret, so a receiver mid-roll verifies with either. */
export function signatureHeader(
  secrets: readonly string[],
  timestamp: number,
  rawBody: string | Uint8Array,
): string {
  return [
    `t=${timestamp}`,
    ...secrets.map((secret) => `v1=${computeSignature(secret, timestamp, rawBody)}`),
  ].join(',');
}

export interface ParsedSignature {
  timestamp: number | null;
  signatures: string[];
}

/** Reads `t` and every `v1`; other schemes (a future `v2`) are ignored, as a receiver should. */
export function parseSignatureHeader(header: string): ParsedSignature {
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === 't' && timestamp === null && /^\d{1,15}$/.test(value)) timestamp = Number(value);
    else if (key === 'v1') signatures.push(value.toLowerCase());
  }
  return { timestamp, signatures };
}

export interface VerifyOptions {
  /** How far the signature's timestamp may be from `now`, in either direction. Default 300 seconds. */
  toleranceSeconds?: number;
  /** The receiver's current time: milliseconds since the epoch (as `Date.now()`) or a Date. Default: now. */
  now?: number | Date;
}

/**
 * Receiver side: true when `header` carries a timestamp within the tolerance of `now` (either direction, so
 * neither a replayed old request nor one signed ahead of time passes) and at least one `v1` equal to the
 * HMAC of `<t>.<rawBody>` with `secret`. `rawBody` must be the bytes as received, before any JSON parsing.
 * Comparisons are constant-time.
 */
export function verifySignature(
  rawBody: string | Uint8Array,
  header: string | null | undefined,
  secret: string,
  options: VerifyOptions = {},
): boolean {
  if (typeof header !== 'string' || header === '' || typeof secret !== 'string' || secret === '')
    return false;
  const { timestamp, signatures } = parseSignatureHeader(header);
  if (timestamp === null || signatures.length === 0) return false;
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowMs = options.now instanceof Date ? options.now.getTime() : (options.now ?? Date.now());
  if (!Number.isFinite(nowMs) || Math.abs(Math.floor(nowMs / 1000) - timestamp) > tolerance) return false;
  const expected = Buffer.from(computeSignature(secret, timestamp, rawBody), 'hex');
  let matched = false;
  for (const candidate of signatures) {
    if (!HEX_SIGNATURE.test(candidate)) continue;
    // Every candidate is compared, so the time taken does not tell which one matched.
    if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) matched = true;
  }
  return matched;
}
