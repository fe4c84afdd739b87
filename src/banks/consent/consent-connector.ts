import { randomUUID } from 'node:crypto';
import * as client from 'openid-client';
import {
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type ConnectorErrorOptions,
  type ConsentConnector,
  type DateWindow,
  type GrantCredentials,
  type HolderNameRead,
} from '../connector.js';
import type { HolderData } from '../../open-finance/consent-wording.js';
import type { ConsentCoverage } from './authorization-details.js';
import { coverageOf } from './authorization-details.js';
import { bankWordsOf, bankWordsOfError, describeBankWords, retryAtOf } from './bank-answers.js';
import type { ConsentClient, GrantQuery } from './profile.js';
import type { AnswerChecker, AnswerKind } from './data-schemas.js';
import {
  cardFigures,
  depositBalance,
  mapAll,
  mapCardAccount,
  mapCardTransaction,
  mapDepositAccount,
  mapDepositTransaction,
  cardAccountRef,
  chileanDate,
  depositAccountRef,
  holderNameOf,
  identificationName,
  type ObAccount,
  type ObPersonalIdentification,
  type ObBalances,
  type ObCardAccount,
  type ObCardIdentification,
  type ObCardLimit,
  type ObCardTransaction,
  type ObTransaction,
  type StatementZone,
} from './data-mapping.js';

/*
 * The connector of a consent bank (docs/open-finance.md, "Syncing"): its login is the link's grant, whose
 * access token it refreshes when due; it reads Open Finance Brasil–shaped resources over mutual TLS, checks
 * every answer against the schemas (data-schemas.ts) and maps it (data-mapping.ts). One is made per sync,
 * for one link: it holds that link's tokens while the sync runs, and hands every refreshed pair to
 * `saveTokens` at once, so a later failure of the sync does not lose them (a refresh token the bank rotated
 * is the only one that works from then on).
 */

export const ACCOUNTS_API = '/open-banking/accounts/v2/accounts';
export const CREDIT_CARDS_API = '/open-banking/credit-cards-accounts/v2/accounts';
/** Brazil's resources API: which of a consent's accounts and cards can be read now. */
export { retryAtOf };

export const RESOURCES_API = '/open-banking/resources/v3/resources';
/** Brazil's customers API 2.2.1: a person's identification record, which names them. */
export const IDENTIFICATIONS_API = '/open-banking/customers/v2/personal/identifications';

/** A row of Brazil's resources list. */
export interface ObResource {
  resourceId: string;
  type: string;
  status: string;
}

/**
 * The accounts and cards a Brazilian bank says may be read now (`AVAILABLE`), and those it says exist but
 * may not be read for a while (resources 3.1.0: `TEMPORARILY_UNAVAILABLE`, a block; `PENDING_AUTHORISATION`,
 * a co-holder has not consented yet), whose data the file says is not to be asked for. `UNAVAILABLE` means
 * gone (a closed account) and is in neither.
 */
export function availableResources(rows: readonly ObResource[]): {
  accounts: Set<string>;
  cards: Set<string>;
  /** Refs (`acc-…`, `card-…`) of the resources that exist but cannot be read now. */
  unavailableRefs: string[];
} {
  const available = rows.filter((row) => row.status === 'AVAILABLE');
  const paused = rows.filter(
    (row) => row.status === 'TEMPORARILY_UNAVAILABLE' || row.status === 'PENDING_AUTHORISATION',
  );
  const refOf = (row: ObResource) =>
    row.type === 'ACCOUNT'
      ? depositAccountRef(row.resourceId)
      : row.type === 'CREDIT_CARD_ACCOUNT'
        ? cardAccountRef(row.resourceId)
        : null;
  return {
    accounts: new Set(available.filter((r) => r.type === 'ACCOUNT').map((r) => r.resourceId)),
    cards: new Set(available.filter((r) => r.type === 'CREDIT_CARD_ACCOUNT').map((r) => r.resourceId)),
    unavailableRefs: paused.map(refOf).filter((ref): ref is string => ref !== null),
  };
}

