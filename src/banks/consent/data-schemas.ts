import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import { ConnectorError } from '../connector.js';

/*
 * A consent bank's answers are checked against Open Finance Brasil's own schemas (specs/, unmodified
 * copies) before anything is mapped, so a bank that sends something else fails the sync with a reason
 * (`invalid_bank_data`) instead of crashing it or writing half of it.
 *
 * Chile's annex mirrors Brazil's resources but not its identifiers or currency, so the loaded schemas get
 * a small overlay (CLP_RUT_OVERLAY): RUTs where Brazil has CPF/CNPJ. Amounts keep Brazil's pattern (two to
 * four decimals, `1500.00`); that CLP has no minor unit is checked when the amount is mapped (data-mapping.ts).
 */

/** The answers we read, by the component schema that describes each. */
export const ANSWERS = {
  accounts: { spec: 'accounts', schema: 'ResponseAccountList' },
  account: { spec: 'accounts', schema: 'ResponseAccountIdentification' },
  balances: { spec: 'accounts', schema: 'ResponseAccountBalances' },
  transactions: { spec: 'accounts', schema: 'ResponseAccountTransactions' },
  creditCardAccounts: { spec: 'credit-cards', schema: 'ResponseCreditCardAccountsList' },
  creditCardIdentification: { spec: 'credit-cards', schema: 'ResponseCreditCardAccountsIdentification' },
  creditCardLimits: { spec: 'credit-cards', schema: 'ResponseCreditCardAccountsLimits' },
  creditCardTransactions: { spec: 'credit-cards', schema: 'ResponseCreditCardAccountsTransactions' },
  /** Brazil only: which of the consent's accounts and cards may be read now (resources 3.1.0). */
  resources: { spec: 'resources', schema: 'ResponseResourceList' },
} as const;
export type AnswerKind = keyof typeof ANSWERS;

const SPEC_FILES = {
  accounts: 'accounts-2.4.2.yml',
  'credit-cards': 'credit-cards-2.3.1.yml',
  resources: 'resources-3.1.0.yml',
} as const;
type SpecName = keyof typeof SPEC_FILES;

/** The copies sit in src/ beside this file's source; compiled code runs from dist/src/banks/consent/. */
const SPECS_DIR = new URL('../../../../src/banks/consent/specs/', import.meta.url);

/** A normalised RUT as the appliance stores them (src/rut/): digits, a hyphen, the check digit. */
const RUT = { type: 'string', pattern: '^\\d{1,8}-[\\dK]$', maxLength: 10 };

/**
 * A page link: the credit-card file's pattern wants a public DNS name (no port, no IP address), which a
 * bank's test environment or the simulated bank on loopback does not have. The links carry no data; the
 * connector follows only `next`, and only to the bank's own API origin (consent-connector.ts).
 */
const LINK = { type: 'string', minLength: 1, maxLength: 2000 };

/**
 * Where the Chilean adaptation departs from the files: property → replacement, per component schema.
 * `companyCnpj` (the institution's tax id) and `partieCnpjCpf` (the counterparty's) carry RUTs; page
 * links may name any host (LINK).
 */
export const CLP_RUT_OVERLAY: Record<SpecName, Record<string, Record<string, unknown>>> = {
  accounts: {
    AccountData: { companyCnpj: RUT },
    AccountTransactionsData: { partieCnpjCpf: RUT },
  },
  'credit-cards': {
    CreditCardAccountsData: { companyCnpj: RUT },
    Links: { self: LINK, first: LINK, prev: LINK, next: LINK, last: LINK },
    TransactionsLinks: { self: LINK, first: LINK, prev: LINK, next: LINK },
  },
  resources: {},
};

/**
 * A Brazilian bank's answers are Brazil's files as published (CNPJ and CPF, BRL), but for the page links,
 * for the same reason as in Chile (LINK).
 */
export const BRL_OVERLAY: Record<SpecName, Record<string, Record<string, unknown>>> = {
  accounts: {},
  'credit-cards': {
    Links: CLP_RUT_OVERLAY['credit-cards'].Links!,
    TransactionsLinks: CLP_RUT_OVERLAY['credit-cards'].TransactionsLinks!,
  },
  resources: {},
};

/** Whose rules a bank's answers follow: Chile's adaptation, or Brazil's own. */
export type AnswerMarket = 'CL' | 'BR';
const OVERLAYS: Record<AnswerMarket, typeof CLP_RUT_OVERLAY> = { CL: CLP_RUT_OVERLAY, BR: BRL_OVERLAY };

type Schemas = Record<string, { properties?: Record<string, unknown> }>;

export function loadSpecSchemas(spec: SpecName, market: AnswerMarket = 'CL'): Schemas {
  const document = parse(readFileSync(new URL(SPEC_FILES[spec], SPECS_DIR), 'utf8')) as {
    components: { schemas: Schemas };
  };
  const schemas = structuredClone(document.components.schemas);
  for (const [component, properties] of Object.entries(OVERLAYS[market][spec])) {
    const target = schemas[component];
    if (!target?.properties) throw new Error(`${SPEC_FILES[spec]} has no component ${component} to adapt`);
    for (const [property, replacement] of Object.entries(properties)) {
      if (!(property in target.properties))
        throw new Error(`${SPEC_FILES[spec]}: ${component} has no property ${property} to adapt`);
      target.properties[property] = replacement;
    }
  }
  return schemas;
}

/** The reason an answer failed its schema, in words an operator can act on; never the data itself. */
export function describeErrors(errors: ErrorObject[] | null | undefined): string {
  const first = (errors ?? []).slice(0, 3).map((error) => {
    const where = error.instancePath === '' ? 'the answer' : error.instancePath;
    return `${where} ${error.message ?? 'is invalid'}`;
  });
  return first.join('; ') || 'the answer does not match its schema';
}

export interface AnswerChecker {
  /** Returns `body` typed as the answer it is, or throws `invalid_bank_data` naming what is wrong. */
  check<T>(kind: AnswerKind, body: unknown): T;
}

/**
 * Compiles the validators once (a few hundred milliseconds: build it once per process, in the connector,
 * not per sync). OpenAPI 3.0's `format: double`/`url`/`uri`/`int32` are annotations here: the patterns carry the
 * rules.
 */
export function createAnswerChecker(market: AnswerMarket = 'CL'): AnswerChecker {
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false });
  addFormats.default(ajv, ['date', 'date-time', 'uuid']);
  for (const format of ['double', 'url', 'uri', 'int', 'int32', 'integer']) ajv.addFormat(format, true);
  for (const spec of Object.keys(SPEC_FILES) as SpecName[])
    ajv.addSchema({ $id: `ob-br-${spec}`, components: { schemas: loadSpecSchemas(spec, market) } });
  const validators = new Map<AnswerKind, ValidateFunction>();
  for (const [kind, { spec, schema }] of Object.entries(ANSWERS) as [
    AnswerKind,
    (typeof ANSWERS)[AnswerKind],
  ][]) {
    const validate = ajv.getSchema(`ob-br-${spec}#/components/schemas/${schema}`);
    if (!validate) throw new Error(`no schema ${schema} in ${spec}`);
    validators.set(kind, validate);
  }
  return {
    check<T>(kind: AnswerKind, body: unknown): T {
      const validate = validators.get(kind)!;
      if (!validate(body))
        throw new ConnectorError(
          'invalid_bank_data',
          `The bank's ${ANSWERS[kind].schema} answer does not match Open Finance's schema: ${describeErrors(validate.errors)}.`,
        );
      return body as T;
    },
  };
}
