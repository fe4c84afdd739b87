import { randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import type { Knex } from 'knex';
import type { HolderType } from '../../banks/connector.js';
import type { ConsentClient, ConsentClients } from '../../banks/consent/client.js';
import {
  ACCOUNT_ACTIONS,
  validUntil,
  type AccountAction,
  type AuthorizationDetail,
} from '../../banks/consent/authorization-details.js';
import { bankWordsOfError, describeBankWords } from '../../banks/consent/bank-answers.js';
import type { HolderIds } from '../../banks/consent/profile.js';
import { profileOf } from '../../banks/consent/profiles/index.js';
import { jarmState, outlivesAccessToken } from '../../banks/consent/profiles/trip.js';
import { tokenBinding } from '../../banks/consent/token-binding.js';
import { findRegistration, type ConsentClientRow } from '../../banks/consent/registrations.js';
import {
  connectionMethod,
  consentProfileOf,
  findInstitution,
  offers,
  type Institution,
  type Product,
} from '../../banks/institutions.js';
import type { Database } from '../../db/database.js';
import { ApiError, errors } from '../../errors/api-error.js';
import {
  consentSubjectOf,
  createConsentLink,
  findGrantRow,
  isSameSubject,
  renewConsentLink,
} from '../../links/consent/grants.js';
import { findLink, type LinkRow } from '../../links/store.js';
import { activeSyncJobOf } from '../../jobs/jobs.js';
import { isUniqueViolation } from '../../db/errors.js';
import { firstIntentOfLink } from '../../refresh/store.js';
import { sameDigest, sha256Hex } from '../../secrets/secret-box.js';
import { consentScreen, type ConsentScreen } from './consent-screen.js';
import { refuse } from '../problems.js';
import type { HolderData } from '../../open-finance/consent-wording.js';
import {
  claimAttempt,
  findSession,
  followNewLink,
  followReconnectedLink,
  giveBackAttempt,
  leaveForBank,
  MAX_ATTEMPTS,
  noteProblem,
  sessionActor,
  type SessionRow,
  type WidgetContext,
} from '../sessions.js';
import { refuseOverConnectionLimit, widgetAuditDetails, widgetTokenOf } from '../widget-tokens.js';
import type { NewGrant } from '../../links/consent/grants.js';
import {
  type ConsentRequestRow,
  claimConsentRequest,
  findConsentRequestByState,
  insertConsentRequest,
  openVerifier,
  settleConsentRequest,
} from './consent-requests.js';
import { queueRefusedGrant } from '../../links/consent/revocations.js';
import type { Logger } from '../../logging/logger.js';
import type { Clock } from '../../clock/clock.js';
import type { RateLimiter } from '../../ratelimit/limiter.js';
import { BudgetGate, withBankCalls } from '../../banks/budget/bank-calls.js';
import { limitsOf } from '../../banks/budget/budget.js';
import { BudgetWait } from '../../banks/budget/permits.js';
import type { BankKey } from '../../banks/budget/store.js';
import { budgetRefusal, takeStart } from './consent-starts.js';
import { isAbandoned, releaseTripConsents } from './abandoned-trips.js';

/*
 * The end user's path to a consent bank (docs/open-finance.md, "What the end user sees"): the widget shows
 * what will be shared (consent-screen.ts), `startConsent` pushes the authorization request (PAR, PKCE, RAR)
 * over mTLS and hands the widget the bank's page; the bank sends the browser back to the callback, where
 * `completeConsent` checks state and issuer, exchanges the code over mTLS and records the link with its
 * grant and first sync: from there the widget goes on exactly as for a credential link (progress, success,
 * exchange token, `link.created` at the exchange). Every way the callback can fail ends with a problem
 * code the widget words, and nothing recorded but the trip's outcome.
 */

/** The consent the widget asks for: a year, within the draft's 36 months (the bank may grant less). */
export const CONSENT_MONTHS = 12;
/** How long a trip to the bank may take before its callback is refused as late. */
export const CONSENT_WAIT_MS = 10 * 60_000;
/** The consent version recorded on a link made through a bank's page (`widget-1` is the password form's). */
export const CONSENT_VERSION = 'widget-consent-1';

/** What each product reads: every product needs the accounts and their movements; `movements` the cards too. */
export function consentActions(product: Product): AccountAction[] {
  return product === 'movements'
    ? [...ACCOUNT_ACTIONS]
    : ACCOUNT_ACTIONS.filter((action) => action !== 'ReadCreditCards');
}

/** `now` plus whole calendar months (the 31st of a shorter month falls to its last day). */
export function addMonths(now: number, months: number): number {
  const date = new Date(now);
  const day = date.getUTCDate();
  date.setUTCDate(1);
  date.setUTCMonth(date.getUTCMonth() + months);
  const last = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 0)).getUTCDate();
  date.setUTCDate(Math.min(day, last));
  return date.getTime();
}