/** The CMF's draft: a bank answers a data page of up to 100 records within 4 s. */
export const ANSWER_BUDGET_MS = 4_000;
/**
 * Pages of 1,000, the largest `page-size` both files allow (Open Finance Brasil's common rules, and the CMF's
 * draft after them): a 14-day window of a person's account is one page, so a list costs one call of the bank's
 * budget instead of one per 100 rows. A bank may answer with fewer a page; `links.next` is followed then.
 */
export const PAGE_SIZE = 1_000;
/** A token due within this is refreshed before the first call rather than met with a 401 mid-sync. */
export const REFRESH_AHEAD_MS = 60_000;
/**
 * Paging stops here, so a bank whose `next` never ends cannot hold a worker: 500 pages of 100 is 50,000
 * movements of one account in one window, far beyond any 90-day window of a person's account.
 */
const MAX_PAGES = 500;
/** Tokens as a refresh returns them; the caller seals and stores them (links/consent/grants.ts). */
export interface RefreshedTokens {
  accessToken: string;
  accessTokenExpiresAt: number | null;
  /** Null: the bank did not rotate it; the one held stays valid. */
  refreshToken: string | null;
}

export interface ConsentConnectorOptions {
  client: ConsentClient;
  answers: AnswerChecker;
  /** Stores refreshed tokens; awaited before they are used, so the next sync anywhere starts from them. */
  saveTokens: (tokens: RefreshedTokens, now: number) => Promise<void>;
  /**
   * Ask Grant Management about the grant before any other call, and stop there if it has ended: the engine
   * sets it while the bank is ending consents in bulk (banks/health.ts), so each link costs the bank one
   * query instead of a resource call, a refresh and a query.
   */
  checkGrantFirst?: boolean;
  /**
   * Awaited before every call to the bank (a resource page, a token refresh, a Grant Management query): the
   * bank's budget shared by every scheduler process (banks/budget/). It may wait, or throw to defer the sync.
   */
  permit?: () => Promise<void>;
  /** Per call; default the draft's 4 s. */
  budgetMs?: number;
  pageSize?: number;
}

/** What a sync holds between calls: the current tokens and what the consent lets it read. */
interface GrantState {
  grantId: string;
  /** Grant Management's answer, once asked (at most once a sync). */
  query: GrantQuery | null;
  accessToken: string;
  accessTokenExpiresAt: number | null;
  refreshToken: string | null;
  covers: ConsentCoverage[];
  /** What names the holder at this bank, when the consent lets it be read (`readHolderName`); else null. */
  holderData: HolderData | null;
  /** The `name` of the ID token of this sync's last refresh (null: it had none); undefined: no refresh yet. */
  refreshedName: string | null | undefined;
}

/** `get`'s answer for a status the caller reads as "no such account". */
const GONE = Symbol('gone');

const fail = (code: ConstructorParameters<typeof ConnectorError>[0], reason: string, extra = {}) =>
  new ConnectorError(code, reason, { reason, ...(extra as ConnectorErrorOptions) });

/** Why a grant whose query says it ended ends the link, in the appliance's words (never the grant id). */
export function endedReason(
  query: Extract<GrantQuery, { kind: 'ended' }>,
  source: 'Grant Management' | 'consents API' = 'Grant Management',
): string {
  return query.status === 'expired'
    ? `the bank says the consent has expired (${source}: expired)`
    : `the bank says the consent was revoked (${source}: ${query.status})`;
}

/**
 * How far ahead a sync asks for an account's scheduled entries (`LANCAMENTO_FUTURO`): accounts 2.4.2 lets
 * `toBookingDate` be a future day, and a bank keeps a standing order or a scheduled transfer there until it
 * books. A year covers yearly payments; a scheduled entry further out is read once it comes within it.
 */
