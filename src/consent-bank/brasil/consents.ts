import { randomUUID } from 'node:crypto';

/*
 * The consent resource of Open Finance Brasil's consents API 3.3.1 (specs/consents-3.3.1.yml), as the
 * simulated Brazilian bank keeps it: pure transitions over a record, and the record as the API shows it. The
 * bank stores records in its state table (brasil-bank.ts); nothing here does I/O.
 *
 * The life the file describes: a client creates a consent (`AWAITING_AUTHORISATION`) with a
 * `client_credentials` token; the customer authorises it at the bank (`AUTHORISED`) or refuses it
 * (`REJECTED`, by USER); one left unauthorised 60 minutes is `REJECTED` (`CONSENT_EXPIRED`, by ASPSP); an
 * authorised one revoked by `DELETE` is `REJECTED` (`CUSTOMER_MANUALLY_REVOKED`, by the TPP here, since the
 * client asked) and one past its `expirationDateTime` is `REJECTED` (`CONSENT_MAX_DATE_REACHED`). Only an
 * `AUTHORISED` consent can be extended, and only its expiry changes.
 */

export type ConsentStatus = 'AWAITING_AUTHORISATION' | 'AUTHORISED' | 'REJECTED';
export type RejectedBy = 'USER' | 'ASPSP' | 'TPP';
export type RejectionCode =
  | 'CONSENT_EXPIRED'
  | 'CUSTOMER_MANUALLY_REJECTED'
  | 'CUSTOMER_MANUALLY_REVOKED'
  | 'CONSENT_MAX_DATE_REACHED'
  | 'CONSENT_TECHNICAL_ISSUE'
  | 'INTERNAL_SECURITY_REASON';

/** The file's rule: a consent not authorised within 60 minutes of its creation is rejected. */
export const AUTHORISATION_WINDOW_MS = 60 * 60_000;
/**
 * The longest consent this bank grants: 12 months, Brazil's limit for a consent with a set end (an
 * indefinite one, no `expirationDateTime`, is also allowed by the file and is granted as asked).
 */
export const MAX_CONSENT_MONTHS = 12;

/**
 * The permissions this bank serves (a person's identification, accounts, credit cards, resources); others are
 * removed from what is granted, as the file says a bank does with products it does not offer. A person's
 * qualifications and financial relations, companies' records, credit operations, investments and exchange are
 * not simulated.
 */
export const SERVED_PERMISSIONS = [
  'CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ',
  'ACCOUNTS_READ',
  'ACCOUNTS_BALANCES_READ',
  'ACCOUNTS_TRANSACTIONS_READ',
  'ACCOUNTS_OVERDRAFT_LIMITS_READ',
  'CREDIT_CARDS_ACCOUNTS_READ',
  'CREDIT_CARDS_ACCOUNTS_BILLS_READ',
  'CREDIT_CARDS_ACCOUNTS_BILLS_TRANSACTIONS_READ',
  'CREDIT_CARDS_ACCOUNTS_LIMITS_READ',
  'CREDIT_CARDS_ACCOUNTS_TRANSACTIONS_READ',
  'RESOURCES_READ',
] as const;
export type Permission = (typeof SERVED_PERMISSIONS)[number];

export interface Extension {
  requestDateTime: number;
  expirationDateTime: number | null;
  previousExpirationDateTime: number | null;
  cpf: string;
  ipAddress: string;
  userAgent: string;
}

export interface ConsentRecord {
  consentId: string;
  clientId: string;
  /** The customer the client says is signing in (`loggedUser`), digits of a CPF. */
  cpf: string;
  /** A company's CNPJ when the consent is for a business account (`businessEntity`). */
  cnpj: string | null;
  permissions: Permission[];
  creationDateTime: number;
  expirationDateTime: number | null;
  status: ConsentStatus;
  statusUpdateDateTime: number;
  rejection: { rejectedBy: RejectedBy; code: RejectionCode } | null;
  extensions: Extension[];
}

/** `2026-01-15T12:00:00Z`: the file's date-times, UTC, without fractions. */
export function zulu(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** The file's date-time pattern, and its meaning as milliseconds (null: not such a date-time). */
export function parseZulu(text: unknown): number | null {
  if (typeof text !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(text)) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) || zulu(ms) !== text ? null : ms;
}

/** `now` plus whole calendar months (a 31st falls to the month's last day). */
export function plusMonths(now: number, months: number): number {
  const date = new Date(now);
  const day = date.getUTCDate();
  date.setUTCDate(1);
  date.setUTCMonth(date.getUTCMonth() + months);
  const last = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 0)).getUTCDate();
  date.setUTCDate(Math.min(day, last));
  return date.getTime();
}

