import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { recordAudit } from '../audit/audit-log.js';
import { toIso } from '../clock/clock.js';
import { endSessionsOf, sessionIsOpen } from './sessions.js';
import type { Database } from '../db/database.js';
import { fetchPage, type PageWindow } from '../db/paging.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import { sha256Hex } from '../secrets/secret-box.js';
import { hashPassword, passwordProblem, verifyPassword, type HashLane } from './passwords.js';

/*
 * Console users and what happens to them: invited and reset from the CLI (the appliance sends no mail, so
 * the CLI prints the link), a password set through that link, signing in (its guessing budgets are in
 * sign-in-attempts.ts), and disabling. Every change is written to the audit log with who made it.
 */

export type ConsoleRole = 'operator' | 'admin' | 'support';
export const CONSOLE_ROLES: readonly ConsoleRole[] = ['operator', 'admin', 'support'];
export type ConsoleUserStatus = 'invited' | 'active' | 'disabled';

export interface ConsoleUserRow {
  id: string;
  email: string;
  role: ConsoleRole;
  /** Null: every organisation (an operator, or support for all). */
  org_id: string | null;
  status: ConsoleUserStatus;
  password_hash: string | null;
  totp_secret_sealed: string | null;
  /** The TOTP step of the last code accepted from this user (totp.ts): no code is accepted twice. */
  totp_last_step: number | null;
  session_epoch: number;
  failed_logins: number;
  locked_until: number | null;
  last_login_at: number | null;
  locale: string | null;
  created_at: number;
  updated_at: number;
}

/** A user as the CLI and the console show one: never the hash or the sealed secret. */
export function presentConsoleUser(row: ConsoleUserRow) {
  return {
    object: 'console_user' as const,
    id: row.id,
    email: row.email,
    role: row.role,
    org_id: row.org_id,
    status: row.status,
    totp: row.totp_secret_sealed !== null,
    last_login_at: toIso(row.last_login_at),
    created_at: toIso(row.created_at)!,
  };
}

/** An invitation is good for a week; a reset link for an hour (it replaces a forgotten password). */
export const INVITATION_TTL_MS = 7 * 86_400_000;
export const RESET_TTL_MS = 3_600_000;