export const SCHEDULED_HORIZON_DAYS = 366;
const DAY_MS = 86_400_000;

/**
 * The days a window touches, `YYYY-MM-DD` in the bank's own time zone (the files' dates are the holder's
 * calendar days: Brasília time in Brazil, Santiago in Chile), as the date filters take them.
 */
export function bookingDates(window: DateWindow, zone: StatementZone): { from: string; to: string } {
  return {
    from: chileanDate(window.from, zone),
    to: chileanDate(Math.max(window.from, window.to - 1), zone),
  };
}

/**
 * The filters of a transactions list, in each file's own names: accounts 2.4.2 `fromBookingDate` /
 * `toBookingDate`, reaching `SCHEDULED_HORIZON_DAYS` ahead when the window ends now (scheduled entries);
 * credit cards 2.3.1 `fromTransactionDate` / `toTransactionDate`. Both files say a missing date means today,
 * so a filter is never left out.
 */
export function transactionFilters(
  kind: 'account' | 'card',
  window: DateWindow,
  zone: StatementZone,
  now: number,
): Record<string, string> {
  const endsNow = window.to >= now - DAY_MS;
  if (kind === 'card') {
    const dates = bookingDates(window, zone);
    return { fromTransactionDate: dates.from, toTransactionDate: dates.to };
  }
  const to = endsNow ? { ...window, to: now + SCHEDULED_HORIZON_DAYS * DAY_MS } : window;
  const dates = bookingDates(to, zone);
  return { fromBookingDate: dates.from, toBookingDate: dates.to };
}

