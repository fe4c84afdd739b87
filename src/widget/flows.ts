import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { isUniqueViolation } from '../db/errors.js';
import { sha256Hex } from '../secrets/secret-box.js';
import type { BankCredentials, HolderType } from '../banks/connector.js';
import { findInstitution, offers, type Institution, type Product } from '../banks/institutions.js';
import { enqueueSync } from '../jobs/jobs.js';
import {
  createLink,
  discardUnannouncedLink,
  isSameHolder,
  openCredentials,
  validateLinkInput,
} from '../links/links.js';
import { expireFailedReconnect, reconnectLink } from '../links/link-states.js';
import { findLink, type LinkRow } from '../links/store.js';
import { rutDigestsOf } from '../links/rut-search.js';
import { findIntent, firstIntentOfLink, type IntentRow } from '../refresh/store.js';
import { acceptMfaCode } from '../refresh/refresh.js';
import { issueExchangeToken } from '../exchange/exchange.js';
import { describeProblem, refuse, type Problem } from './problems.js';
import type { Locale } from '../html/locale.js';
import { message } from './messages.js';
import {
  claimAttempt,
  closeSession,
  failConnection,
  followNewLink,
  followReconnectedLink,
  noteProblem,
  sessionActor,
  type SessionRow,
  type WidgetContext,
} from './sessions.js';
import { refuseOverConnectionLimit, widgetAuditDetails, widgetTokenOf } from './widget-tokens.js';
import { openConsentRequest } from './consent/consent-requests.js';

/** The consent the widget shows above its Connect button; its SHA-256 is recorded on the link. */
export const CONSENT_VERSION = 'widget-1';
export function consentText(operatorName: string, locale: Locale): string {
  return message(locale, 'consent', { operator: operatorName });
}

export type WidgetStatus =
  | { state: 'idle' }
  /** The end user is at a consent bank's page (consent/consent-flow.ts); the callback moves the session on. */
  | { state: 'awaiting_bank'; expires_at: string }
  | { state: 'in_progress'; step: 'queued' | 'syncing' | 'verifying' }
  | {
      state: 'requires_mfa';
      expires_at: string | null;
      /** Wrong codes already given in this wait, and how many more the bank's wait accepts. */
      wrong_codes: number;
      attempts_left: number;
    }
  | { state: 'succeeded'; holder_name: string | null; accounts_count: number }
  | { state: 'failed'; error: Problem }
  | { state: 'finished' };

export interface CredentialsInput {
  bank_id?: string;
  holder_type?: HolderType;
  rut: string;
  password: string;
  rut_empresa?: string;
}

/**
 * The credentials the link was made with, or null when they no longer open (`credentials_unreadable`: a
 * master key lost or a row restored wrongly, which only the operator can cause). Reconnecting is then the
 * documented way back (docs/security.md), and there is no holder left to compare with.
 */
function holderOf(link: LinkRow, context: WidgetContext): BankCredentials | null {
  try {
    return openCredentials(link, context.policy.secrets);
  } catch {
    return null;
  }
}

function bankName(bankId: string | null, institutions?: readonly Institution[]): string | undefined {
  return bankId ? findInstitution(bankId, institutions)?.name : undefined;
}

/**
 * The credentials form: a connect creates the link (announced later, at the exchange) with an interactive
 * first sync, so a bank that asks for a code asks this widget; a reconnect seals the new credentials on the
 * expired link and makes it active again with a `full` refresh. Either way the widget then polls the
 * refresh intent through `sessionStatus`.
 */