/** The `authorization_details` pushed for a product: one `Accounts` entry, valid CONSENT_MONTHS. */
export function consentDetails(product: Product, now: number): AuthorizationDetail[] {
  return [
    {
      type: 'Accounts',
      actions: consentActions(product),
      validTo: new Date(addMonths(now, CONSENT_MONTHS)).toISOString(),
    },
  ];
}

/** The consent screen of a bank for a product, as the widget shows it and as the link records its hash. */
export function consentScreenFor(
  product: Product,
  bankName: string,
  context: Pick<WidgetContext, 'config' | 'now'> & {
    locale: SessionRow['locale'];
    zone: string;
    /** What the trip asks for to name the holder (`CountryProfile.holderData`), listed first. */
    holder: HolderData | null;
  },
): ConsentScreen {
  return consentScreen(consentDetails(product, context.now), context.locale, {
    app: context.config.widget.name,
    bank: bankName,
    now: context.now,
    zone: context.zone,
    holder: context.holder,
  });
}

export interface ConsentFlowContext extends WidgetContext {
  db: Database;
  consentClients: ConsentClients;
  /** Where the bank's own words of a refusal go (status, OAuth error and description; never a secret). */
  logger: Logger;
  /** The bank's budget counts by it (banks/budget/), and the starts' buckets (consent-starts.ts). */
  clock: Clock;
  rateLimiter: RateLimiter;
}

/** A person waits at a start: a permit not had within 2 s (a second window and a margin) refuses it. */
const START_PERMIT_WAIT_MS = 2_000;
/**
 * At the callback the person has consented and the code lives about a minute (RFC 6749 §4.1.2 recommends at
 * most 10): the exchange may wait up to 10 s for a permit rather than lose the consent; a longer pause fails it.
 */
const CALLBACK_PERMIT_WAIT_MS = 10_000;

/**
 * The gate every bank call of a widget start or callback goes through: the bank's budget, on demand, in the
 * share of the organisation whose widget it is.
 */
function widgetGate(context: ConsentFlowContext, bank: BankKey, orgId: string, waitMs: number): BudgetGate {
  return BudgetGate.of(
    { db: context.db, clock: context.clock, config: context.config },
    bank,
    orgId,
    'on_demand',
    waitMs,
  );
}

export interface ConsentStartInput {
  bank_id?: string;
  holder_type?: HolderType;
  /** The consenting person's CPF, at a Brazilian bank (`fapi1-br`); a business holder's CNPJ beside it. */
  cpf?: string;
  cnpj?: string;
}

export interface ConsentStart {
  authorization_url: string;
  expires_at: string;
}

/** The redirect URI the registration was made with: the bank accepts no other. */
function registeredRedirectUri(row: ConsentClientRow): string {
  const registration = JSON.parse(row.registration) as { redirect_uris?: unknown };
  const [first] = Array.isArray(registration.redirect_uris) ? registration.redirect_uris : [];
  if (typeof first !== 'string') throw errors.internal('The bank registration has no redirect URI.');
  return first;
}

