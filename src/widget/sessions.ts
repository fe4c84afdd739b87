import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Database } from '../db/database.js';
import { isUniqueViolation } from '../db/errors.js';
import { ApiError } from '../errors/api-error.js';
import { INTENT_TOKEN, WIDGET_TOKEN } from '../auth/tokens.js';
import { randomBase62 } from '../keys/key-format.js';
import { sha256Hex } from '../secrets/secret-box.js';
import { findLink } from '../links/store.js';
import { findIntentByMfaToken, waitingForMfaIds } from '../refresh/store.js';
import { isConsentLink, reconnectable, type WidgetTokenRow } from './widget-tokens.js';
import type { Locale } from './messages.js';

export type SessionKind = 'connect' | 'reconnect' | 'mfa';

export interface SessionRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  kind: SessionKind;
  session_hash: string;
  token_hash: string;
  widget_token_id: string | null;
  /** The page `postMessage` answers to; '' for the hosted flow (opened as a plain page, see redirect_uri). */
  opener_origin: string;
  /** The language the widget was opened in. */
  locale: Locale;
  bank_id: string | null;
  link_id: string | null;
  refresh_intent_id: string | null;
  attempts: number;
  last_error_code: string | null;
  previous_expired_at: number | null;
  expires_at: number;
  finished_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The header the widget page sends its session in: never a URL, never a cookie (see docs/widget.md). */
export const SESSION_HEADER = 'X-Widget-Session';
const SESSION_SECRET = /^wss_[0-9A-Za-z]{40}$/;

export type OpenFailure =
  | 'token_invalid'
  | 'token_consumed'
  | 'token_expired'
  | 'link_missing'
  | 'link_not_expired'
  | 'opener_missing';

/** Rolls the open back: the token stays unspent (see `openSession`). */
class OpenerMissing extends Error {}

export type OpenResult =
  | { ok: true; session: SessionRow; secret: string; widgetToken: WidgetTokenRow | null }
  | { ok: false; problem: OpenFailure };

/**
 * Opens the widget with a `wt_…` or `ri_…_sec_…` token: consumes the token and starts a session, in one
 * transaction. A widget token is consumed by a conditional UPDATE (`consumed_at IS NULL AND expires_at >
 * now`); both kinds are also held to one session each by the unique index on `widget_sessions.token_hash`,
 * so two opens racing each other give one session and one "already used" page.
 */
export async function openSession(
  db: Database,
  token: string,
  input: {
    /** null: the hosted flow, allowed only for a widget token with a redirect_uri. */
    origin: string | null;
    /** The session's language, from the token's `locale` once it is read. */
    locale: (tokenLocale: Locale | null) => Locale;
    sessionTtlMs: number;
    now: number;
  },
): Promise<OpenResult> {
  const tokenHash = sha256Hex(token);
  const secret = `wss_${randomBase62(40)}`;
  const base = {
    id: `ws_${randomBytes(8).toString('hex')}`,
    session_hash: sha256Hex(secret),
    token_hash: tokenHash,
    opener_origin: input.origin ?? '',
    attempts: 0,
    last_error_code: null,
    previous_expired_at: null,
    expires_at: input.now + input.sessionTtlMs,
    finished_at: null,
    created_at: input.now,
    updated_at: input.now,
  };
  try {
    return await db.transaction(async (trx): Promise<OpenResult> => {
      if (WIDGET_TOKEN.test(token)) {
        const consumed = await trx('widget_tokens')
          .where({ token_hash: tokenHash })
          .whereNull('consumed_at')
          .where('expires_at', '>', input.now)
          .update({ consumed_at: input.now });
        const row: WidgetTokenRow | undefined = await trx('widget_tokens')
          .where({ token_hash: tokenHash })
          .first();
        if (consumed !== 1 || !row) {
          if (!row) return { ok: false, problem: 'token_invalid' };
          return { ok: false, problem: row.consumed_at !== null ? 'token_consumed' : 'token_expired' };
        }
        if (input.origin === null && row.redirect_uri === null) {
          // Nothing could receive the exchange token: the token stays unspent for the app to open properly.
          throw new OpenerMissing();
        }
        let linkId: string | null = null;
        if (row.intent === 'reconnect') {
          const link = row.link_id === null ? undefined : await findLink(trx, row.link_id);
          if (!link) return { ok: false, problem: 'link_missing' };
          if (!reconnectable(link, await isConsentLink(trx, link.id)))
            return { ok: false, problem: 'link_not_expired' };
          linkId = link.id;
        }
        const session: SessionRow = {
          ...base,
          org_id: row.org_id,
          mode: row.mode,
          kind: row.intent,
          locale: input.locale(row.locale),
          widget_token_id: row.id,
          bank_id: row.institution_id,
          link_id: linkId,
          refresh_intent_id: null,
        };
        await trx('widget_sessions').insert(session);
        return { ok: true, session, secret, widgetToken: row };
      }
      if (INTENT_TOKEN.test(token)) {
        if (input.origin === null) throw new OpenerMissing();
        if (await trx('widget_sessions').where({ token_hash: tokenHash }).first('id'))
          return { ok: false, problem: 'token_consumed' };
        const intent = await findIntentByMfaToken(trx, tokenHash);
        if (!intent || intent.status !== 'requires_mfa') return { ok: false, problem: 'token_invalid' };
        if (intent.mfa_expires_at === null || intent.mfa_expires_at <= input.now)
          return { ok: false, problem: 'token_expired' };
        const link = await findLink(trx, intent.link_id);
        if (!link) return { ok: false, problem: 'link_missing' };
        const session: SessionRow = {
          ...base,
          org_id: intent.org_id,
          mode: intent.mode,
          kind: 'mfa',
          locale: input.locale(null),
          widget_token_id: null,
          bank_id: link.bank_id,
          link_id: link.id,
          refresh_intent_id: intent.id,
        };
        await trx('widget_sessions').insert(session);
        return { ok: true, session, secret, widgetToken: null };
      }
      return { ok: false, problem: 'token_invalid' };
    });
  } catch (error) {
    if (error instanceof OpenerMissing) return { ok: false, problem: 'opener_missing' };
    if (isUniqueViolation(error)) return { ok: false, problem: 'token_consumed' };
    throw error;
  }
}

