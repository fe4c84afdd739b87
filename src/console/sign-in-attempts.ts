import { createHmac } from 'node:crypto';
import type { Knex } from 'knex';
import type { Database } from '../db/database.js';

/*
 * How the console slows down password and code guessing (docs/security.md, "Console sign-in"):
 *
 * - Every attempt is counted in the database before its password hash runs, in the statement that checks
 *   the budget, so a burst sent at one moment counts in full on every API node (an attempt that reads a
 *   count before a 0.3 s hash and writes "old + 1" after it let a burst of 30 through as one).
 * - Attempts are counted in one of two lanes. A browser that has signed in as the user before
 *   (known-device.ts) spends its own budget and nothing else: not the email's, not the address's, which
 *   strangers can spend (21 failures from one address, or from the one proxy every browser comes through,
 *   closed the console to everyone for 15 minutes: issue 44). Any other attempt is counted per email as
 *   typed (whether or not a user has it, so the answers do not tell which emails exist) and per client
 *   address (net/client-address.ts). A stranger who spends an email's or an address's budget slows down
 *   strangers; the owner's own browsers still sign in. Nothing locks.
 * - A budget holds for a fixed window from the first attempt; over it, 429 until the window ends.
 * - A sign-in that succeeds is settled: the email's and the browser's counts start again, and the
 *   attempt is taken back from the address (a shared address is not slowed down by people who sign in).
 *
 * Counts are kept under a keyed digest (the master key's), never the email or the address as typed.
 */

/** The master key's derived key for the digests of what is counted. */
export const ATTEMPTS_KEY_LABEL = 'svc console sign-in attempts v1';
export const ATTEMPT_WINDOW_MS = 15 * 60_000;
/** Attempts per window: an email from browsers it never signed in on, an address, one known browser. */
export const ATTEMPT_BUDGETS = { email: 10, address: 20, device: 10 } as const;
/**
 * Password hashes running at once for one email (or, from known browsers, one user) in this process: a
 * burst queues no 128 MiB hashes, and one user's browsers hold at most two places of the known lane.
 */
export const HASHES_PER_EMAIL = 2;

export type AttemptKind = keyof typeof ATTEMPT_BUDGETS;

export interface AttemptSubject {
  kind: AttemptKind;
  /** What is counted: an email, an address or a known browser's id. */
  value: string;
}

export type Reservation =
  { ok: true; subjects: string[]; release: () => void } | { ok: false; retryAfterMs: number };

interface AttemptRow {
  subject: string;
  window_started_at: number | string;
  attempts: number;
}

const TABLE = 'console_sign_in_attempts';

/** The stored key of a subject: its kind and an HMAC of its value under `key`. */
export function subjectKey(key: Buffer, subject: AttemptSubject): string {
  const value = subject.kind === 'email' ? subject.value.trim().toLowerCase() : subject.value;
  return `${subject.kind}:${createHmac('sha256', key).update(value).digest('base64url').slice(0, 32)}`;
}

/** The attempts counted for a subject in its current window (0 when none): for tests and support. */
export async function attemptsOf(
  db: Knex,
  key: Buffer,
  subject: AttemptSubject,
  now: number,
): Promise<number> {
  const row: AttemptRow | undefined = await db(TABLE)
    .where({ subject: subjectKey(key, subject) })
    .first();
  return row && Number(row.window_started_at) > now - ATTEMPT_WINDOW_MS ? row.attempts : 0;
}

/** This process's password hashes in flight per email (or per user, from their known browsers). */
const hashesInFlight = new Map<string, number>();

/**
 * Counts one attempt for every subject, then answers whether all of them are within their budgets. The
 * attempt counts whatever the answer: a refused attempt is still an attempt. An allowed one holds a place
 * among the hashes in flight of `hashesOf` (the email as typed, or the user from a known browser) until
 * `release`.
 */