/** The consent bank a start may use: the token's, else the one chosen, reachable by consent in this mode. */
async function consentBankOf(
  db: Knex,
  session: SessionRow,
  input: ConsentStartInput,
  product: Product,
  preset: string | null,
  institutions?: readonly Institution[],
): Promise<{
  bankId: string;
  bankName: string;
  holderType: HolderType;
  registration: ConsentClientRow;
  holder: HolderIds;
  months: number;
  /** The bank's country: its time zone words the consent's dates. */
  zone: string;
  /** What the consent asks for to name the holder, as the screen lists it. */
  holderData: HolderData | null;
}> {
  const bankId = preset ?? input.bank_id;
  if (bankId === undefined) throw errors.missingParameter('bank_id', 'Choose a bank.');
  if (preset && input.bank_id !== undefined && input.bank_id !== preset)
    throw errors.invalidParameter('bank_id', `This widget connects ${preset} only.`);
  const institution = findInstitution(bankId, institutions);
  if (!institution) throw errors.invalidParameter('bank_id', `Unknown bank ${bankId}.`);
  const registration = await findRegistration(db, bankId, session.mode);
  if (connectionMethod(institution, session.mode, registration !== undefined) !== 'consent')
    throw errors.badRequest(
      'credentials_required',
      `${institution.name} connects with the end user's bank login, not by consent: send the credentials form.`,
    );
  if (!registration) throw refuse('institution_unavailable', 409, { bankName: institution.name });
  const profile = consentProfileOf(institution);
  const country = profileOf(profile.security);
  const holderType = input.holder_type ?? 'individual';
  if (!offers(institution, product, holderType))
    throw errors.invalidParameter(
      'holder_type',
      `${institution.name} does not offer ${product} to ${holderType} holders.`,
    );
  return {
    bankId,
    bankName: institution.name,
    holderType,
    registration,
    holder: country.holderIds(input, holderType, institution.name),
    zone: country.zone,
    holderData: country.holderData(holderType),
    // A year, or less where the bank's rules allow less.
    months: Math.min(CONSENT_MONTHS, profile.maxDurationMonths),
  };
}

/** The bank's own words of a failed call, for the log (never a token: bank-answers.ts masks them). */
function bankSaid(error: unknown): string {
  return error instanceof Error && error.name === 'BrasilConsentError'
    ? error.message
    : describeBankWords(bankWordsOfError(error));
}

/**
 * Why a grant the bank gave is not one to link, or null: its access token is not bound to the appliance's
 * certificate (FAPI's sender constraint, RFC 8705), which a leaked token would not need; or it would stop
 * working when its access token expires (no refresh token, and the token ends before the consent).
 */
async function unusableGrant(
  bank: ConsentClient,
  tokens: client.TokenEndpointResponse,
  details: AuthorizationDetail[],
  now: number,
): Promise<string | null> {
  if ((await tokenBinding(bank, tokens.access_token).catch(() => 'unknown' as const)) === 'unbound')
    return "the access token is not bound to the appliance's certificate (RFC 8705)";
  if (!outlivesAccessToken(tokens, validUntil(details), now))
    return 'the bank issued no refresh token, and the access token ends before the consent';
  return null;
}

/** The budget's refusal, thrown by the gate directly or wrapped by openid-client as a failed fetch's cause. */
function budgetWaitIn(error: unknown): BudgetWait | null {
  for (let at = error, depth = 0; at instanceof Error && depth < 4; at = at.cause, depth++)
    if (at instanceof BudgetWait) return at;
  return null;
}

/** Open failures of openid-client as the widget words them: the bank said no, or did not answer. */
function bankProblem(error: unknown): 'bank_unavailable' | 'consent_invalid' | 'consent_denied' {
  // Brazil's refusals come inside the signed JARM answer: openid-client reads them once it has checked it.
  if (error instanceof client.AuthorizationResponseError && error.error === 'access_denied')
    return 'consent_denied';
  if (
    error instanceof client.ResponseBodyError ||
    error instanceof client.AuthorizationResponseError ||
    (error instanceof Error && /^OAUTH_/.test(String((error as { code?: unknown }).code)))
  )
    return 'consent_invalid';
  return 'bank_unavailable';
}

/**
 * The consent link a reconnect renews: the session's, still the organisation's, holding a grant, with no sync
 * under way (its sync would read the grant being replaced; the renewal's own first sync follows it).
 * Checked before the person goes to the bank and again when they come back.
 */
