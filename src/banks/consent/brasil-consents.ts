import { randomUUID } from 'node:crypto';
import * as client from 'openid-client';
import type { AccountAction, AuthorizationDetail } from './authorization-details.js';
import { bankWordsOf, bankWordsOfError, describeBankWords, retryAtOf } from './bank-answers.js';
import { clientCredentialsToken, dropClientCredentialsToken } from './client-credentials.js';
import type { ConsentClient, GrantQuery, RevokeOutcome } from './profile.js';

/*
 * The appliance as a client of Open Finance Brasil's consents API 3.3.1 (docs/open-finance.md, "Open Finance
 * Brasil"): a consent is a resource the client creates before the customer sees the bank, reads to learn
 * what was authorised and whether it still holds, and deletes to revoke it, each with a `client_credentials`
 * token of scope `consents` over mutual TLS. Where Chile's path uses Grant Management, a Brazilian link's
 * grant id is its consent id (`urn:…`).
 */

export const CONSENTS_PATH = '/open-banking/consents/v3/consents';
/** A consent call's answer budget, as Grant Management's: the bank's 4 s. */
export const CONSENTS_BUDGET_MS = 4_000;

/** The permissions of each thing the appliance reads; a group comes whole, as the file asks. */
const PERMISSIONS_OF: Readonly<Record<AccountAction, readonly string[]>> = {
  ReadAccounts: ['ACCOUNTS_READ'],
  ReadBalances: ['ACCOUNTS_BALANCES_READ'],
  ReadTransactions: ['ACCOUNTS_TRANSACTIONS_READ'],
  ReadCreditCards: [
    'CREDIT_CARDS_ACCOUNTS_READ',
    'CREDIT_CARDS_ACCOUNTS_LIMITS_READ',
    'CREDIT_CARDS_ACCOUNTS_TRANSACTIONS_READ',
  ],
};

/**
 * The holder's name: customers 2.2.1 `GET /personal/identifications`, opened by this permission (the consents
 * file's group "Dados Cadastrais PF", with RESOURCES_READ) and the scope `customers`. The record's `socialName`,
 * else its `civilName`, names the person (consent-connector.ts `readHolderName`).
 */
export const IDENTIFICATION_PERMISSION = 'CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ';
export const CUSTOMERS_SCOPE = 'customers';
/**
 * The link keeps a Brazilian consent as `authorization_details` (`detailsOfConsent`): the accounts and cards in
 * an `Accounts` entry, and the customers permissions granted in an entry of this type, so a sync knows whether
 * the consent lets it read the holder's name without asking the bank.
 */
export const CUSTOMERS_DETAIL_TYPE = 'Customers';

/**
 * What the consent asks for: the permissions of the actions a product reads, the identification's when the
 * holder's name is asked, always with RESOURCES_READ.
 */
export function brasilPermissions(actions: readonly AccountAction[], identification = false): string[] {
  return [
    ...actions.flatMap((action) => PERMISSIONS_OF[action]),
    ...(identification ? [IDENTIFICATION_PERMISSION] : []),
    'RESOURCES_READ',
  ];
}

/** The actions a consent's permissions allow: each action needs every permission of its group. */
export function actionsOfPermissions(permissions: readonly string[]): AccountAction[] {
  return (Object.keys(PERMISSIONS_OF) as AccountAction[]).filter((action) =>
    PERMISSIONS_OF[action].every((permission) => permissions.includes(permission)),
  );
}

/** The data scopes a consent's authorisation asks for, beside `openid` and `consent:<id>`. */
export function brasilScope(consentId: string, identification = false): string {
  const customers = identification ? ` ${CUSTOMERS_SCOPE}` : '';
  return `openid consent:${consentId} accounts credit-cards-accounts resources${customers}`;
}

/** The consent id a token's scope names (`consent:urn:…`), or null. */
export function consentIdOfScope(scope: unknown): string | null {
  if (typeof scope !== 'string') return null;
  const found = scope.split(' ').find((item) => /^consent:urn:[^\s]{1,250}$/.test(item));
  return found ? found.slice('consent:'.length) : null;
}