/** How long an ended session is kept, for a support engineer asking what happened to it. */
export const ENDED_SESSIONS_KEPT_MS = 24 * 3_600_000;

/**
 * Removes up to `limit` sessions that ended over ENDED_SESSIONS_KEPT_MS ago and whose token can no longer
 * open the widget, oldest first (retention calls it a batch at a time; it walks the `expires_at` index).
 * A widget token's own row says it was consumed, but an MFA token is refused a second time only because its
 * session exists (see `openSession`): such a session stays while its intent still waits for that code.
 */
export async function pruneEndedSessions(trx: Knex, now: number, limit: number): Promise<number> {
  const ids = trx('widget_sessions')
    .select('id')
    .where('expires_at', '<', now - ENDED_SESSIONS_KEPT_MS)
    .where((sessions) =>
      sessions.whereNull('refresh_intent_id').orWhereNotIn('refresh_intent_id', waitingForMfaIds(trx, now)),
    )
    .orderBy([{ column: 'expires_at' }, { column: 'id' }])
    .limit(limit);
  return trx('widget_sessions').whereIn('id', ids).delete();
}

/**
 * Retention: removes up to `limit` widget tokens that expired before `cutoff`, oldest first. A token a
 * session still points at stays until that session goes (its foreign key would take the session with it).
 * Walks `widget_tokens_expires_at_idx`; the session check reads `widget_sessions_token_idx`.
 */
export async function pruneExpiredWidgetTokens(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const ids = trx('widget_tokens')
    .select('id')
    .where('expires_at', '<', cutoff)
    .whereNotExists(
      trx('widget_sessions')
        .select(trx.raw('1'))
        .whereRaw('widget_sessions.widget_token_id = widget_tokens.id'),
    )
    .orderBy([{ column: 'expires_at' }, { column: 'id' }])
    .limit(limit);
  return trx('widget_tokens').whereIn('id', ids).delete();
}

/**
 * A new secret for a session whose page is gone: the hosted flow's window left for a consent bank's page
 * and comes back at the callback, which is the only holder of the new secret (the old one stops working).
 */
export async function rotateSessionSecret(db: Knex, sessionId: string, now: number): Promise<string> {
  const secret = `wss_${randomBase62(40)}`;
  await db('widget_sessions')
    .where({ id: sessionId })
    .update({ session_hash: sha256Hex(secret), updated_at: now });
  return secret;
}

export function sessionError(message: string): ApiError {
  return new ApiError(401, 'authentication_error', 'widget_session_invalid', message);
}

/** The session named by the `X-Widget-Session` header, if it exists and has not expired. */
export async function authenticateSession(
  db: Knex,
  header: string | undefined,
  now: number,
): Promise<SessionRow> {
  if (!header || !SESSION_SECRET.test(header))
    throw sessionError(`Send the widget session in the ${SESSION_HEADER} header.`);
  const row: SessionRow | undefined = await db('widget_sessions')
    .where({ session_hash: sha256Hex(header) })
    .first();
  if (!row) throw sessionError('This widget session does not exist.');
  if (row.expires_at <= now)
    throw sessionError('This widget session has ended. Go back to the app and open the widget again.');
  return row;
}
