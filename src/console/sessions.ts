import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { SESSION_MAX_AGE_MS } from './session-token.js';

/*
 * The console's sessions on the server: a session token (session-token.ts) names a row here and holds only
 * while the row is there, so signing out ends the session on every API node at once, and a copied cookie
 * stops working with it. A reset, a disable or a change of the second factor ends every session of the
 * user (the rows go, and the user's session epoch moves on). A row ends at its absolute lifetime, 12 hours
 * after signing in, which no renewal passes.
 */

export interface ConsoleSessionRow {
  id: string;
  user_id: string;
  signed_in_at: number;
  expires_at: number;
}

const TABLE = 'console_sessions';

/** A new session for a user who signed in at `signedInAt` (a change of credentials keeps the first one). */
export async function openSession(
  trx: Knex,
  userId: string,
  signedInAt: number,
  now: number,
): Promise<string> {
  const id = randomBytes(18).toString('base64url');
  // Ended sessions go when their user opens a new one, and every sign-in sweeps a few others': the table
  // holds about the sessions of the last 12 hours.
  await trx(TABLE).where({ user_id: userId }).where('expires_at', '<=', now).delete();
  await trx(TABLE)
    .whereIn('id', trx(TABLE).select('id').where('expires_at', '<=', now).limit(100))
    .delete();
  await trx(TABLE).insert({
    id,
    user_id: userId,
    signed_in_at: signedInAt,
    expires_at: signedInAt + SESSION_MAX_AGE_MS,
  });
  return id;
}

/** Whether the session is still open at `now`. */
export async function sessionIsOpen(db: Knex, id: string, userId: string, now: number): Promise<boolean> {
  const row = await db(TABLE).where({ id, user_id: userId }).where('expires_at', '>', now).first('id');
  return row !== undefined;
}

/** Signing out: this session ends. */
export async function endSession(trx: Knex, id: string): Promise<void> {
  await trx(TABLE).where({ id }).delete();
}

/** Every session of the user ends (a reset, a disable, a change of the second factor). */
export async function endSessionsOf(trx: Knex, userId: string): Promise<void> {
  await trx(TABLE).where({ user_id: userId }).delete();
}
