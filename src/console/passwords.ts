import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/*
 * Console passwords: scrypt from node:crypto with OWASP's parameters (N = 2^17, r = 8, p = 1: 128 MiB and
 * about a third of a second a hash on this machine's cores), a 16-byte random salt, stored with its
 * parameters (`scrypt$17$8$1$<salt>$<hash>`, base64url) so that they can be raised later without a
 * migration. At 128 MiB a hash, unthrottled logins could exhaust memory: hashes run in two lanes, each with
 * its own few at once and its own queue, and the rest wait their turn (sign-in is rare; an attacker's
 * guesses queue behind each other, which is the point):
 *
 * - `open`: every sign-in from a browser not known to the user it names (strangers, new browsers, unknown
 *   emails). Two at once, 32 waiting; past that 503 at once.
 * - `known`: a browser that signed in as the user before, for that user (known-device.ts), and nothing
 *   else. Strangers cannot enter it (the cookie is signed by this installation and names the user), so a
 *   flood of sign-ins from any number of addresses, which fills `open`, never queues the owner behind it nor
 *   refuses them: 60 wrong sign-ins at once from 60 addresses gave the owner a 503 when there was one queue
 *   (issue 44). Their hash still shares the CPU, on a thread of libuv's pool of 4 that `open`'s two leave
 *   free. One at once (with `open`'s two, at most 384 MiB in all) and 16 waiting; sign-in-attempts.ts lets
 *   one user hold at most two of them, so only many users of the installation together could fill it.
 */

const LOG_N = 17;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;
const KEY_LENGTH = 32;

/** Which queue a password check waits in (above). */
export type HashLane = 'open' | 'known';

/**
 * Checks allowed to wait for a turn in the open lane: at a third of a second each, two at a time, the last
 * waits about 5 s. Beyond that a check is refused at once (PasswordChecksBusy), so that a flood of sign-ins
 * from many addresses (each under the per-address throttle) holds neither memory nor sign-ins for minutes.
 */
export const MAX_WAITING = 32;
/** Hashes at once and checks waiting, per lane. */
const LANE_SIZES: Record<HashLane, { running: number; waiting: number }> = {
  open: { running: 2, waiting: MAX_WAITING },
  known: { running: 1, waiting: 16 },
};
/** Shortest and longest password accepted: NIST SP 800-63B's floor, and a bound on the work a hash does. */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** Too many password checks are waiting: the caller answers 503 with Retry-After. */
export class PasswordChecksBusy extends Error {
  override name = 'PasswordChecksBusy';
  readonly retryAfterSeconds = 5;
}

const lanes = Object.fromEntries(
  Object.keys(LANE_SIZES).map((lane) => [lane, { running: 0, waiting: [] as (() => void)[] }]),
) as Record<HashLane, { running: number; waiting: (() => void)[] }>;

async function limited<T>(lane: HashLane, work: () => Promise<T>): Promise<T> {
  const queue = lanes[lane];
  const size = LANE_SIZES[lane];
  if (queue.running >= size.running) {
    if (queue.waiting.length >= size.waiting)
      throw new PasswordChecksBusy('too many password checks waiting');
    await new Promise<void>((resolve) => queue.waiting.push(resolve));
  }
  queue.running++;
  try {
    return await work();
  } finally {
    queue.running--;
    queue.waiting.shift()?.();
  }
}

function derive(
  password: string,
  salt: Buffer,
  logN: number,
  r: number,
  p: number,
  lane: HashLane = 'open',
): Promise<Buffer> {
  return limited(
    lane,
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
 * `lane` is `known` only for a browser known to the user whose hash this is (above).
 */
export async function verifyPassword(
  password: string,
  stored: string | null,
  lane: HashLane = 'open',
): Promise<boolean> {
  const [scheme, logN, r, p, salt, expected] = (stored ?? UNUSABLE).split('$');
  if (scheme !== 'scrypt' || !logN || !r || !p || !salt || !expected) return false;
  const key = await derive(
    password,
    Buffer.from(salt, 'base64url'),
    Number(logN),
    Number(r),
    Number(p),
    lane,
  );
  const want = Buffer.from(expected, 'base64url');
  return stored !== null && key.length === want.length && timingSafeEqual(key, want);
}