const EMAIL = /^[^\s@<>"']{1,64}@[^\s@<>"']{1,189}\.[^\s@<>"']{2,}$/;

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** Whether an address is one an invitation accepts (at most 254 characters, the column's width). */
export function isConsoleEmail(email: string): boolean {
  const normal = normaliseEmail(email);
  return normal.length <= 254 && EMAIL.test(normal);
}

type TokenPurpose = 'invite' | 'reset';

async function issueToken(trx: Knex, userId: string, purpose: TokenPurpose, now: number): Promise<string> {
  // An unused link of the same purpose is replaced: only the newest one the CLI printed works.
  await trx('console_tokens').where({ user_id: userId, purpose }).whereNull('used_at').delete();
  const token = `cut_${randomBytes(24).toString('base64url')}`;
  await trx('console_tokens').insert({
    id: newId('cut'),
    user_id: userId,
    purpose,
    token_hash: sha256Hex(token),
    expires_at: now + (purpose === 'invite' ? INVITATION_TTL_MS : RESET_TTL_MS),
    used_at: null,
    created_at: now,
  });
  return token;
}

export interface NewConsoleUser {
  email: string;
  role: ConsoleRole;
  orgId: string | null;
  actor: string;
  now: number;
}

/** Creates an invited user and the invitation's token (to be shown once, in a link). */
export async function inviteConsoleUser(
  trx: Knex,
  input: NewConsoleUser,
): Promise<{ user: ConsoleUserRow; token: string }> {
  const email = normaliseEmail(input.email);
  if (!EMAIL.test(email)) throw errors.invalidParameter('email', `Not an email address: ${input.email}.`);
  if (!CONSOLE_ROLES.includes(input.role))
    throw errors.invalidParameter('role', `A console role is one of ${CONSOLE_ROLES.join(', ')}.`);
  if (input.role === 'operator' && input.orgId !== null)
    throw errors.invalidParameter('org', 'An operator sees every organisation; give no organisation.');
  if (input.role === 'admin' && input.orgId === null)
    throw errors.missingParameter('org', 'An organisation admin needs the organisation (--org).');
  if (input.orgId !== null && !(await trx('organisations').where({ id: input.orgId }).first('id')))
    throw errors.notFound(`No organisation ${input.orgId}.`, 'org');
  if (await trx('console_users').where({ email }).first('id'))
    throw errors.conflict('console_user_exists', `A console user with the email ${email} exists.`);
  const user: ConsoleUserRow = {
    id: newId('cu'),
    email,
    role: input.role,
    org_id: input.orgId,
    status: 'invited',
    password_hash: null,
    totp_secret_sealed: null,
    totp_last_step: null,
    session_epoch: 0,
    failed_logins: 0,
    locked_until: null,
    last_login_at: null,
    locale: null,
    created_at: input.now,
    updated_at: input.now,
  };
  await trx('console_users').insert(user);
  const token = await issueToken(trx, user.id, 'invite', input.now);
  await recordAudit(
    trx,
    {
      orgId: user.org_id,
      actor: input.actor,
      action: 'console_user.invited',
      targetType: 'console_user',
      targetId: user.id,
      details: { email, role: user.role },
    },
    input.now,
  );
  return { user, token };
}

export async function findConsoleUser(db: Knex, idOrEmail: string): Promise<ConsoleUserRow> {
  const row: ConsoleUserRow | undefined = await db('console_users')
    .where('id', idOrEmail)
    .orWhere('email', normaliseEmail(idOrEmail))
    .first();
  if (!row) throw errors.notFound(`No console user ${idOrEmail}.`, 'id');
  return row;
}

export async function listConsoleUsers(db: Knex, filter: { orgId?: string } = {}): Promise<ConsoleUserRow[]> {
  const query = db<ConsoleUserRow>('console_users').orderBy([{ column: 'created_at' }, { column: 'id' }]);
  if (filter.orgId) query.where('org_id', filter.orgId);
  return query;
}

/**
 * One page of console users, oldest first, with their organisation's name (the console's Users page).
 * People, not rows by the million: the table is small, and a page reads 30 of it.
 */
export async function pageConsoleUsers(
  db: Knex,
  window: PageWindow,
): Promise<{ rows: (ConsoleUserRow & { org_name: string | null })[]; total: number }> {
  return fetchPage<ConsoleUserRow & { org_name: string | null }>(
    () => db('console_users'),
    [
      ['created_at', 'asc'],
      ['id', 'asc'],
    ],
    window.offset,
    window.limit,
  ).then(async (page) => {
    // The names of the page's organisations, by primary key: at most 30 reads' worth.
    const ids = [...new Set(page.rows.map((row) => row.org_id).filter((id): id is string => id !== null))];
    const names = new Map<string, string>(
      ids.length === 0
        ? []
        : (await db('organisations').whereIn('id', ids).select('id', 'name')).map(
            (org: { id: string; name: string }) => [org.id, org.name],
          ),
    );
    return {
      rows: page.rows.map((row) => ({
        ...row,
        org_name: row.org_id ? (names.get(row.org_id) ?? null) : null,
      })),
      total: page.total,
    };
  });
}

/** Disables a user: every session of theirs ends at once, and they cannot sign in. */
export async function disableConsoleUser(
  trx: Knex,
  idOrEmail: string,
  actor: string,
  now: number,
): Promise<ConsoleUserRow> {
  const user = await findConsoleUser(trx, idOrEmail);
  await trx('console_users')
    .where({ id: user.id })
    .update({ status: 'disabled', session_epoch: user.session_epoch + 1, updated_at: now });
  await endSessionsOf(trx, user.id);
  await trx('console_tokens').where({ user_id: user.id }).whereNull('used_at').delete();
  await recordAudit(
    trx,
    {
      orgId: user.org_id,
      actor,
      action: 'console_user.disabled',
      targetType: 'console_user',
      targetId: user.id,
    },
    now,
  );
  return { ...user, status: 'disabled', session_epoch: user.session_epoch + 1 };
}

/**
 * A password reset: a link to set a new password (an invited user gets a new invitation instead). Ends the
 * user's sessions; `removeTotp` also removes a second factor the user lost.
 */
export async function resetConsoleUser(
  trx: Knex,
  idOrEmail: string,
  options: { actor: string; now: number; removeTotp: boolean },
): Promise<{ user: ConsoleUserRow; token: string; purpose: TokenPurpose }> {
  const user = await findConsoleUser(trx, idOrEmail);
  if (user.status === 'disabled')
    throw errors.conflict('console_user_disabled', `${user.email} is disabled; it cannot be reset.`);
  const changes = {
    session_epoch: user.session_epoch + 1,
    updated_at: options.now,
    ...(options.removeTotp ? { totp_secret_sealed: null, totp_last_step: null } : {}),
  };
  await trx('console_users').where({ id: user.id }).update(changes);
  await endSessionsOf(trx, user.id);
  const purpose: TokenPurpose = user.status === 'invited' ? 'invite' : 'reset';
  const token = await issueToken(trx, user.id, purpose, options.now);
  await recordAudit(
    trx,
    {
      orgId: user.org_id,
      actor: options.actor,
      action: 'console_user.reset',
      targetType: 'console_user',
      targetId: user.id,
      details: { remove_totp: options.removeTotp },
    },
    options.now,
  );
  return { user: { ...user, ...changes }, token, purpose };
}

/** The user an unused, unexpired invitation or reset link belongs to, or null. */
export async function userOfToken(
  db: Knex,
  token: string,
  now: number,
): Promise<{ user: ConsoleUserRow; purpose: TokenPurpose; tokenId: string } | null> {
  if (typeof token !== 'string' || token.length > 100) return null;
  const row: {
    id: string;
    user_id: string;
    purpose: TokenPurpose;
    expires_at: number;
    used_at: number | null;
  } = await db('console_tokens')
    .where({ token_hash: sha256Hex(token) })
    .first();
  if (!row || row.used_at !== null || Number(row.expires_at) <= now) return null;
  const user: ConsoleUserRow | undefined = await db('console_users').where({ id: row.user_id }).first();
  if (!user || user.status === 'disabled') return null;
  return { user, purpose: row.purpose, tokenId: row.id };
}

/**
 * Sets the password through an invitation or reset link, which is then spent. The user is active from
 * here, and any session signed before it has ended.
 */
export async function setPasswordWithToken(
  trx: Knex,
  token: string,
  password: string,
  now: number,
): Promise<ConsoleUserRow> {
  const found = await userOfToken(trx, token, now);
  if (!found) throw errors.notFound('This link is not valid any more: ask for a new one.', 'token');
  const problem = passwordProblem(password);
  if (problem) throw errors.invalidParameter('password', problem);
  const passwordHash = await hashPassword(password);
  const spent = await trx('console_tokens')
    .where({ id: found.tokenId })
    .whereNull('used_at')
    .update({ used_at: now });
  if (spent === 0) throw errors.notFound('This link is not valid any more: ask for a new one.', 'token');
  const changes = {
    password_hash: passwordHash,
    status: 'active' as const,
    session_epoch: found.user.session_epoch + 1,
    // The link signs them in (the console's accept page): the users list shows it as their last sign-in.
    last_login_at: now,
    updated_at: now,
  };
  await trx('console_users').where({ id: found.user.id }).update(changes);
  await endSessionsOf(trx, found.user.id);
  await auditOwnAction(
    trx,
    found.user,
    found.purpose === 'invite' ? 'console_user.invitation_accepted' : 'console_user.password_reset',
    now,
  );
  return { ...found.user, ...changes };
}

export type SignInResult =
  { ok: true; user: ConsoleUserRow } | { ok: false; reason: 'wrong' | 'second_factor' };

/**
 * What a second factor's check answers: the TOTP step the code was accepted for (to be recorded so that it
 * is not accepted again), false for a wrong or spent code, 'missing' when none was given.
 */
export type FactorCheck = number | false | 'missing';

/** A user's second factor as a check needs it: the sealed secret (bound to the user's id) and last step. */
export interface SecondFactor {
  userId: string;
  sealed: string;
  lastStep: number | null;
}

/** A bigint column: a string from PostgreSQL, a number from SQLite. */
const asStep = (value: unknown): number | null =>
  value === null || value === undefined ? null : Number(value);

const factorOf = (user: ConsoleUserRow, sealed: string): SecondFactor => ({
  userId: user.id,
  sealed,
  lastStep: asStep(user.totp_last_step),
});

/** The user an email names, whatever their status; the sign-in check takes the same time without one. */
export async function userOfEmail(db: Knex, email: string): Promise<ConsoleUserRow | undefined> {
  return db('console_users')
    .where({ email: normaliseEmail(email) })
    .first();
}

/**
 * Checks a password, and the second factor through `checkTotp` for a user who has one (given the sealed
 * secret and the last step accepted). An unknown email or a disabled user costs the same hash and answers
 * as a wrong password does. How often anyone may try is sign-in-attempts.ts's business, counted before this
 * runs. A wrong password or code of a user is audited.
 */
export async function signIn(
  db: Database,
  input: {
    user: ConsoleUserRow | undefined;
    password: string;
    /** The password hash's queue (passwords.ts): `known` only from a browser known to `user`. */
    lane: HashLane;
    /** The client's address (net/client-address.ts), for the audit row. */
    address: string;
    checkTotp: (factor: SecondFactor) => FactorCheck;
    now: number;
  },
): Promise<SignInResult> {
  const { user } = input;
  const passwordOk = await verifyPassword(
    input.password,
    user?.status === 'active' ? user.password_hash : null,
    input.lane,
  );
  if (!user) return { ok: false, reason: 'wrong' };
  // false: a failure; null: no second factor to check; a step: the code was right for it.
  const factor: FactorCheck | null = !passwordOk
    ? false
    : user.totp_secret_sealed !== null
      ? input.checkTotp(factorOf(user, user.totp_secret_sealed))
      : null;
  if (factor === 'missing') return { ok: false, reason: 'second_factor' };
  if (factor !== false) {
    const signedIn = await db.transaction(async (trx) => {
      // The step is claimed in the same statement that checks it is newer than the last one, so two
      // sign-ins racing with one code cannot both win.
      const claimed = await spendStep(trx, user.id, factor).update({
        last_login_at: input.now,
        ...(factor === null ? {} : { totp_last_step: factor }),
      });
      if (claimed === 0) return false;
      await auditOwnAction(trx, user, 'console.signed_in', input.now, signInDetails(input));
      return true;
    });
    if (signedIn) return { ok: true, user };
  }
  await db.transaction((trx) => recordFailure(trx, user, input.now, signInDetails(input)));
  return { ok: false, reason: 'wrong' };
}

/** What a sign-in's audit row says of where it came from: the client's address, and a known browser. */
const signInDetails = (input: { address: string; lane: HashLane }) => ({
  address: input.address,
  known_browser: input.lane === 'known',
});

/** An update of the user that applies only while `step` (when there is one) is later than their last. */
function spendStep(trx: Knex, userId: string, step: number | null) {
  const query = trx('console_users').where({ id: userId });
  if (step !== null) query.where((q) => q.whereNull('totp_last_step').orWhere('totp_last_step', '<', step));
  return query;
}

/** A wrong password or code of a known user, in the audit log (never what was typed). */
function recordFailure(
  trx: Knex,
  user: ConsoleUserRow,
  now: number,
  details?: Record<string, unknown>,
): Promise<void> {
  return recordAudit(
    trx,
    {
      orgId: user.org_id,
      actor: 'console:anonymous',
      action: 'console.sign_in_failed',
      targetType: 'console_user',
      targetId: user.id,
      details,
    },
    now,
  );
}

/**
 * Turns the second factor on for a signed-in user whose app has just shown the code of step `step` for the
 * secret sealed in `sealed`. Every other session of theirs ends (the session epoch moves on): they were
 * opened without the factor. Answers the user as it now is, for a new session cookie.
 */
export async function enableTotp(
  trx: Knex,
  input: { userId: string; sealed: string; step: number; now: number },
): Promise<ConsoleUserRow> {
  const user = await findConsoleUser(trx, input.userId);
  if (user.totp_secret_sealed !== null)
    throw errors.conflict('console_totp_on', 'The second factor is already on.');
  const changes = {
    totp_secret_sealed: input.sealed,
    totp_last_step: input.step,
    session_epoch: user.session_epoch + 1,
    updated_at: input.now,
  };
  // Only while it is still off: of two confirmations racing, one turns it on and the other is told so.
  const turnedOn = await trx('console_users')
    .where({ id: user.id })
    .whereNull('totp_secret_sealed')
    .update(changes);
  if (turnedOn === 0) throw errors.conflict('console_totp_on', 'The second factor is already on.');
  await endSessionsOf(trx, user.id);
  await auditOwnAction(trx, user, 'console.totp_enabled', input.now);
  return { ...user, ...changes };
}

/**
 * Turns the second factor off, for a signed-in user who gives their password and a current code again (a
 * session left open on a shared machine must not be enough). The caller counts the attempt as a sign-in
 * attempt (sign-in-attempts.ts), so the form is no way around the sign-in's budget. Every other session
 * ends. Answers the user as it now is, or null for a wrong password or code.
 */
export async function disableTotp(
  db: Database,
  input: {
    userId: string;
    password: string;
    /** The password hash's queue (passwords.ts). */
    lane: HashLane;
    checkTotp: (factor: SecondFactor) => FactorCheck;
    now: number;
  },
): Promise<ConsoleUserRow | null> {
  const user = await findConsoleUser(db.knex, input.userId);
  if (user.totp_secret_sealed === null)
    throw errors.conflict('console_totp_off', 'The second factor is already off.');
  const passwordOk = await verifyPassword(input.password, user.password_hash, input.lane);
  const factor = passwordOk ? input.checkTotp(factorOf(user, user.totp_secret_sealed)) : false;
  if (typeof factor === 'number') {
    const changes = {
      totp_secret_sealed: null,
      totp_last_step: null,
      session_epoch: user.session_epoch + 1,
      updated_at: input.now,
    };
    const done = await db.transaction(async (trx) => {
      if ((await spendStep(trx, user.id, factor).update(changes)) === 0) return false;
      await endSessionsOf(trx, user.id);
      await auditOwnAction(trx, user, 'console.totp_disabled', input.now);
      return true;
    });
    if (done) return { ...user, ...changes };
  }
  await db.transaction((trx) => recordFailure(trx, user, input.now));
  return null;
}

/**
 * The user a verified session belongs to, while it is still theirs: active, the same session epoch, and the
 * session's row still there (not signed out, not past its lifetime).
 */
export async function userOfSession(
  db: Knex,
  claims: { sub: string; sid: string; epoch: number },
  now: number,
): Promise<ConsoleUserRow | null> {
  const user: ConsoleUserRow | undefined = await db('console_users').where({ id: claims.sub }).first();
  if (!user || user.status !== 'active' || Number(user.session_epoch) !== claims.epoch) return null;
  return (await sessionIsOpen(db, claims.sid, user.id, now)) ? user : null;
}

/** An audit entry for something a console user did to their own account, as that user. */
function auditOwnAction(
  trx: Knex,
  user: Pick<ConsoleUserRow, 'id' | 'org_id'>,
  action: string,
  now: number,
  details?: Record<string, unknown>,
): Promise<void> {
  return recordAudit(
    trx,
    {
      orgId: user.org_id,
      actor: `console:${user.id}`,
      action,
      targetType: 'console_user',
      targetId: user.id,
      details,
    },
    now,
  );
}