/** The file's date-time: UTC, whole seconds, `Z`. */
export function zuluOf(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** A consent as the bank reads it back, in the appliance's terms. */
export interface BrasilConsent {
  consentId: string;
  status: 'AWAITING_AUTHORISATION' | 'AUTHORISED' | 'REJECTED' | string;
  permissions: string[];
  /** Ms since the epoch; null: until revoked. */
  expiresAt: number | null;
  /** The rejection's code when REJECTED (`CUSTOMER_MANUALLY_REVOKED`, `CONSENT_MAX_DATE_REACHED`, …). */
  rejection: string | null;
}

/**
 * The consent as `authorization_details`, the shape every consent link keeps: `identifier` is its id. The
 * `Accounts` entry comes first (the widget reads the consent id there); a `Customers` entry follows when the
 * consent holds the identification permission.
 */
export function detailsOfConsent(
  consent: Pick<BrasilConsent, 'consentId' | 'permissions' | 'expiresAt'>,
): AuthorizationDetail[] {
  const detail: AuthorizationDetail = {
    type: 'Accounts',
    actions: actionsOfPermissions(consent.permissions),
    identifier: consent.consentId,
  };
  if (consent.expiresAt !== null) detail.validTo = new Date(consent.expiresAt).toISOString();
  if (!consent.permissions.includes(IDENTIFICATION_PERMISSION)) return [detail];
  return [
    detail,
    { type: CUSTOMERS_DETAIL_TYPE, actions: [IDENTIFICATION_PERMISSION], identifier: consent.consentId },
  ];
}

/** Whether a Brazilian link's consent lets its holder's identification be read (`detailsOfConsent`). */
export function readsIdentification(details: readonly AuthorizationDetail[]): boolean {
  return details.some(
    (detail) =>
      detail.type === CUSTOMERS_DETAIL_TYPE && (detail.actions ?? []).includes(IDENTIFICATION_PERMISSION),
  );
}

export class BrasilConsentError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly retryAt: number | null = null,
  ) {
    super(message);
    this.name = 'BrasilConsentError';
  }
}

const CONSENTS_SCOPE = 'consents';