export async function reserveAttempt(
  db: Database,
  key: Buffer,
  subjects: AttemptSubject[],
  now: number,
  hashesOf: { email: string } | { userId: string },
): Promise<Reservation> {
  const keyed = subjects
    .map((subject) => ({ kind: subject.kind, key: subjectKey(key, subject) }))
    // One order for every attempt, so that two transactions never wait on each other's rows.
    .sort((a, b) => a.key.localeCompare(b.key));
  const windowStart = now - ATTEMPT_WINDOW_MS;
  const rows = await db.transaction(async (trx) => {
    for (const { key: subject } of keyed) await countAttempt(trx, subject, now, windowStart);
    return trx<AttemptRow>(TABLE).whereIn(
      'subject',
      keyed.map((k) => k.key),
    );
  });
  if (++sinceSweep >= SWEEP_EVERY) {
    sinceSweep = 0;
    await pruneSignInAttempts(db.knex, now);
  }
  let retryAfterMs = 0;
  for (const { kind, key: subject } of keyed) {
    const row = rows.find((r) => r.subject === subject);
    if (row && row.attempts > ATTEMPT_BUDGETS[kind])
      retryAfterMs = Math.max(retryAfterMs, Number(row.window_started_at) + ATTEMPT_WINDOW_MS - now);
  }
  if (retryAfterMs > 0) return { ok: false, retryAfterMs };
  // Tagged, so that no email typed can name a user's own places.
  const hashing =
    'userId' in hashesOf
      ? `user:${hashesOf.userId}`
      : subjectKey(key, { kind: 'email', value: hashesOf.email });
  const running = hashesInFlight.get(hashing) ?? 0;
  if (running >= HASHES_PER_EMAIL) return { ok: false, retryAfterMs: 1000 };
  hashesInFlight.set(hashing, running + 1);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    const left = (hashesInFlight.get(hashing) ?? 1) - 1;
    if (left > 0) hashesInFlight.set(hashing, left);
    else hashesInFlight.delete(hashing);
  };
  return { ok: true, subjects: keyed.map((k) => k.key), release };
}

/** A new window, or one more attempt in the current one: one statement, the same on both engines. */
async function countAttempt(trx: Knex, subject: string, now: number, windowStart: number): Promise<void> {
  const expired = `${TABLE}.window_started_at <= ?`;
  await trx(TABLE)
    .insert({ subject, window_started_at: now, attempts: 1 })
    .onConflict('subject')
    .merge({
      attempts: trx.raw(`CASE WHEN ${expired} THEN 1 ELSE ${TABLE}.attempts + 1 END`, [windowStart]),
      window_started_at: trx.raw(`CASE WHEN ${expired} THEN ? ELSE ${TABLE}.window_started_at END`, [
        windowStart,
        now,
      ]),
    });
}

/**
 * A sign-in (or a password check) succeeded: the email's and the browser's counts start again, and the
 * address gets its attempt back.
 */
export async function settleSuccess(db: Database, subjects: string[]): Promise<void> {
  await db.transaction(async (trx) => {
    const fresh = subjects.filter((s) => !s.startsWith('address:'));
    if (fresh.length > 0) await trx(TABLE).whereIn('subject', fresh).delete();
    const addresses = subjects.filter((s) => s.startsWith('address:'));
    if (addresses.length > 0)
      await trx(TABLE)
        .whereIn('subject', addresses)
        .where('attempts', '>', 0)
        .update({ attempts: trx.raw('attempts - 1') });
  });
}

/** Reservations between two sweeps of ended windows: the table holds about one window's subjects. */
const SWEEP_EVERY = 50;
let sinceSweep = 0;

/** Forgets windows that have ended, at most `limit` rows at a time. */
export async function pruneSignInAttempts(db: Knex, now: number, limit = 500): Promise<number> {
  const ended = db(TABLE)
    .select('subject')
    .where('window_started_at', '<=', now - ATTEMPT_WINDOW_MS)
    .limit(limit);
  return db(TABLE).whereIn('subject', ended).delete();
}
