import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { isUniqueViolation } from '../db/errors.js';
import { ApiError, errors } from '../errors/api-error.js';
import { transition, type Transitions } from '../errors/illegal-transition.js';
import { INTENT_TOKEN, WIDGET_TOKEN } from '../auth/tokens.js';
import { randomBase62 } from '../keys/key-format.js';
import { sha256Hex, type SecretBox } from '../secrets/secret-box.js';
import type { LinkPolicy } from '../links/links.js';
import { findLink } from '../links/store.js';
import { findIntentByMfaToken, waitingForMfaIds } from '../refresh/store.js';
import { isConsentLink, reconnectable, type WidgetTokenRow } from './widget-tokens.js';
import type { Locale } from '../html/locale.js';
import { refuse } from './problems.js';

/*
 * A widget session's life, in one place, and the only code that writes `widget_sessions`
 * (scripts/check-table-owners.js). A token opens it (`openSession`); the page then holds it by its secret.
 * It is `open` while the person chooses a bank, types a password or is at a consent bank's page; it follows
 * a link's first sync (`connecting`) once a connect made the link or a reconnect renewed it; a failed sync
 * opens it again for another try, unless the failure ends the window; it ends `finished` once, when the
 * person closes it after success. The credential flow (flows.ts) and the consent flow (consent/) say what
 * happened through the functions below; each writes on the condition of the row, so a stale read cannot
 * link a session twice or finish it twice. A session also ends, without a write, when `expires_at` passes.
 */

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

/** What every step of a session works with: the credential flow's (flows.ts) and the consent flow's. */
export interface WidgetContext {
  config: Readonly<Config>;
  secrets: SecretBox;
  policy: LinkPolicy;
  now: number;
}

/**
 * Where a session stands, read from its row (it has no status column): `finished` once `finished_at` is set;
 * `connecting` while it follows a refresh intent (a connect's or reconnect's first sync, or the refresh an
 * MFA session was opened for); `open` otherwise.
 */
export type SessionState = 'open' | 'connecting' | 'finished';

export type SessionChange = 'follow_link' | 'fail' | 'fail_for_good' | 'finish';

export const SESSION_TRANSITIONS = {
  /** A connect made its link, or a reconnect gave the link new credentials or a new consent: its first sync runs. */
  follow_link: { from: ['open'], to: 'connecting' },
  /** That sync failed, and the person may try again (another password, another trip to the bank). */
  fail: { from: ['connecting'], to: 'open' },
  /** That sync failed for good: the MFA tries are spent or the wait for a code ran out (SESSION_ENDING, flows.ts). */
  fail_for_good: { from: ['connecting'], to: 'finished' },
  /** The person closed the widget after success: the exchange token is issued, once. */
  finish: { from: ['connecting'], to: 'finished' },
} as const satisfies Transitions<SessionState, SessionChange>;

const MACHINE = 'widget session';

/** A row's state. Pure. */
export function sessionState(row: Pick<SessionRow, 'finished_at' | 'refresh_intent_id'>): SessionState {
  if (row.finished_at !== null) return 'finished';
  return row.refresh_intent_id === null ? 'open' : 'connecting';
}

/** The rows in one of `states`: the table's `from`, as the condition of a statement. */
function inStates(query: Knex.QueryBuilder, states: readonly SessionState[]): Knex.QueryBuilder {
  return query.where((any) => {
    for (const state of states)
      any.orWhere((one) => {
        if (state === 'finished') one.whereNotNull('finished_at');
        else if (state === 'open') one.whereNull('finished_at').whereNull('refresh_intent_id');
        else one.whereNull('finished_at').whereNotNull('refresh_intent_id');
      });
  });
}

/**
 * Writes `changes` if the session is in a state `change` may start from (and meets `also`); true when it
 * did. A session in another state is left as it is: the caller decides whether that is a lost race (false)
 * or a bug (`orThrow`: IllegalTransitionError, naming the session, its state and the change).
 */