/** One consents call with a `consents` token (kept until near its expiry; a 401 drops it and tries once more). */
async function call(
  bank: ConsentClient,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
  for (let retried = false; ; retried = true) {
    const token = await clientCredentialsToken(bank, CONSENTS_SCOPE);
    let response: Response;
    try {
      response = await bank.fetch(`${bank.apiBase}${CONSENTS_PATH}${path}`, {
        method,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${token}`,
          'x-fapi-interaction-id': randomUUID(),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(CONSENTS_BUDGET_MS),
      });
    } catch (error) {
      const said =
        (error as Error).name === 'TimeoutError' ? `no answer within ${CONSENTS_BUDGET_MS} ms` : 'no answer';
      throw new BrasilConsentError(`the bank could not be reached: ${said}`, null);
    }
    const text = await response.text();
    if (response.status === 401 && !retried) {
      dropClientCredentialsToken(bank, CONSENTS_SCOPE);
      continue;
    }
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    return { status: response.status, body: parsed, retryAfter: response.headers.get('retry-after') };
  }
}

function readConsent(body: unknown): BrasilConsent | null {
  const data = (body as { data?: Record<string, unknown> } | null)?.data;
  if (!data || typeof data.consentId !== 'string' || typeof data.status !== 'string') return null;
  const permissions = Array.isArray(data.permissions)
    ? data.permissions.filter((p): p is string => typeof p === 'string')
    : [];
  const expiresAt =
    typeof data.expirationDateTime === 'string' ? Date.parse(data.expirationDateTime) : Number.NaN;
  const rejection = (data.rejection as { reason?: { code?: unknown } } | undefined)?.reason?.code;
  return {
    consentId: data.consentId,
    status: data.status,
    permissions,
    expiresAt: Number.isNaN(expiresAt) ? null : expiresAt,
    rejection: typeof rejection === 'string' ? rejection : null,
  };
}

/** POST /consents: the consent the customer will be asked to authorise, `AWAITING_AUTHORISATION`. */
export async function createBrasilConsent(
  bank: ConsentClient,
  input: {
    cpf: string;
    cnpj: string | null;
    actions: AccountAction[];
    expiresAt: number;
    identification: boolean;
  },
): Promise<BrasilConsent> {
  const answer = await call(bank, 'POST', '', {
    data: {
      loggedUser: { document: { identification: input.cpf, rel: 'CPF' } },
      ...(input.cnpj ? { businessEntity: { document: { identification: input.cnpj, rel: 'CNPJ' } } } : {}),
      permissions: brasilPermissions(input.actions, input.identification),
      expirationDateTime: zuluOf(input.expiresAt),
    },
  });
  const consent = answer.status === 201 ? readConsent(answer.body) : null;
  if (!consent)
    throw new BrasilConsentError(
      `the bank refused the consent (${describeBankWords(bankWordsOf(answer.status, answer.body))})`,
      answer.status,
    );
  return consent;
}

/** GET /consents/{id}; null when the bank has no such consent of this client. */
export async function readBrasilConsent(
  bank: ConsentClient,
  consentId: string,
): Promise<BrasilConsent | null> {
  const answer = await call(bank, 'GET', `/${encodeURIComponent(consentId)}`);
  if (answer.status === 404) return null;
  const consent = answer.status === 200 ? readConsent(answer.body) : null;
  if (!consent)
    throw new BrasilConsentError(
      `the bank answered ${describeBankWords(bankWordsOf(answer.status, answer.body))}`,
      answer.status,
    );
  return consent;
}

/** DELETE /consents/{id}: 204 revoked; 422 (already rejected) or 404 gone, which is as good. */
export async function revokeBrasilConsent(
  bank: ConsentClient,
  consentId: string,
  now: number,
): Promise<RevokeOutcome> {
  let answer: Awaited<ReturnType<typeof call>>;
  try {
    answer = await call(bank, 'DELETE', `/${encodeURIComponent(consentId)}`);
  } catch (error) {
    return { kind: 'failed', reason: brasilReason(error), retryAt: null };
  }
  if (answer.status === 204 || answer.status === 200) return { kind: 'revoked' };
  if (answer.status === 404 || answer.status === 422) return { kind: 'gone' };
  const limited = answer.status === 429 || answer.status === 529;
  return {
    kind: 'failed',
    reason: `the bank answered ${describeBankWords(bankWordsOf(answer.status, answer.body)).split(consentId).join('…')}`,
    retryAt: limited ? retryAtOf(answer.retryAfter, answer.status as 429 | 529, now) : null,
  };
}

/** The consent's status as the sync's grant query: `REJECTED` has ended (revoked, or expired at its end). */
export async function queryBrasilConsent(bank: ConsentClient, consentId: string): Promise<GrantQuery> {
  let consent: BrasilConsent | null;
  try {
    consent = await readBrasilConsent(bank, consentId);
  } catch (error) {
    return { kind: 'unknown', reason: brasilReason(error) };
  }
  if (!consent) return { kind: 'ended', status: 'not found' };
  if (consent.status === 'AUTHORISED') return { kind: 'authorised' };
  if (consent.status === 'REJECTED')
    return {
      kind: 'ended',
      status: consent.rejection === 'CONSENT_MAX_DATE_REACHED' ? 'expired' : 'revoked',
    };
  return { kind: 'unknown', reason: `consent status ${consent.status.slice(0, 40)}` };
}

/** Why a consents call failed, with no secret in it (a token refused is the bank's OAuth code). */
export function brasilReason(error: unknown): string {
  if (error instanceof BrasilConsentError) return error.message;
  if (error instanceof client.ResponseBodyError)
    return `the bank refused a consents token (${describeBankWords(bankWordsOfError(error))})`;
  return 'the bank could not be reached for a consents token';
}