export async function submitCredentials(
  trx: Knex,
  session: SessionRow,
  input: CredentialsInput,
  context: WidgetContext,
): Promise<void> {
  const { now } = context;
  if (session.finished_at !== null) throw refuse('session_expired', 409);
  if (session.kind === 'mfa')
    throw errors.badRequest('wrong_step', 'This widget was opened to enter a verification code.');
  await claimAttempt(trx, session, now);
  const consent = {
    consent_version: CONSENT_VERSION,
    // The text the person read, in their language: its hash is what the link records.
    consent_text_hash: sha256Hex(consentText(context.config.widget.name, session.locale)),
  };
  const credentials = { rut: input.rut, password: input.password, rut_empresa: input.rut_empresa };

  if (session.kind === 'connect') {
    const token = await widgetTokenOf(trx, session);
    const bankId = token.institution_id ?? input.bank_id;
    if (bankId === undefined) throw errors.missingParameter('bank_id', 'Choose a bank.');
    if (token.institution_id && input.bank_id !== undefined && input.bank_id !== token.institution_id)
      throw errors.invalidParameter('bank_id', `This widget connects ${token.institution_id} only.`);
    const holderType = input.holder_type ?? 'individual';
    const institution = findInstitution(bankId, context.policy.institutions);
    const product: Product = token.product ?? 'movements';
    if (institution && !offers(institution, product, holderType))
      throw errors.invalidParameter(
        'holder_type',
        `${institution.name} does not offer ${product} to ${holderType} holders.`,
      );
    await refuseOverConnectionLimit(trx, session, token, { lock: true });
    const link = await createLink(
      trx,
      { orgId: session.org_id, mode: session.mode, actor: sessionActor(session) },
      {
        bank_id: bankId,
        holder_type: holderType,
        credentials,
        external_user_id: token.external_user_id ?? undefined,
        ...consent,
      },
      context.policy,
      now,
      { announce: false, interactive: true, via: 'widget', auditDetails: widgetAuditDetails(token) },
    );
    const intent = await firstIntentOfLink(trx, link.id);
    await followNewLink(trx, session.id, { bankId, linkId: link.id, intentId: intent.id }, now);
    return;
  }

  // reconnect
  const found = session.link_id === null ? undefined : await findLink(trx, session.link_id);
  const link = found?.org_id === session.org_id && found.mode === session.mode ? found : undefined;
  if (!link) throw refuse('link_missing', 404);
  if (link.status !== 'expired') throw refuse('link_not_expired', 409);
  const sealed = validateLinkInput(
    { bank_id: link.bank_id, holder_type: link.holder_type, credentials, ...consent },
    session.mode,
    context.policy,
  );
  const holder = holderOf(link, context);
  if (holder && !isSameHolder(holder, sealed)) {
    // Refused before the bank is asked, and counted like refused credentials (the claim above commits),
    // so the widget is no oracle for whose RUT a link holds. The link is left exactly as it was.
    await noteProblem(trx, session.id, 'holder_mismatch', now);
    return;
  }
  await reconnectLink(
    trx,
    link.id,
    {
      credentials_encrypted: context.policy.secrets.seal(JSON.stringify(sealed), link.id),
      ...rutDigestsOf(context.policy.secrets, sealed),
      ...consent,
    },
    now,
  );
  let intentId: string;
  try {
    const reconnectOf = session.previous_expired_at ?? link.expired_at;
    intentId = (await enqueueSync(trx, { link, refreshType: 'full', now, interactive: true, reconnectOf }))
      .id;
  } catch (error) {
    if (isUniqueViolation(error))
      throw errors.conflict('refresh_in_progress', `Link ${link.id} is already being refreshed.`);
    throw error;
  }
  await followReconnectedLink(
    trx,
    session.id,
    { intentId, previousExpiredAt: session.previous_expired_at ?? link.expired_at },
    now,
  );
}

/**
 * Where the widget's connection stands, from its refresh intent. A failure is settled here, once: a
 * connect's link is discarded (it was never handed to the customer: no exchange token, no `link.created`),
 * and a reconnect whose credentials were refused puts the link back to `expired`; the session keeps the
 * error so the widget can offer another try.
 */
export async function sessionStatus(
  db: { reader: Knex; transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> },
  session: SessionRow,
  context: Pick<WidgetContext, 'now'> & { mfaAttempts: number },
): Promise<WidgetStatus> {
  const bank = bankName(session.bank_id);
  if (session.finished_at !== null)
    // A session ended by its last MFA try keeps saying why; one ended by success is simply finished.
    return session.last_error_code && session.refresh_intent_id === null
      ? {
          state: 'failed',
          error: describeProblem(session.last_error_code, { bankName: bank }, session.locale),
        }
      : { state: 'finished' };
  if (session.refresh_intent_id === null) {
    const trip = await openConsentRequest(db.reader, session.id, context.now);
    // Back from the bank, the code being exchanged: the connection is under way, as it is once linked.
    if (trip?.completed_at != null) return { state: 'in_progress', step: 'queued' };
    if (trip) return { state: 'awaiting_bank', expires_at: toIso(trip.expires_at)! };
    return session.last_error_code
      ? {
          state: 'failed',
          error: describeProblem(session.last_error_code, { bankName: bank }, session.locale),
        }
      : { state: 'idle' };
  }
  const intent = await findIntent(db.reader, session.refresh_intent_id);
  if (!intent) return { state: 'failed', error: describeProblem('link_missing', {}, session.locale) };
  switch (intent.status) {
    case 'created':
      return { state: 'in_progress', step: 'queued' };
    case 'in_progress':
      return { state: 'in_progress', step: 'syncing' };
    case 'requires_mfa':
      // A code was given: the intent keeps waiting until a worker resumes the login with it.
      if (intent.mfa_code_encrypted !== null) return { state: 'in_progress', step: 'verifying' };
      return {
        state: 'requires_mfa',
        expires_at: toIso(intent.mfa_expires_at),
        wrong_codes: intent.mfa_attempts ?? 0,
        attempts_left: Math.max(0, context.mfaAttempts - (intent.mfa_attempts ?? 0)),
      };
    case 'succeeded': {
      const link = await findLink(db.reader, intent.link_id);
      return {
        state: 'succeeded',
        holder_name: link?.holder_name ?? null,
        accounts_count: link?.accounts_count ?? 0,
      };
    }
    case 'failed':
      break;
  }
  const code = intent.error_code ?? 'bank_unavailable';
  if (session.kind !== 'mfa') await settleFailure(db, session, intent, code, context.now);
  return { state: 'failed', error: describeProblem(code, { bankName: bank }, session.locale) };
}