async function move(
  trx: Knex,
  id: string,
  change: SessionChange,
  changes: Partial<SessionRow>,
  options: { also?: Partial<SessionRow>; orThrow?: boolean } = {},
): Promise<boolean> {
  const query = trx('widget_sessions').where({ id, ...options.also });
  const moved = await inStates(query, SESSION_TRANSITIONS[change].from).update(changes);
  if (moved > 0) return true;
  if (options.orThrow) {
    const row = await findSession(trx, id);
    if (row) transition(MACHINE, SESSION_TRANSITIONS, sessionState(row), change, id);
  }
  return false;
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
 * so two opens racing each other give one session and one "already used" page. A connect or reconnect
 * session starts `open`; an MFA one `connecting`, as it follows the refresh that waits for the code.
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

export async function findSession(db: Knex, id: string): Promise<SessionRow | undefined> {
  return db<SessionRow>('widget_sessions').where({ id }).first();
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

/** Credential attempts one widget session accepts, so an open widget is not a password-guessing oracle. */
export const MAX_ATTEMPTS = 5;

/**
 * Takes one attempt on the session row itself, in the transaction that uses it. The session the request
 * authenticated with was read before this transaction: twenty submissions sent at once all saw it idle,
 * created twenty links and counted one attempt. The conditional update makes a second submission wait for
 * the first (a row lock on Postgres; SQLite serialises writers) and then find the session taken or its
 * attempts spent. A submission refused later in the transaction rolls the claim back with it. The state
 * does not change: the session stays `open`.
 */
export async function claimAttempt(trx: Knex, session: SessionRow, now: number): Promise<void> {
  const claimed = await inStates(trx('widget_sessions').where({ id: session.id }), ['open'])
    .where('attempts', '<', MAX_ATTEMPTS)
    .update({ attempts: trx.raw('attempts + 1'), updated_at: now });
  if (claimed === 1) return;
  const current = await findSession(trx, session.id);
  if (!current || current.finished_at !== null) throw refuse('session_expired', 409);
  if (current.attempts >= MAX_ATTEMPTS) throw refuse('too_many_attempts', 429);
  throw errors.conflict(
    'connection_in_progress',
    'A connection is already being made in this window; wait for its result.',
  );
}

/** A consent start the bank did not take: its attempt is given back (best effort, outside any transaction). */
export async function giveBackAttempt(db: Knex, sessionId: string): Promise<void> {
  await db('widget_sessions')
    .where({ id: sessionId })
    .update({ attempts: db.raw('attempts - 1') });
}

/**
 * A trip to a consent bank's page is recorded: the session names the bank and forgets the last problem.
 * False when the session has finished (or is gone) meanwhile; the state does not change.
 */
export async function leaveForBank(
  trx: Knex,
  sessionId: string,
  bankId: string,
  now: number,
): Promise<boolean> {
  const left = await trx('widget_sessions')
    .where({ id: sessionId })
    .whereNull('finished_at')
    .update({ bank_id: bankId, last_error_code: null, updated_at: now });
  return left === 1;
}

/**
 * Why the last try failed, for the page to word (a callback that came back without a consent, a reconnect
 * by another holder), on a session still `open`; one that has moved on keeps what it has.
 */
export async function noteProblem(trx: Knex, sessionId: string, code: string, now: number): Promise<void> {
  await inStates(trx('widget_sessions').where({ id: sessionId }), ['open']).update({
    last_error_code: code,
    updated_at: now,
  });
}

/** The session follows a link's first sync: the last problem is forgotten. */
async function followLink(trx: Knex, sessionId: string, columns: Partial<SessionRow>, now: number) {
  const changes = { ...columns, last_error_code: null, updated_at: now };
  await move(trx, sessionId, 'follow_link', changes, { orThrow: true });
}

/** A connect made its link (with a password or a consent): the session follows the link's first sync. */
export async function followNewLink(
  trx: Knex,
  sessionId: string,
  link: { bankId: string; linkId: string; intentId: string },
  now: number,
): Promise<void> {
  const columns = { bank_id: link.bankId, link_id: link.linkId, refresh_intent_id: link.intentId };
  await followLink(trx, sessionId, columns, now);
}

/**
 * A reconnect gave its link new credentials or a new consent: the session follows the sync that tries them.
 * `previousExpiredAt` is when the link had expired (null: it was active, a consent renewed early), so a
 * failure can put it back as it was.
 */
export async function followReconnectedLink(
  trx: Knex,
  sessionId: string,
  reconnect: { intentId: string; previousExpiredAt: number | null },
  now: number,
): Promise<void> {
  const columns = { refresh_intent_id: reconnect.intentId, previous_expired_at: reconnect.previousExpiredAt };
  await followLink(trx, sessionId, columns, now);
}

/**
 * The sync the session follows failed with `code`. Only the first caller that sees it settles it (true): the
 * session forgets the intent, keeps the code for the page, and a connect's session its unannounced link;
 * `forGood` ends the session too. False when another poll settled it first.
 */
export async function failConnection(
  trx: Knex,
  session: Pick<SessionRow, 'id' | 'kind'>,
  failure: { intentId: string; code: string; forGood: boolean },
  now: number,
): Promise<boolean> {
  return move(
    trx,
    session.id,
    failure.forGood ? 'fail_for_good' : 'fail',
    {
      refresh_intent_id: null,
      last_error_code: failure.code,
      ...(session.kind === 'connect' ? { link_id: null } : {}),
      ...(failure.forGood ? { finished_at: now } : {}),
      updated_at: now,
    },
    { also: { refresh_intent_id: failure.intentId } },
  );
}

/** The person closed the widget after success: false when it had already finished (a second close). */
export async function closeSession(trx: Knex, sessionId: string, now: number): Promise<boolean> {
  return move(trx, sessionId, 'finish', { finished_at: now, updated_at: now });
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

/** A widget session as the audit log names who acted through it (issue 44, item 9). */
export function sessionActor(session: Pick<SessionRow, 'id'>): string {
  return `widget_session:${session.id}`;
}