async function renewableLink(db: Knex, session: SessionRow): Promise<LinkRow> {
  const found = session.link_id === null ? undefined : await findLink(db, session.link_id);
  const link = found?.org_id === session.org_id && found.mode === session.mode ? found : undefined;
  if (!link) throw refuse('link_missing', 404);
  if (!(await findGrantRow(db, link.id)))
    throw errors.badRequest(
      'credentials_required',
      `Link ${link.id} connects with the end user's bank login: send the credentials form.`,
    );
  if (await activeSyncJobOf(db, link.id)) throw refuse('refresh_in_progress', 409);
  return link;
}

/**
 * "Continue to the bank": pushes the authorization request and records the trip. The attempt is counted
 * like a credentials submission (MAX_ATTEMPTS per widget); the PAR is made before anything is written, so
 * a bank that does not answer leaves the session as it was.
 */
/**
 * The cookie that ties a consent trip to the browser that started it (issue 44, item 5). The hosted flow's
 * callback hands the widget session, under a fresh secret, to the page it answers: without this anyone who
 * loaded a leaked, unused callback URL first (a proxy log, a shared screen, a referrer) took the session
 * over. `HttpOnly` (no script reads it), `Secure` where the appliance's origin is https, `SameSite=Lax` so
 * the bank's top-level redirect back carries it (RFC 6265bis §5.4.7: Lax cookies go with top-level GET
 * navigations from another site; Strict ones do not), and scoped to the callback's path.
 */
export function tripCookie(
  value: string,
  options: { callbackPath: string; secure: boolean; maxAgeMs: number },
): string {
  const maxAge = Math.max(0, Math.floor(options.maxAgeMs / 1000));
  return `${TRIP_COOKIE}=${value}; Path=${options.callbackPath}; Max-Age=${maxAge}; HttpOnly;${options.secure ? ' Secure;' : ''} SameSite=Lax`;
}

export const TRIP_COOKIE = 'svc_consent_trip';
/** A trip cookie as we make them (`newTripSecret`): 32 base64url characters. */
const TRIP_SECRET = /^[A-Za-z0-9_-]{32}$/;

/** A new trip cookie value; only its SHA-256 is kept, on the trip's row. */
export function newTripSecret(): string {
  return randomBytes(24).toString('base64url');
}

/** Whether the callback came from the browser the trip started in (a hosted trip of an older build passes). */
function sameBrowser(request: Pick<ConsentRequestRow, 'browser_hash'>, cookie: string | undefined): boolean {
  if (request.browser_hash === null) return true;
  return (
    cookie !== undefined && TRIP_SECRET.test(cookie) && sameDigest(sha256Hex(cookie), request.browser_hash)
  );
}