/** The bank's answer to a request it will not honour: HTTP status, the file's error code, the reason. */
export interface Refusal {
  status: 400 | 403 | 404 | 422;
  code: string;
  detail: string;
}

export interface CreateInput {
  clientId: string;
  cpf: string;
  cnpj: string | null;
  permissions: readonly string[];
  expirationDateTime: number | null;
}

/**
 * The consent a valid request creates (the request's shape was checked against `CreateConsent` first), or why
 * not. The file asks for whole groups of permissions: a group's data permission with `RESOURCES_READ` (the
 * customers groups, "Dados Cadastrais PF" and the others, too), and a group's read permission (`ACCOUNTS_READ`,
 * `CREDIT_CARDS_ACCOUNTS_READ`) with its details.
 */
export function createConsent(input: CreateInput, now: number, namespace: string): ConsentRecord | Refusal {
  const asked = new Set(input.permissions);
  if (asked.size !== input.permissions.length)
    return { status: 400, code: 'PARAMETRO_INVALIDO', detail: 'permissions must not repeat an item' };
  const accountDetails = [...asked].some((p) => p.startsWith('ACCOUNTS_') && p !== 'ACCOUNTS_READ');
  const cardDetails = [...asked].some(
    (p) => p.startsWith('CREDIT_CARDS_ACCOUNTS_') && p !== 'CREDIT_CARDS_ACCOUNTS_READ',
  );
  if (
    (accountDetails && !asked.has('ACCOUNTS_READ')) ||
    (cardDetails && !asked.has('CREDIT_CARDS_ACCOUNTS_READ')) ||
    ((asked.has('ACCOUNTS_READ') ||
      asked.has('CREDIT_CARDS_ACCOUNTS_READ') ||
      [...asked].some((p) => p.startsWith('CUSTOMERS_'))) &&
      !asked.has('RESOURCES_READ'))
  )
    return {
      status: 400,
      code: 'PARAMETRO_INVALIDO',
      detail:
        'permissions must hold whole groups: ACCOUNTS_READ or CREDIT_CARDS_ACCOUNTS_READ with their details, and RESOURCES_READ with every group',
    };
  const permissions = SERVED_PERMISSIONS.filter((p) => asked.has(p));
  if (!permissions.some((p) => p !== 'RESOURCES_READ'))
    return {
      status: 422,
      code: 'COMBINACAO_PERMISSOES_INCORRETA',
      detail:
        'none of the permissions asked is of a product this bank offers (identification, accounts, credit cards)',
    };
  if (input.expirationDateTime !== null) {
    if (input.expirationDateTime <= now)
      return { status: 422, code: 'DATA_EXPIRACAO_INVALIDA', detail: 'expirationDateTime is in the past' };
    if (input.expirationDateTime > plusMonths(now, MAX_CONSENT_MONTHS))
      return {
        status: 422,
        code: 'DATA_EXPIRACAO_INVALIDA',
        detail: `expirationDateTime is more than ${MAX_CONSENT_MONTHS} months away`,
      };
  }
  return {
    consentId: `urn:${namespace}:${randomUUID()}`,
    clientId: input.clientId,
    cpf: input.cpf,
    cnpj: input.cnpj,
    permissions,
    creationDateTime: now,
    expirationDateTime: input.expirationDateTime,
    status: 'AWAITING_AUTHORISATION',
    statusUpdateDateTime: now,
    rejection: null,
    extensions: [],
  };
}

/** The record as time leaves it: unauthorised past its window, or authorised past its end, is rejected. */
export function settle(record: ConsentRecord, now: number): ConsentRecord {
  if (record.status === 'AWAITING_AUTHORISATION' && now >= record.creationDateTime + AUTHORISATION_WINDOW_MS)
    return reject(record, 'ASPSP', 'CONSENT_EXPIRED', record.creationDateTime + AUTHORISATION_WINDOW_MS);
  if (
    record.status === 'AUTHORISED' &&
    record.expirationDateTime !== null &&
    now >= record.expirationDateTime
  )
    return reject(record, 'ASPSP', 'CONSENT_MAX_DATE_REACHED', record.expirationDateTime);
  return record;
}

function reject(record: ConsentRecord, by: RejectedBy, code: RejectionCode, at: number): ConsentRecord {
  return { ...record, status: 'REJECTED', statusUpdateDateTime: at, rejection: { rejectedBy: by, code } };
}

