import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../secrets/secret-box.js';

/*
 * The console's session: a JWT (RFC 7519, HS256) in an `HttpOnly`, `Secure`, `SameSite=Strict` cookie.
 * Signed with a key derived from the master key for this purpose only (its id in the header's `kid`), so
 * every API node of one installation checks every other's sessions and nothing else can make one; an API
 * key, a widget token or a JWT signed for anything else never checks. Short-lived (15 minutes, renewed
 * while in use, 12 hours at most from sign-in), naming its row on the server (sessions.ts), which signing
 * out removes, and bound to the user's `session_epoch`, so a reset or a disable ends it at once. It carries the CSRF token the pages put in their forms: a cross-site page can
 * neither read the cookie nor the token.
 */

const SIGNING_LABEL = 'svc console session v1';
export const SESSION_TTL_MS = 15 * 60_000;
export const SESSION_MAX_AGE_MS = 12 * 3_600_000;
/** A token issued by a clock this far ahead of ours is still accepted (several API nodes). */
const CLOCK_SKEW_MS = 60_000;

export interface SessionClaims {
  /** The console user's id. */
  sub: string;
  /** The session's row on the server (sessions.ts): the session holds while the row is there. */
  sid: string;
  /** The user's session epoch when the session was signed. */
  epoch: number;
  /** Random, per session: what every change must carry back. */
  csrf: string;
  /** Milliseconds since the epoch (not seconds: every time in this code base is milliseconds). */
  iat: number;
  exp: number;
  /** When the user signed in; renewals keep it, and none goes past SESSION_MAX_AGE_MS from it. */
  auth_time: number;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function signSession(secrets: SecretBox, claims: SessionClaims): string {
  const signing = secrets.derivedKey(SIGNING_LABEL)!;
  const unsigned = `${b64({ alg: 'HS256', typ: 'JWT', kid: signing.keyId })}.${b64(claims)}`;
  return `${unsigned}.${createHmac('sha256', signing.key).update(unsigned).digest('base64url')}`;
}

/**
 * New claims for session `sid` of a user who signed in at `authTime` (now, or for a change of credentials
 * the session's own sign-in: such a change never extends how long a session may last).
 */
export function newSession(
  userId: string,
  sid: string,
  epoch: number,
  now: number,
  authTime = now,
): SessionClaims {
  return {
    sub: userId,
    sid,
    epoch,
    csrf: randomBytes(18).toString('base64url'),
    iat: now,
    exp: Math.min(now + SESSION_TTL_MS, authTime + SESSION_MAX_AGE_MS),
    auth_time: authTime,
  };
}

/** The same session, good for another SESSION_TTL_MS (bounded by its maximum age), when half has gone. */
export function renewal(claims: SessionClaims, now: number): SessionClaims | null {
  if (claims.exp - now > SESSION_TTL_MS / 2) return null;
  const exp = Math.min(now + SESSION_TTL_MS, claims.auth_time + SESSION_MAX_AGE_MS);
  return exp > claims.exp ? { ...claims, iat: now, exp } : null;
}

function parsePart(part: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/**
 * The claims of a well-formed, correctly signed, unexpired session token, or null. Only `HS256` with a
 * `kid` this installation holds is accepted: `alg: none` and other algorithms are refused before any check.
 */
export function verifySession(secrets: SecretBox, token: string, now: number): SessionClaims | null {
  if (token.length > 2048) return null;
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = parsePart(headerPart);
  if (!header || header.alg !== 'HS256' || header.typ !== 'JWT' || typeof header.kid !== 'string')
    return null;
  const signing = secrets.derivedKey(SIGNING_LABEL, header.kid);
  if (!signing) return null;
  const expected = createHmac('sha256', signing.key).update(`${headerPart}.${payloadPart}`).digest();
  const given = Buffer.from(signaturePart, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  const claims = parsePart(payloadPart);
  if (
    !claims ||
    typeof claims.sub !== 'string' ||
    typeof claims.sid !== 'string' ||
    typeof claims.csrf !== 'string' ||
    !Number.isSafeInteger(claims.epoch) ||
    !Number.isSafeInteger(claims.iat) ||
    !Number.isSafeInteger(claims.exp) ||
    !Number.isSafeInteger(claims.auth_time)
  )
    return null;
  const session = claims as unknown as SessionClaims;
  if (session.exp <= now || session.iat > now + CLOCK_SKEW_MS) return null;
  if (session.exp - session.auth_time > SESSION_MAX_AGE_MS) return null;
  return session;
}

/** Whether a change carries its session's CSRF token (compared in constant time). */
export function csrfMatches(claims: SessionClaims, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(claims.csrf);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}