export async function startConsent(
  session: SessionRow,
  input: ConsentStartInput,
  context: ConsentFlowContext,
  /** The trip cookie's value for this browser (`newTripSecret`), set by the caller with the answer. */
  tripSecret: string,
): Promise<ConsentStart> {
  const { db, now } = context;
  if (session.finished_at !== null) throw refuse('session_expired', 409);
  if (session.kind === 'mfa')
    throw errors.badRequest('wrong_step', 'This widget was opened to enter a verification code.');
  const renewing = session.kind === 'reconnect' ? await renewableLink(db.reader, session) : null;
  if (session.refresh_intent_id !== null)
    throw errors.conflict(
      'connection_in_progress',
      'A connection is already being made in this window; wait for its result.',
    );
  if (session.attempts >= MAX_ATTEMPTS) throw refuse('too_many_attempts', 429);
  const token = await widgetTokenOf(db.reader, session);
  const product: Product = token.product ?? 'movements';
  const { bankId, bankName, holderType, registration, holder, months, zone, holderData } =
    await consentBankOf(
      db.reader,
      session,
      renewing ? { ...input, holder_type: input.holder_type ?? renewing.holder_type } : input,
      product,
      renewing?.bank_id ?? token.institution_id,
      context.policy.institutions,
    );
  if (renewing && holderType !== renewing.holder_type)
    throw errors.invalidParameter('holder_type', `This link is of a ${renewing.holder_type} holder.`);
  if (!renewing) await refuseOverConnectionLimit(db.reader, session, token);
  // A renewal's holder is checked at the callback, on the ID token's `sub`, not here on the typed CPF: `sub`
  // is the bank's opaque id of the person (OpenID Connect Core §2), not their CPF, so the two never match at
  // a real bank; and an answer here would tell a caller holding only a publishable key and a link id whether
  // a CPF is the holder's without the bank ever being asked.

  // The session's, the key's, the organisation's and the bank's bounds on starts (consent-starts.ts), before
  // the session's attempt is taken: a start refused for them costs the person no attempt.
  const bounds = {
    rateLimiter: context.rateLimiter,
    sessionId: session.id,
    issuedBy: token.issued_by,
    orgId: session.org_id,
    mode: session.mode,
    bankId,
    bankName,
    limits: limitsOf(context.config.banks.budget, context.config.banks.budgets, bankId),
    perSession: context.config.widget.consentStartsPerSession,
    perKey: context.config.widget.consentStartsPerKey,
    perOrganisation: context.config.widget.consentStarts,
    bankShare: context.config.banks.budget.consentStartShare,
    locale: session.locale,
    now,
  };
  await takeStart(bounds);

  // The attempt is taken before the bank is called, not after: each start costs the bank a PAR (and at a
  // Brazilian bank a consent it keeps for an hour), so starts sent at once must not reach it beyond the
  // session's attempts (they all passed the check above). A start the bank fails gives it back below.
  await db.transaction((trx) => claimAttempt(trx, session, now));

  let url: URL;
  let details: AuthorizationDetail[];
  const state = randomBytes(24).toString('base64url');
  const verifier = client.randomPKCECodeVerifier();
  const gate = widgetGate(context, { bankId, mode: session.mode }, session.org_id, START_PERMIT_WAIT_MS);
  try {
    // The first permit is had before anything is sent: a paused bank or a spent minute sends it nothing.
    await gate.prepay();
    ({ url, details } = await withBankCalls(gate, async () => {
      const bank = await context.consentClients.forRegistration(registration);
      return bank.profile.start(bank, {
        actions: consentActions(product),
        validTo: addMonths(now, months),
        state,
        verifier,
        redirectUri: registeredRedirectUri(registration),
        locale: session.locale,
        holder,
        holderData,
      });
    }));
  } catch (error) {
    await giveBackAttempt(db.knex, session.id).catch(() => undefined);
    if (error instanceof ApiError) throw error;
    const wait = budgetWaitIn(error);
    if (wait) throw budgetRefusal(wait, { ...bounds, now: context.clock.now() });
    context.logger.warn(
      { bank: bankId, step: 'start', said: bankSaid(error) },
      'the bank refused the consent start',
    );
    throw new ApiError(
      502,
      'api_error',
      bankProblem(error),
      `${bankName} did not accept the authorization request; try again in a moment.`,
    );
  }
  const screen = consentScreenFor(product, bankName, {
    ...context,
    locale: session.locale,
    zone,
    holder: holderData,
  });
  const expiresAt = now + CONSENT_WAIT_MS;
  await db.transaction(async (trx) => {
    if (!(await leaveForBank(trx, session.id, bankId, now))) throw refuse('session_expired', 409);
    const { superseded } = await insertConsentRequest(
      trx,
      context.secrets,
      {
        sessionId: session.id,
        orgId: session.org_id,
        mode: session.mode,
        bankId,
        holderType,
        consentClientId: registration.id,
        state,
        verifier,
        details,
        consentTextHash: sha256Hex(JSON.stringify(screen)),
        expiresAt,
        browserHash: sha256Hex(tripSecret),
      },
      now,
    );
    // A trip this start replaced left its consent at the bank (Brazil): revoked, not left to expire there.
    await releaseTripConsents(trx, superseded, {
      secrets: context.secrets,
      actor: sessionActor(session),
      now,
    });
  });
  return { authorization_url: url.href, expires_at: new Date(expiresAt).toISOString() };
}

