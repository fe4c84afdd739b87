import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../secrets/secret-box.js';

/*
 * A browser that has signed in as a user is "known" to that user for KNOWN_DEVICE_MS: a cookie signed with
 * a key derived from the master key for this purpose alone, naming the user and a random id for the
 * browser. Its sign-in attempts spend the browser's own budget (sign-in-attempts.ts), so a stranger who
 * spends the budget of the user's email does not keep the user out (OWASP's "device cookies"). It opens
 * nothing by itself: the password, and the code where there is one, are still asked.
 */

export const KNOWN_DEVICE_COOKIE = 'svc_console_device';
export const KNOWN_DEVICE_MS = 90 * 86_400_000;
const SIGNING_LABEL = 'svc console known device v1';

export interface KnownDevice {
  /** The user it signed in as. */
  userId: string;
  /** The browser's random id: what its attempts are counted under. */
  deviceId: string;
  /** When it was issued (milliseconds). */
  issuedAt: number;
}

export function newKnownDevice(userId: string, now: number): KnownDevice {
  return { userId, deviceId: randomBytes(12).toString('base64url'), issuedAt: now };
}

export function signKnownDevice(secrets: SecretBox, device: KnownDevice): string {
  const signing = secrets.derivedKey(SIGNING_LABEL)!;
  const body = Buffer.from(
    JSON.stringify({ kid: signing.keyId, sub: device.userId, dev: device.deviceId, iat: device.issuedAt }),
  ).toString('base64url');
  return `${body}.${createHmac('sha256', signing.key).update(body).digest('base64url')}`;
}

/** The device a cookie names, when it is well-formed, signed by this installation and not too old. */
export function verifyKnownDevice(
  secrets: SecretBox,
  cookie: string | null,
  now: number,
): KnownDevice | null {
  if (!cookie || cookie.length > 512) return null;
  const [body, signature, ...rest] = cookie.split('.');
  if (!body || !signature || rest.length > 0) return null;
  let claims: { kid?: unknown; sub?: unknown; dev?: unknown; iat?: unknown };
  try {
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof claims?.kid !== 'string') return null;
  const signing = secrets.derivedKey(SIGNING_LABEL, claims.kid);
  if (!signing) return null;
  const expected = createHmac('sha256', signing.key).update(body).digest();
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  if (typeof claims.sub !== 'string' || typeof claims.dev !== 'string' || !Number.isSafeInteger(claims.iat))
    return null;
  const issuedAt = claims.iat as number;
  if (issuedAt > now + 60_000 || now - issuedAt > KNOWN_DEVICE_MS) return null;
  return { userId: claims.sub, deviceId: claims.dev, issuedAt };
}

export function knownDeviceCookie(token: string): string {
  return `${KNOWN_DEVICE_COOKIE}=${token}; Path=/console; Max-Age=${KNOWN_DEVICE_MS / 1000}; HttpOnly; Secure; SameSite=Strict`;
}
