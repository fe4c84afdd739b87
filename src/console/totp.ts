import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../secrets/secret-box.js';

/*
 * The console's optional second factor: TOTP (RFC 6238) as every authenticator app speaks it by default,
 * HMAC-SHA1, 6 digits, a 30-second step, over a 20-byte random secret shown to the user in base32
 * (RFC 4648). A code is accepted one step early or late (a phone's clock drifts, a person types slowly),
 * and never twice: the caller keeps the last step it accepted for the user and passes it back, and a code
 * of that step or an earlier one is refused, so a code seen over a shoulder or in a proxy's log is spent.
 */

export const TOTP_DIGITS = 6;
export const TOTP_STEP_MS = 30_000;
/** Steps either side of now that still count. */
const WINDOW = 1;
const SECRET_BYTES = 20;
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function base32Encode(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/**
 * Base32 as people copy it: case, spaces, hyphens and `=` padding do not matter. Null for anything else,
 * so a typo is an error rather than a different secret.
 */
export function base32Decode(text: string): Buffer | null {
  const clean = text.toUpperCase().replace(/[\s-]/g, '').replace(/=+$/, '');
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const char of clean) {
    const index = BASE32.indexOf(char);
    if (index < 0) return null;
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
    value &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}

/** A new secret, in base32 (32 characters for 20 bytes). */
export function newTotpSecret(): string {
  return base32Encode(randomBytes(SECRET_BYTES));
}

/** The secret in groups of four, easier to read out and type into an app. */
export function groupedSecret(base32: string): string {
  return base32.replace(/(.{4})(?=.)/g, '$1 ');
}

/** The time step a moment falls in (RFC 6238's T, with T0 = 0). */
export function totpStep(nowMs: number): number {
  return Math.floor(nowMs / TOTP_STEP_MS);
}

/** RFC 4226's HOTP of one counter, `digits` long, with leading zeros. */
export function hotp(secret: Buffer, counter: number, digits = TOTP_DIGITS): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', secret).update(message).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The code an app shows at `nowMs`. */
export function totpCode(secret: Buffer, nowMs: number, digits = TOTP_DIGITS): string {
  return hotp(secret, totpStep(nowMs), digits);
}

/**
 * The step whose code `code` is, within one step of now and later than `lastStep` (the last one accepted
 * for this user; null when none was), or null. Every candidate is compared, in constant time, so how long
 * this takes says nothing about which step nearly matched.
 */
export function acceptedStep(
  secret: Buffer,
  code: string,
  nowMs: number,
  lastStep: number | null,
): number | null {
  const given = Buffer.from(code.replace(/\s/g, ''));
  if (given.length !== TOTP_DIGITS || !/^[0-9]+$/.test(given.toString())) return null;
  const now = totpStep(nowMs);
  let accepted: number | null = null;
  for (let step = now - WINDOW; step <= now + WINDOW; step++) {
    const matches = timingSafeEqual(Buffer.from(hotp(secret, step)), given);
    const fresh = lastStep === null || step > lastStep;
    if (matches && fresh && accepted === null) accepted = step;
  }
  return accepted;
}

/** The `otpauth://` URI authenticator apps import (the de-facto Key Uri Format). */
export function otpauthUri(issuer: string, account: string, base32: string): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  const query = new URLSearchParams({
    secret: base32,
    issuer,
    algorithm: 'SHA1',
    digits: String(TOTP_DIGITS),
    period: String(TOTP_STEP_MS / 1000),
  });
  return `otpauth://totp/${label}?${query.toString().replace(/\+/g, '%20')}`;
}

/*
 * Sealing. The saved secret is sealed under the master key with the user's id as its context (as every
 * sealed column is, src/secrets/sealed-columns.ts, so a master-key rotation re-seals it).
 *
 * While the user enrols, the new secret is in no table at all: the page carries it back in a hidden field,
 * sealed (AES-GCM, so neither readable nor changeable by the browser) under a context naming the user and
 * their session's CSRF token, with an expiry inside. That way a wrong code stores nothing, an abandoned
 * enrolment leaves nothing behind to clean up, any API node can finish what another started, and the value
 * cannot be replayed into another user's or another session's enrolment. The alternative, a "pending"
 * column, would write the secret (sealed) before the user proved their app has it, and need clearing.
 */

/** How long an enrolment page stays good: time to install an app and type a code. */
export const ENROLMENT_TTL_MS = 30 * 60_000;

export function sealTotpSecret(box: SecretBox, userId: string, base32: string): string {
  return box.seal(base32, userId);
}

/** The saved secret's bytes, or null when it does not open (another master key, a damaged row). */
export function openTotpSecret(box: SecretBox, userId: string, sealed: string): Buffer | null {
  try {
    return base32Decode(box.open(sealed, userId));
  } catch {
    return null;
  }
}

const enrolmentContext = (userId: string, csrf: string) => `console totp enrolment/${userId}/${csrf}`;

export function sealEnrolment(
  box: SecretBox,
  session: { userId: string; csrf: string },
  base32: string,
  nowMs: number,
): string {
  return box.seal(
    JSON.stringify({ secret: base32, exp: nowMs + ENROLMENT_TTL_MS }),
    enrolmentContext(session.userId, session.csrf),
  );
}

/** The base32 secret of an enrolment this session started and that has not expired, or null. */
export function openEnrolment(
  box: SecretBox,
  session: { userId: string; csrf: string },
  sealed: string,
  nowMs: number,
): string | null {
  try {
    const { secret, exp } = JSON.parse(box.open(sealed, enrolmentContext(session.userId, session.csrf))) as {
      secret: unknown;
      exp: unknown;
    };
    if (typeof secret !== 'string' || typeof exp !== 'number' || exp <= nowMs) return null;
    return base32Decode(secret) ? secret : null;
  } catch {
    return null;
  }
}

/**
 * The second-factor check users.ts's signIn and disableTotp take, for the code a form gave: 'missing' when
 * it gave none, false when the code is wrong, spent, or the secret does not open (then `unreadable` is told
 * whose, for the operator's log: the user cannot sign in until the master key is fixed or the factor reset).
 */
export function codeChecker(
  box: SecretBox,
  code: string | undefined,
  nowMs: number,
  unreadable: (userId: string) => void = () => undefined,
) {
  return (factor: {
    userId: string;
    sealed: string;
    lastStep: number | null;
  }): number | false | 'missing' => {
    if (!code || !code.trim()) return 'missing';
    const secret = openTotpSecret(box, factor.userId, factor.sealed);
    if (!secret) {
      unreadable(factor.userId);
      return false;
    }
    return acceptedStep(secret, code, nowMs, factor.lastStep) ?? false;
  };
}