/** Failures after which the widget only offers Close: the session ends with them. */
const SESSION_ENDING = new Set(['mfa_invalid', 'mfa_expired']);

async function settleFailure(
  db: { transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> },
  session: SessionRow,
  intent: IntentRow,
  code: string,
  now: number,
): Promise<void> {
  await db.transaction(async (trx) => {
    // Only the first poll that sees the failure settles it. The MFA tries spent (or the wait run out) end
    // this window's work, as the page says.
    const failure = { intentId: intent.id, code, forGood: SESSION_ENDING.has(code) };
    if (!(await failConnection(trx, session, failure, now))) return;
    if (session.kind === 'connect') {
      await discardUnannouncedLink(
        trx,
        intent.link_id,
        { orgId: session.org_id, actor: sessionActor(session) },
        now,
      );
      return;
    }
    // A bank that was down says nothing about the new credentials: the link stays active with them and
    // the scheduler retries. Refused credentials (or a failed code) leave the link expired, as it was.
    if (code === 'bank_unavailable' || code === 'timeout') return;
    // A consent renewed early was not expired before: its link stays active and counts the failure, as a
    // scheduled sync would (the sync engine expires it, with its one `link.expired`, when it must).
    if (session.previous_expired_at === null) return;
    await expireFailedReconnect(trx, intent.link_id, session.previous_expired_at, now);
  });
}

/** The MFA step, for a refresh opened with `ri_…_sec_…` or a connect whose bank asked for a code. */
export async function submitMfa(
  trx: Knex,
  session: SessionRow,
  code: string,
  context: WidgetContext,
): Promise<void> {
  if (session.finished_at !== null) throw refuse('session_expired', 409);
  const intent = session.refresh_intent_id ? await findIntent(trx, session.refresh_intent_id) : undefined;
  if (!intent || intent.status !== 'requires_mfa')
    throw errors.conflict('intent_not_waiting_for_mfa', 'Nothing is waiting for a verification code.');
  // An expired wait fails the intent inside acceptMfaCode; the next status poll reports it.
  await acceptMfaCode(trx, intent, code, context.secrets, context.now);
}

export interface FinishResult {
  type: 'success';
  intent: 'connect' | 'reconnect' | 'mfa';
  exchange_token?: string;
  refresh_intent_id?: string;
  /**
   * The hosted flow (a token with a `redirect_uri`, opened as a plain page): where the page sends the person
   * next, carrying the exchange token and the token's `state`.
   */
  redirect_url?: string;
}

/** `redirect_uri` with the widget's answer added to its query (what it had is kept). */
export function redirectUrl(redirectUri: string, params: Record<string, string | null>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== null) url.searchParams.set(name, value);
  return url.href;
}

/**
 * Closing after success: ends the session (once) and, for a connect or reconnect, issues the exchange
 * token the widget posts to its opener.
 */
export async function finishSession(
  trx: Knex,
  session: SessionRow,
  context: WidgetContext,
): Promise<FinishResult> {
  const intent = session.refresh_intent_id ? await findIntent(trx, session.refresh_intent_id) : undefined;
  if (!intent || intent.status !== 'succeeded')
    throw errors.conflict('not_connected', 'The connection has not succeeded; there is nothing to finish.');
  if (!(await closeSession(trx, session.id, context.now)))
    throw errors.conflict('already_finished', 'This widget already finished.');
  if (session.kind === 'mfa') return { type: 'success', intent: 'mfa', refresh_intent_id: intent.id };
  const { token } = await issueExchangeToken(trx, {
    orgId: session.org_id,
    mode: session.mode,
    linkId: intent.link_id,
    widgetTokenId: session.widget_token_id,
    intent: session.kind,
    ttlMs: context.config.widget.exchangeTtlMinutes * 60_000,
    now: context.now,
  });
  const result: FinishResult = { type: 'success', intent: session.kind, exchange_token: token };
  if (session.opener_origin === '') {
    const widgetToken = await widgetTokenOf(trx, session);
    if (widgetToken.redirect_uri)
      result.redirect_url = redirectUrl(widgetToken.redirect_uri, {
        exchange_token: token,
        state: widgetToken.state,
      });
  }
  return result;
}