/** The query of the bank's callback, as received (each member a single string, or absent). */
export interface CallbackQuery {
  state?: string;
  code?: string;
  iss?: string;
  error?: string;
  /** A JARM answer (`response_mode=jwt`): the signed JWT carrying code, state and iss. */
  response?: string;
  /** A `code id_token` answer's ID token (form-posted), the detached signature of FAPI 1.0 Advanced §5.2.2.1. */
  id_token?: string;
}

/** What the callback's request carried besides its query: the trip cookie, when the browser sent one. */
export interface CallbackBrowser {
  tripCookie?: string;
}

export type ConsentOutcome =
  | { ok: true; session: SessionRow; linkId: string }
  | {
      ok: false;
      problem:
        | 'consent_unknown'
        | 'consent_used'
        | 'consent_expired'
        | 'consent_denied'
        | 'consent_invalid'
        | 'bank_unavailable'
        | 'bank_busy'
        | 'session_expired'
        | 'connection_limit_reached'
        | 'connection_in_progress'
        | 'holder_mismatch'
        | 'link_missing'
        | 'refresh_in_progress'
        | 'consent_other_browser';
      /** The widget session the trip belonged to; null when the callback names none, or a used one. */
      session: SessionRow | null;
    };

/** The query string a callback may carry: short, printable (a state is 32 base64url characters). */
const CALLBACK_VALUE = /^[\x21-\x7e]{1,2048}$/;

/**
 * The bank's callback. The trip is claimed first, in its own statement, so a replayed or racing callback
 * with the same state finds it used before any code is exchanged; a bank that would exchange a code twice
 * (a fault the simulated bank can show) is never asked to.
 */