/** The customer approved at the bank, signed in as `cpf`: only the customer the consent names may. */
export function authorise(record: ConsentRecord, cpf: string, now: number): ConsentRecord | Refusal {
  const current = settle(record, now);
  if (current.status !== 'AWAITING_AUTHORISATION')
    return { status: 422, code: 'STATUS_INVALIDO', detail: 'the consent is not awaiting authorisation' };
  if (current.cpf !== cpf)
    return { status: 403, code: 'FORBIDDEN', detail: 'the customer signed in is not the consent’s' };
  return { ...current, status: 'AUTHORISED', statusUpdateDateTime: now };
}

/** The customer refused at the bank (or the bank refused for them). */
export function refuse(
  record: ConsentRecord,
  by: RejectedBy,
  code: RejectionCode,
  now: number,
): ConsentRecord {
  const current = settle(record, now);
  return current.status === 'REJECTED' ? current : reject(current, by, code, now);
}

/**
 * `DELETE`: the file answers 422 for a consent already rejected, else the consent ends (an awaiting one is
 * rejected by the client, an authorised one revoked).
 */
export function revoke(record: ConsentRecord, now: number): ConsentRecord | Refusal {
  const current = settle(record, now);
  if (current.status === 'REJECTED')
    return {
      status: 422,
      code: 'CONSENTIMENTO_EM_STATUS_REJEITADO',
      detail: 'the consent is already rejected',
    };
  return reject(
    current,
    'TPP',
    current.status === 'AUTHORISED' ? 'CUSTOMER_MANUALLY_REVOKED' : 'CUSTOMER_MANUALLY_REJECTED',
    now,
  );
}

export interface ExtendInput {
  cpf: string;
  expirationDateTime: number | null;
  ipAddress: string;
  userAgent: string;
}

/** `POST /extends`: an authorised consent of the same customer gets a later end (or none). */
export function extend(record: ConsentRecord, input: ExtendInput, now: number): ConsentRecord | Refusal {
  const current = settle(record, now);
  if (current.status !== 'AUTHORISED')
    return {
      status: 422,
      code: 'ESTADO_CONSENTIMENTO_INVALIDO',
      detail: 'only an authorised consent is extended',
    };
  if (input.cpf !== current.cpf)
    return {
      status: 422,
      code: 'DEPENDE_MULTIPLA_ALCADA',
      detail: 'loggedUser is not the consent’s customer',
    };
  const next = input.expirationDateTime;
  if (next !== null) {
    if (next <= now || (current.expirationDateTime !== null && next <= current.expirationDateTime))
      return {
        status: 422,
        code: 'DATA_EXPIRACAO_INVALIDA',
        detail: 'expirationDateTime must be later than the consent’s current end',
      };
    if (next > plusMonths(now, MAX_CONSENT_MONTHS))
      return {
        status: 422,
        code: 'DATA_EXPIRACAO_INVALIDA',
        detail: `expirationDateTime is more than ${MAX_CONSENT_MONTHS} months away`,
      };
  }
  return {
    ...current,
    expirationDateTime: next,
    extensions: [
      {
        requestDateTime: now,
        expirationDateTime: next,
        previousExpirationDateTime: current.expirationDateTime,
        cpf: input.cpf,
        ipAddress: input.ipAddress,
        userAgent: input.userAgent,
      },
      ...current.extensions,
    ],
  };
}

export function isRefusal(value: ConsentRecord | Refusal): value is Refusal {
  return 'status' in value && typeof value.status === 'number';
}

/** `ResponseConsentRead`'s `data` (also `ResponseConsent`'s, which has no rejection). */
export function consentData(record: ConsentRecord, withRejection: boolean): Record<string, unknown> {
  return {
    consentId: record.consentId,
    creationDateTime: zulu(record.creationDateTime),
    status: record.status,
    statusUpdateDateTime: zulu(record.statusUpdateDateTime),
    permissions: record.permissions,
    ...(record.expirationDateTime !== null ? { expirationDateTime: zulu(record.expirationDateTime) } : {}),
    ...(withRejection && record.rejection
      ? { rejection: { rejectedBy: record.rejection.rejectedBy, reason: { code: record.rejection.code } } }
      : {}),
  };
}

/** `ResponseConsentReadExtensions`'s `data`: newest first, as the file asks. */
export function extensionsData(record: ConsentRecord): Record<string, unknown>[] {
  return record.extensions.map((extension) => ({
    ...(extension.expirationDateTime !== null
      ? { expirationDateTime: zulu(extension.expirationDateTime) }
      : {}),
    loggedUser: { document: { identification: extension.cpf, rel: 'CPF' } },
    requestDateTime: zulu(extension.requestDateTime),
    ...(extension.previousExpirationDateTime !== null
      ? { previousExpirationDateTime: zulu(extension.previousExpirationDateTime) }
      : {}),
    xFapiCustomerIpAddress: extension.ipAddress,
    xCustomerUserAgent: extension.userAgent,
  }));
}
