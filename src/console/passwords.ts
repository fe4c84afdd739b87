import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/*
 * Console passwords: scrypt from node:crypto with OWASP's parameters (N = 2^17, r = 8, p = 1: 128 MiB and
 * about a third of a second a hash on this machine's cores), a 16-byte random salt, stored with its
 * parameters (`scrypt$17$8$1$<salt>$<hash>`, base64url) so that they can be raised later without a
 * migration. At 128 MiB a hash, unthrottled logins could exhaust memory: at most two hash at once and the
 * rest wait their turn (sign-in is rare; an attacker's guesses queue behind each other, which is the point).
 */

const LOG_N = 17;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;
const KEY_LENGTH = 32;
const MAX_CONCURRENT = 2;
/**
 * Checks allowed to wait for a turn: at a third of a second each, two at a time, the last waits about 5 s.
 * Beyond that a check is refused at once (PasswordChecksBusy), so that a flood of sign-ins from many
 * addresses (each under the per-address throttle) holds neither memory nor people's sign-ins for minutes.
 */
export const MAX_WAITING = 32;
/** Shortest and longest password accepted: NIST SP 800-63B's floor, and a bound on the work a hash does. */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** Too many password checks are waiting: the caller answers 503 with Retry-After. */
export class PasswordChecksBusy extends Error {
  override name = 'PasswordChecksBusy';
  readonly retryAfterSeconds = 5;
}

let running = 0;
const waiting: (() => void)[] = [];

async function limited<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT) {
    if (waiting.length >= MAX_WAITING) throw new PasswordChecksBusy('too many password checks waiting');
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  return limited(
    () =>
      new Promise((resolve, reject) =>
        scrypt(
          password.normalize('NFKC'),
          salt,
          KEY_LENGTH,
          { N: 2 ** logN, r, p, maxmem: 256 * 2 ** logN * r + 1024 * 1024 },
          (error, key) => (error ? reject(error) : resolve(key)),
        ),
      ),
  );
}

/** Why a password is refused, or null when it is acceptable. */
export function passwordProblem(password: string): string | null {
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) return `A password needs at least ${PASSWORD_MIN_LENGTH} characters.`;
  if (length > PASSWORD_MAX_LENGTH) return `A password has at most ${PASSWORD_MAX_LENGTH} characters.`;
  return null;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, LOG_N, BLOCK_SIZE, PARALLELISM);
  return [
    'scrypt',
    LOG_N,
    BLOCK_SIZE,
    PARALLELISM,
    salt.toString('base64url'),
    key.toString('base64url'),
  ].join('$');
}

/** A stored hash that checks nothing, for users without a password: the answer takes as long as a real one. */
const UNUSABLE = `scrypt$${LOG_N}$${BLOCK_SIZE}$${PARALLELISM}$${randomBytes(16).toString('base64url')}$${randomBytes(KEY_LENGTH).toString('base64url')}`;

/**
 * Whether `password` matches `stored`. With no stored hash (no such user, or an invitation not yet
 * accepted) it hashes anyway and answers false, so that the time taken does not say which emails exist.
 */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const [scheme, logN, r, p, salt, expected] = (stored ?? UNUSABLE).split('$');
  if (scheme !== 'scrypt' || !logN || !r || !p || !salt || !expected) return false;
  const key = await derive(password, Buffer.from(salt, 'base64url'), Number(logN), Number(r), Number(p));
  const want = Buffer.from(expected, 'base64url');
  return stored !== null && key.length === want.length && timingSafeEqual(key, want);
}