export function createConsentConnector(options: ConsentConnectorOptions): ConsentConnector {
  const { client: bank, answers } = options;
  const budgetMs = options.budgetMs ?? ANSWER_BUDGET_MS;
  const pageSize = options.pageSize ?? PAGE_SIZE;
  const apiOrigin = new URL(bank.apiBase).origin;
  const permit = options.permit ?? (() => Promise.resolve());
  const { profile } = bank;
  const source = profile.grantSource;
  const ended = (query: Extract<GrantQuery, { kind: 'ended' }>) => endedReason(query, source);
  const zone = profile.zone;

  const stateOf = (session: BankSession) => session.state as unknown as GrantState;

  /** Grant Management's word on the grant, asked at most once a sync. */
  async function grantQuery(state: GrantState): Promise<GrantQuery> {
    if (state.query === null) {
      await permit();
      state.query = await profile.queryGrant(bank, state.grantId);
    }
    return state.query;
  }

  /**
   * The bank refused to refresh the grant's tokens (`invalid_grant`): no later sync can get tokens either, so
   * the consent is over whatever Grant Management says; its answer only words the reason.
   */
  async function refusedRefresh(state: GrantState): Promise<ConnectorError> {
    const query = await grantQuery(state);
    if (query.kind === 'ended') return fail('consent_revoked', ended(query));
    const said = query.kind === 'authorised' ? 'authorised' : query.reason;
    return fail(
      'consent_revoked',
      `the bank refused to refresh the access token (invalid_grant): the consent was revoked or has expired (${source}: ${said})`,
    );
  }

  async function refresh(state: GrantState, now: number): Promise<void> {
    if (state.refreshToken === null)
      throw fail(
        'rejected_credentials',
        'the access token expired and the bank issued no refresh token with the consent: the user must renew the consent',
      );
    let answer: Awaited<ReturnType<typeof client.refreshTokenGrant>>;
    await permit();
    try {
      answer = await client.refreshTokenGrant(bank.configuration, state.refreshToken);
    } catch (error) {
      if (error instanceof client.ResponseBodyError && error.error === 'invalid_grant')
        throw await refusedRefresh(state);
      throw refreshFailure(error, now);
    }
    const tokens: RefreshedTokens = {
      accessToken: answer.access_token,
      accessTokenExpiresAt: answer.expires_in === undefined ? null : now + answer.expires_in * 1000,
      refreshToken: answer.refresh_token ?? null,
    };
    await options.saveTokens(tokens, now);
    // OpenID Connect Core §12.2: a refresh may answer with a new ID token, which openid-client has checked
    // (issuer, audience, expiry); received from the token endpoint over mutual TLS, it is the bank's word.
    state.refreshedName = holderNameOf(answer.claims()?.name);
    state.accessToken = tokens.accessToken;
    state.accessTokenExpiresAt = tokens.accessTokenExpiresAt;
    if (tokens.refreshToken !== null) state.refreshToken = tokens.refreshToken;
  }

  /**
   * One GET within the budget; a 401 refreshes the token once and tries again. A status in `goneOn` answers
   * GONE instead of failing (a balance read of an account the bank no longer has).
   */
  async function get(
    state: GrantState,
    url: string,
    what: string,
    now: number,
    goneOn: readonly number[] = [],
  ): Promise<unknown> {
    for (let refreshed = false; ; refreshed = true) {
      let response: Response;
      let body: string;
      await permit();
      try {
        const signal = AbortSignal.timeout(budgetMs);
        response = await bank.fetch(url, {
          method: 'GET',
          headers: {
            accept: 'application/json',
            authorization: `Bearer ${state.accessToken}`,
            'x-fapi-interaction-id': randomUUID(),
          },
          signal,
        });
        body = await response.text();
      } catch (error) {
        if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
          throw fail('timeout', `the bank did not answer ${what} within ${budgetMs / 1000} s`);
        throw fail('bank_unavailable', `the bank could not be reached for ${what}`);
      }
      const status = response.status;
      if (status === 200) {
        try {
          return JSON.parse(body) as unknown;
        } catch {
          throw fail('invalid_bank_data', `the bank's answer to ${what} is not JSON`);
        }
      }
      if (goneOn.includes(status)) return GONE;
      if (status === 401 && !refreshed) {
        await refresh(state, now);
        continue;
      }
      // A fresh token refused too: a revoked consent, or a bank-side fault. Grant Management tells which.
      if (status === 401) {
        const query = await grantQuery(state);
        if (query.kind === 'ended') throw fail('consent_revoked', ended(query));
      }
      throw statusFailure(status, response.headers.get('retry-after'), what, now, saidIn(body));
    }
  }

  /** Every page of a list: follows `links.next`, which must stay on the bank's API (it gets the token). */
  async function pages<T>(
    state: GrantState,
    first: string,
    kind: AnswerKind,
    what: string,
    now: number,
  ): Promise<T[]> {
    const rows: T[] = [];
    const seen = new Set<string>();
    for (let url: string | undefined = first; url !== undefined;) {
      if (seen.size >= MAX_PAGES) throw fail('invalid_bank_data', `${what} has more than ${MAX_PAGES} pages`);
      seen.add(url);
      const page = answers.check<{ data: T[]; links?: { next?: string } }>(
        kind,
        await get(state, url, what, now),
      );
      rows.push(...page.data);
      const next = page.links?.next;
      if (next === undefined) break;
      let parsed: URL;
      try {
        parsed = new URL(next);
      } catch {
        throw fail('invalid_bank_data', `${what}: links.next is not a URL`);
      }
      if (parsed.origin !== apiOrigin)
        throw fail('invalid_bank_data', `${what}: links.next leaves the bank's API`);
      if (seen.has(parsed.href)) throw fail('invalid_bank_data', `${what}: links.next repeats a page`);
      url = parsed.href;
    }
    return rows;
  }

  /**
   * The holder's name as the bank vouches for it. Chile (`name`): the ID token's `name` claim (OpenID Connect
   * Core 1.0 §5.1), which the consent asked for with the `claims` parameter (§5.5); a refresh this sync already
   * made answered with one, else one refresh asks for it (a token call). Brazil (`identification`): customers
   * 2.2.1, `GET /personal/identifications` (permission CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ, scope
   * `customers`), one call; its `socialName`, else its `civilName`. A 403 or 404 there names no one.
   */
  async function holderName(state: GrantState, now: number): Promise<HolderNameRead> {
    if (state.holderData === null)
      return { kind: 'unnamed', reason: "the consent does not cover the holder's name" };
    if (state.holderData === 'name') {
      if (state.refreshedName === undefined) {
        if (state.refreshToken === null)
          return {
            kind: 'unnamed',
            reason: 'the bank issued no refresh token to ask for a new ID token with',
          };
        await refresh(state, now);
      }
      const name = state.refreshedName ?? null;
      return name === null
        ? { kind: 'unnamed', reason: "the bank's ID token carries no name" }
        : { kind: 'named', name };
    }
    const answer = await get(
      state,
      `${bank.apiBase}${IDENTIFICATIONS_API}`,
      "the holder's identification",
      now,
      [403, 404],
    );
    if (answer === GONE)
      return { kind: 'unnamed', reason: 'the bank keeps no identification the consent reads' };
    const records = answers.check<{ data: ObPersonalIdentification[] }>('identification', answer).data;
    const name = identificationName(records);
    return name === null
      ? { kind: 'unnamed', reason: "the bank's identification carries no usable name" }
      : { kind: 'named', name };
  }

  const one = async <T>(state: GrantState, url: string, kind: AnswerKind, what: string, now: number) =>
    answers.check<{ data: T }>(kind, await get(state, url, what, now)).data;

  const listUrl = (path: string, query: Record<string, string> = {}) => {
    const url = new URL(`${bank.apiBase}${path}`);
    for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
    url.searchParams.set('page', '1');
    url.searchParams.set('page-size', String(pageSize));
    return url.href;
  };
  const idOf = (ref: string, prefix: string) => encodeURIComponent(ref.slice(prefix.length));

  return {
    async login(request) {
      const grant: GrantCredentials = request.credentials;
      const covers = coverageOf(grant.authorizationDetails);
      if (!covers.includes('accounts') && !covers.includes('credit_cards'))
        throw fail(
          'action_required',
          'the consent lets no account be read (neither ReadAccounts nor ReadCreditCards): the user must renew it',
        );
      const state: GrantState = {
        grantId: grant.grantId,
        query: null,
        accessToken: grant.accessToken,
        accessTokenExpiresAt: grant.accessTokenExpiresAt,
        refreshToken: grant.refreshToken,
        covers,
        holderData: profile.readsHolderName(grant.authorizationDetails)
          ? profile.holderData(request.holderType)
          : null,
        refreshedName: undefined,
      };
      if (options.checkGrantFirst) {
        const query = await grantQuery(state);
        if (query.kind === 'ended') throw fail('consent_revoked', ended(query));
      }
      if (state.accessTokenExpiresAt !== null && state.accessTokenExpiresAt - request.now < REFRESH_AHEAD_MS)
        await refresh(state, request.now);
      // No MFA ever: the person authenticated at the bank when they consented. The holder's name is read
      // apart (`readHolderName`), on the syncs the engine asks it on; until then the session names no one.
      return {
        kind: 'session',
        session: { holderName: '', state: state as unknown as Record<string, unknown> },
      };
    },

    submitMfa() {
      return Promise.reject(fail('unsupported', 'a consent bank never asks for a code'));
    },

    async readHolderName(session, now): Promise<HolderNameRead> {
      const state = stateOf(session);
      try {
        return await holderName(state, now);
      } catch (error) {
        // The consent is over, or the bank refuses its tokens: the sync ends on it as it would on its next call.
        if (
          error instanceof ConnectorError &&
          error.code !== 'consent_revoked' &&
          error.code !== 'rejected_credentials'
        )
          return { kind: 'failed', reason: error.reason ?? error.message };
        throw error;
      }
    },

    async listAccounts(session, now) {
      const state = stateOf(session);
      const accounts: BankAccount[] = [];
      // Brazil: the resources list first, and only what it says is AVAILABLE is read.
      const readable = profile.resourcesFirst
        ? availableResources(
            await pages<ObResource>(state, listUrl(RESOURCES_API), 'resources', 'the resources list', now),
          )
        : null;
      if (readable) session.unavailableRefs = readable.unavailableRefs;
      if (state.covers.includes('accounts')) {
        const listed = await pages<ObAccount>(
          state,
          listUrl(ACCOUNTS_API),
          'accounts',
          'the accounts list',
          now,
        );
        const list = readable ? listed.filter((a) => readable.accounts.has(a.accountId)) : listed;
        for (const account of list) {
          const id = encodeURIComponent(account.accountId);
          if (state.covers.includes('balances')) {
            const balances = await one<ObBalances>(
              state,
              `${bank.apiBase}${ACCOUNTS_API}/${id}/balances`,
              'balances',
              'an account balance',
              now,
            );
            accounts.push(mapDepositAccount(account, balances, session.holderName));
            continue;
          }
          // Without ReadBalances the account is still listed, in its currency, with no money counted.
          const identification = await one<{ currency: string }>(
            state,
            `${bank.apiBase}${ACCOUNTS_API}/${id}`,
            'account',
            'an account',
            now,
          );
          const zero = { amount: '0.00', currency: identification.currency };
          accounts.push(
            mapDepositAccount(
              account,
              {
                availableAmount: zero,
                blockedAmount: zero,
                automaticallyInvestedAmount: zero,
                updateDateTime: '',
              },
              session.holderName,
            ),
          );
        }
      }
      if (state.covers.includes('credit_cards')) {
        const listedCards = await pages<ObCardAccount>(
          state,
          listUrl(CREDIT_CARDS_API),
          'creditCardAccounts',
          'the credit card list',
          now,
        );
        const cards = readable
          ? listedCards.filter((c) => readable.cards.has(c.creditCardAccountId))
          : listedCards;
        for (const card of cards) {
          const base = `${bank.apiBase}${CREDIT_CARDS_API}/${encodeURIComponent(card.creditCardAccountId)}`;
          const identification = await one<ObCardIdentification>(
            state,
            base,
            'creditCardIdentification',
            'a credit card',
            now,
          );
          const limits = await pages<ObCardLimit>(
            state,
            `${base}/limits`,
            'creditCardLimits',
            'a credit card limit',
            now,
          );
          accounts.push(mapCardAccount(card, identification, limits, session.holderName, profile.currency));
        }
      }
      return accounts;
    },

    async readBalance(session, account, now) {
      const state = stateOf(session);
      // 404: no such account (closed, or no longer in the consent); 403: not readable now (Brazil's
      // TEMPORARILY_UNAVAILABLE or PENDING_AUTHORISATION). Either way the lists are read again at once.
      const gone = [403, 404];
      if (account.type === 'credit_card') {
        if (!state.covers.includes('credit_cards')) return { kind: 'unknown' };
        const url = `${bank.apiBase}${CREDIT_CARDS_API}/${idOf(account.ref, 'card-')}/limits`;
        const answer = await get(state, url, 'a credit card limit', now, gone);
        if (answer === GONE) return { kind: 'gone' };
        const page = answers.check<{ data: ObCardLimit[]; links?: { next?: string } }>(
          'creditCardLimits',
          answer,
        );
        // A limits list longer than a page is read whole, as the full listing reads it.
        const limits = page.links?.next
          ? await pages<ObCardLimit>(state, url, 'creditCardLimits', 'a credit card limit', now)
          : page.data;
        return { kind: 'read', balance: cardFigures(limits, profile.currency).balance };
      }
      if (!state.covers.includes('accounts') || !state.covers.includes('balances'))
        return { kind: 'unknown' };
      const url = `${bank.apiBase}${ACCOUNTS_API}/${idOf(account.ref, 'acc-')}/balances`;
      const answer = await get(state, url, 'an account balance', now, gone);
      if (answer === GONE) return { kind: 'gone' };
      return {
        kind: 'read',
        balance: depositBalance(answers.check<{ data: ObBalances }>('balances', answer).data).balance,
      };
    },

    async listMovements(session, account, window, now) {
      const state = stateOf(session);
      const card = account.ref.startsWith('card-');
      const query = transactionFilters(card ? 'card' : 'account', window, zone, now);
      let movements: BankMovement[];
      if (card) {
        if (!state.covers.includes('credit_cards')) return [];
        const rows = await pages<ObCardTransaction>(
          state,
          listUrl(`${CREDIT_CARDS_API}/${idOf(account.ref, 'card-')}/transactions`, query),
          'creditCardTransactions',
          'credit card transactions',
          now,
        );
        movements = mapAll(rows, (row) => mapCardTransaction(row, account.currency, zone));
      } else {
        // The consent may list accounts and balances without their transactions (no ReadTransactions).
        if (!state.covers.includes('movements')) return [];
        const rows = await pages<ObTransaction>(
          state,
          listUrl(`${ACCOUNTS_API}/${idOf(account.ref, 'acc-')}/transactions`, query),
          'transactions',
          'account transactions',
          now,
        );
        movements = mapAll(rows, (row) => mapDepositTransaction(row, account.currency, zone));
      }
      // The filters take whole days; the engine's window is to the millisecond. Scheduled entries (pending,
      // dated after the window) are kept: they were asked for on purpose, and stay pending until they book.
      return movements.filter(
        (m) => m.postedAt >= window.from && (m.postedAt < window.to || (m.pending && m.postedAt >= now)),
      );
    },
  };
}