export async function completeConsent(
  query: CallbackQuery,
  context: ConsentFlowContext,
  browser: CallbackBrowser = {},
): Promise<ConsentOutcome> {
  const { db, now } = context;
  if (query.response !== undefined && !CALLBACK_VALUE.test(query.response))
    return { ok: false, problem: 'consent_unknown', session: null };
  if (query.id_token !== undefined && !CALLBACK_VALUE.test(query.id_token))
    return { ok: false, problem: 'consent_unknown', session: null };
  // A JARM answer carries its state inside: read to find the trip, verified with the rest at the exchange.
  const state = query.state ?? jarmState(query.response);
  if (!state || !CALLBACK_VALUE.test(state)) return { ok: false, problem: 'consent_unknown', session: null };
  const request = await findConsentRequestByState(db.knex, state);
  if (!request) return { ok: false, problem: 'consent_unknown', session: null };
  const session = await findSession(db.knex, request.session_id);
  // A hosted trip completes only in its own browser, checked before the trip is claimed: a stranger's load of
  // a leaked URL neither takes the session nor spends the trip, and the person's own return still completes.
  // A popup's callback hands no session over (its page closes; the widget that opened it polls), so it is not
  // held to the cookie: a popup opened from a third-party iframe may not get first-party cookies at all.
  if (session && session.opener_origin === '' && !sameBrowser(request, browser.tripCookie))
    return { ok: false, problem: 'consent_other_browser', session: null };
  // A trip the scheduler ended (abandoned-trips.ts) came back too late: said as the late trip it is.
  if (!(await claimConsentRequest(db.knex, request.id, now)))
    return { ok: false, problem: isAbandoned(request) ? 'consent_expired' : 'consent_used', session: null };
  /**
   * Ends the trip with a problem. The consent it left at the bank (a Brazilian trip's) is revoked in the same
   * transaction, unless the bank ended it (the person refused: `consent_denied`) or it became a grant already
   * queued for revocation (`revokeRefused`, below): a late or failed return leaves nothing authorised there.
   */
  const fail = async (
    problem: Exclude<ConsentOutcome, { ok: true }>['problem'],
    consentSettled = problem === 'consent_denied',
  ) => {
    await db.transaction(async (trx) => {
      await settleConsentRequest(trx, request.id, problem);
      if (!consentSettled)
        await releaseTripConsents(trx, [request], {
          secrets: context.secrets,
          actor: sessionActor({ id: request.session_id }),
          now,
        });
      if (session && problem !== 'session_expired') await noteProblem(trx, session.id, problem, now);
    });
    return { ok: false as const, problem, session: session ?? null };
  };
  if (!session || session.finished_at !== null || session.expires_at <= now) return fail('session_expired');
  if (request.expires_at <= now) return fail('consent_expired');
  if (query.error !== undefined)
    return fail(query.error === 'access_denied' ? 'consent_denied' : 'consent_invalid');
  if (query.response === undefined && (!query.code || !CALLBACK_VALUE.test(query.code)))
    return fail('consent_invalid');

  const registration = await findRegistration(db.knex, request.bank_id, request.mode);
  // Re-registered since the trip started: the code was issued to a client the appliance no longer is.
  if (!registration || registration.id !== request.consent_client_id) return fail('consent_invalid');
  let consentClient: ConsentClient;
  let tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers;
  // The exchange, Brazil's consent read and the token's introspection each take the bank's permit.
  const gate = widgetGate(
    context,
    { bankId: request.bank_id, mode: request.mode },
    request.org_id,
    CALLBACK_PERMIT_WAIT_MS,
  );
  try {
    consentClient = await withBankCalls(gate, () => context.consentClients.forRegistration(registration));
    const callback = new URL(registeredRedirectUri(registration));
    const fields = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== undefined) fields.set(name, value);
    // openid-client reads a hybrid (`code id_token`) answer from the fragment, where the flow puts it by default.
    if (consentClient.responseShape === 'hybrid') callback.hash = fields.toString();
    else callback.search = fields.toString();
    tokens = await withBankCalls(gate, () =>
      client.authorizationCodeGrant(consentClient.configuration, callback, {
        pkceCodeVerifier: openVerifier(request, context.secrets),
        expectedState: state,
        ...consentClient.profile.exchangeChecks(state),
      }),
    );
  } catch (error) {
    if (budgetWaitIn(error)) return fail('bank_busy');
    context.logger.warn(
      { bank: request.bank_id, step: 'callback', said: bankSaid(error) },
      'the bank refused the code exchange',
    );
    return fail(bankProblem(error));
  }
  const requested = JSON.parse(request.authorization_details) as AuthorizationDetail[];
  let answer: Awaited<ReturnType<ConsentClient['profile']['granted']>>;
  try {
    answer = await withBankCalls(gate, () => consentClient.profile.granted(consentClient, tokens, requested));
  } catch (error) {
    if (budgetWaitIn(error)) return fail('bank_busy');
    throw error;
  }
  // A grant the appliance will not keep is revoked through the retried outbox, never dropped.
  const revokeRefused = (grantId: string) =>
    db.transaction((trx) =>
      queueRefusedGrant(
        trx,
        {
          ownerId: session.kind === 'reconnect' && session.link_id ? session.link_id : request.id,
          orgId: request.org_id,
          mode: request.mode,
          bankId: request.bank_id,
          clientId: registration.client_id,
        },
        grantId,
        context.secrets,
        sessionActor(session),
        now,
      ),
    );
  const refusal = !answer.ok
    ? answer.reason
    : await withBankCalls(gate, () => unusableGrant(consentClient, tokens, answer.details, now));
  if (!answer.ok || refusal !== null) {
    context.logger.warn(
      { bank: request.bank_id, step: 'callback', reason: refusal },
      'a consent the bank granted is refused and revoked',
    );
    if (answer.grantId !== null) await revokeRefused(answer.grantId);
    return fail('consent_invalid', answer.grantId !== null);
  }
  const { grantId, details: granted, subject } = answer;
  // The holder's name the exchange gave (Chile's ID token), for a holder whose consent asked for it.
  const asked = consentClient.profile.holderData(request.holder_type) !== null;
  const holder = asked && answer.holderName !== undefined ? { holder: { name: answer.holderName } } : {};
  // What the bank granted, as the link keeps it: a new link's grant, or a renewed link's new one.
  const grant = {
    ...holder,
    consentClientId: registration.id,
    clientId: registration.client_id,
    grantId,
    authorizationDetails: granted,
    expiresAt: validUntil(granted),
    accessToken: tokens.access_token,
    accessTokenExpiresAt: tokens.expires_in === undefined ? null : now + tokens.expires_in * 1000,
    refreshToken: tokens.refresh_token ?? null,
  };
  try {
    const linkId = await db.transaction(async (trx) => {
      const current = await findSession(trx, session.id);
      if (!current || current.finished_at !== null) throw refuse('session_expired', 409);
      if (current.refresh_intent_id !== null)
        throw errors.conflict('connection_in_progress', 'This window is already connecting.');
      if (current.kind === 'reconnect') return renew(trx, current, request, { subject, grant, context });
      const token = await widgetTokenOf(trx, current);
      await refuseOverConnectionLimit(trx, current, token, { lock: true });
      const link = await createConsentLink(
        trx,
        { orgId: request.org_id, mode: request.mode, actor: sessionActor(current) },
        {
          bank_id: request.bank_id,
          holder_type: request.holder_type,
          external_user_id: token.external_user_id ?? undefined,
          consent_version: CONSENT_VERSION,
          consent_text_hash: request.consent_text_hash,
          subject,
        },
        grant,
        context.policy,
        now,
        { announce: false, interactive: true, via: 'widget', auditDetails: widgetAuditDetails(token) },
      );
      const intent = await firstIntentOfLink(trx, link.id);
      await followNewLink(
        trx,
        session.id,
        { bankId: request.bank_id, linkId: link.id, intentId: intent.id },
        now,
      );
      await settleConsentRequest(trx, request.id, 'linked', link.id);
      return link.id;
    });
    return { ok: true, session, linkId };
  } catch (error) {
    // The bank granted a consent this widget cannot use: it is revoked rather than left to expire there.
    await revokeRefused(grantId);
    if (error instanceof ApiError && isOutcomeProblem(error.code)) return fail(error.code, true);
    // Anything else still settles the trip, so the widget does not read "connecting" until it times out.
    await fail('bank_unavailable', true).catch(() => undefined);
    throw error;
  }
}

/**
 * A reconnect's way back from the bank: the link's consent renewed in place (renewConsentLink), provided the
 * person who consented is the link's holder. Another person's consent is refused with `holder_mismatch`, as
 * a credential reconnect refuses another RUT, and the caller revokes it at the bank; the link is untouched.
 */
async function renew(
  trx: Knex,
  session: SessionRow,
  request: ConsentRequestRow,
  input: { subject: string; grant: NewGrant; context: ConsentFlowContext },
): Promise<string> {
  const { now, secrets } = input.context;
  const link = await renewableLink(trx, session);
  if (link.bank_id !== request.bank_id) throw refuse('link_missing', 404);
  const holder = consentSubjectOf(link, secrets);
  if (holder !== null && !isSameSubject(holder, input.subject)) throw refuse('holder_mismatch', 409);
  let intentId: string;
  try {
    ({ intentId } = await renewConsentLink(
      trx,
      link,
      {
        consent_version: CONSENT_VERSION,
        consent_text_hash: request.consent_text_hash,
        subject: input.subject,
      },
      input.grant,
      secrets,
      {
        actor: sessionActor(session),
        details: widgetAuditDetails(await widgetTokenOf(trx, session)),
      },
      now,
    ));
  } catch (error) {
    // A sync queued between the check above and here (the partial unique index on jobs refuses a second).
    if (isUniqueViolation(error)) throw refuse('refresh_in_progress', 409);
    throw error;
  }
  const previousExpiredAt = link.status === 'expired' ? link.expired_at : null;
  await followReconnectedLink(trx, session.id, { intentId, previousExpiredAt }, now);
  await settleConsentRequest(trx, request.id, 'renewed', link.id);
  return link.id;
}

type OutcomeProblem =
  | 'session_expired'
  | 'connection_limit_reached'
  | 'connection_in_progress'
  | 'holder_mismatch'
  | 'link_missing'
  | 'refresh_in_progress';
const OUTCOME_PROBLEMS: ReadonlySet<string> = new Set<OutcomeProblem>([
  'session_expired',
  'connection_limit_reached',
  'connection_in_progress',
  'holder_mismatch',
  'link_missing',
  'refresh_in_progress',
]);
function isOutcomeProblem(code: string): code is OutcomeProblem {
  return OUTCOME_PROBLEMS.has(code);
}