/** The bank's own error code and words in a refusal's body (Open Finance's `errors`, or OAuth's), if any. */
function saidIn(body: string): string {
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(body);
  } catch {
    return '';
  }
  const words = bankWordsOf(null, parsed);
  return words.error === null ? '' : ` ${describeBankWords(words)}`;
}

/**
 * A resource answer other than 200 (and other than a first 401), as the connector error it means, with the
 * bank's own words (`said`, from bank-answers.ts: masked, short) so `svc links inspect` shows them.
 */
export function statusFailure(
  status: number,
  retryAfter: string | null,
  what: string,
  now: number,
  said = '',
): ConnectorError {
  if (status === 429 || status === 529) {
    const retryAt = retryAtOf(retryAfter, status, now);
    return fail(
      'bank_unavailable',
      `the bank rate-limited ${what} (HTTP ${status}) until ${new Date(retryAt).toISOString()}`,
      { retryAt },
    );
  }
  if (status === 401)
    return fail(
      'rejected_credentials',
      `the bank refused the access token for ${what} (HTTP 401${said}) even after a refresh: the consent may be revoked; the user must renew it`,
    );
  if (status === 403)
    return fail(
      'action_required',
      `the bank refused ${what} (HTTP 403${said}): the consent does not cover it; the user must renew the consent`,
    );
  return fail('bank_unavailable', `the bank answered ${what} with HTTP ${status}${said}`);
}

/** Why a refresh failed, other than `invalid_grant` (the consent is over: `refusedRefresh`): the bank's. */
function refreshFailure(error: unknown, now: number): ConnectorError {
  if (error instanceof client.ResponseBodyError) {
    if (error.status === 429 || error.status === 529)
      return statusFailure(error.status, error.response.headers.get('retry-after'), 'a token refresh', now);
    return fail(
      'bank_unavailable',
      `the bank refused to refresh the access token (${describeBankWords(bankWordsOfError(error))})`,
    );
  }
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return fail('timeout', 'the bank did not answer a token refresh in time');
  return fail('bank_unavailable', 'the bank could not be reached to refresh the access token');
}
