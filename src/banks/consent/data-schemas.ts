import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { openApiDocument, type Market } from '../../open-finance/schemas.js';
import { ConnectorError } from '../connector.js';

/*
 * A consent bank's answers are checked against Open Finance Brasil's own schemas (specs/, unmodified
 * copies) before anything is mapped, so a bank that sends something else fails the sync with a reason
 * (`invalid_bank_data`) instead of crashing it or writing half of it.
 *
 * Chile's annex mirrors Brazil's resources but not its identifiers or currency: the schemas are read with
 * Chile's one adaptation (src/open-finance/schemas.ts: RUTs where Brazil has CPF/CNPJ). Amounts keep Brazil's
 * pattern (two to four decimals, `1500.00`); that CLP has no minor unit is checked when the amount is mapped
 * (data-mapping.ts).
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

/**
 * Brazil only: a person's identification record (customers 2.2.1, `GET /personal/identifications`), whose name
 * is the link's holder. The file is not among specs/, so the schema is written here from its text, as far as the
 * appliance reads it: `ResponsePersonalCustomersIdentification` has `data`, at least one
 * `PersonalIdentificationData`, whose `civilName` is required and `socialName` optional, strings of at most 70.
 * The record's other members (documents, birth date, contacts) are neither checked nor kept.
 */
const IDENTIFICATION = {
  name: 'ResponsePersonalCustomersIdentification',
  schema: {
    type: 'object',
    required: ['data'],
    properties: {
      data: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['civilName'],
          properties: {
            civilName: { type: 'string', maxLength: 70 },
            socialName: { type: 'string', maxLength: 70 },
            updateDateTime: { type: 'string', maxLength: 20 },
          },
        },
      },
    },
  },
} as const;

export type AnswerKind = keyof typeof ANSWERS | 'identification';
const schemaName = (kind: AnswerKind) =>
  kind === 'identification' ? IDENTIFICATION.name : ANSWERS[kind].schema;

const SPEC_FILES = {
  accounts: 'accounts-2.4.2',
  'credit-cards': 'credit-cards-2.3.1',
  resources: 'resources-3.1.0',
} as const;
type SpecName = keyof typeof SPEC_FILES;

type Schemas = Record<string, { properties?: Record<string, unknown> }>;

/** A file's component schemas as `market` reads them (src/open-finance/: the one copy, one Chilean adaptation). */
export function loadSpecSchemas(spec: SpecName, market: Market = 'CL'): Schemas {
  return (openApiDocument(SPEC_FILES[spec], market) as { components: { schemas: Schemas } }).components
    .schemas;
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
export function createAnswerChecker(market: Market = 'CL'): AnswerChecker {
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false });
  addFormats.default(ajv, ['date', 'date-time', 'uuid']);
  for (const format of ['double', 'url', 'uri', 'int', 'int32', 'integer']) ajv.addFormat(format, true);
  for (const spec of Object.keys(SPEC_FILES) as SpecName[])
    ajv.addSchema({ $id: `ob-br-${spec}`, components: { schemas: loadSpecSchemas(spec, market) } });
  const validators = new Map<AnswerKind, ValidateFunction>();
  for (const [kind, { spec, schema }] of Object.entries(ANSWERS) as [
    keyof typeof ANSWERS,
    (typeof ANSWERS)[keyof typeof ANSWERS],
  ][]) {
    const validate = ajv.getSchema(`ob-br-${spec}#/components/schemas/${schema}`);
    if (!validate) throw new Error(`no schema ${schema} in ${spec}`);
    validators.set(kind, validate);
  }
  validators.set('identification', ajv.compile(IDENTIFICATION.schema));
  return {
    check<T>(kind: AnswerKind, body: unknown): T {
      const validate = validators.get(kind)!;
      if (!validate(body))
        throw new ConnectorError(
          'invalid_bank_data',
          `The bank's ${schemaName(kind)} answer does not match Open Finance's schema: ${describeErrors(validate.errors)}.`,
        );
      return body as T;
    },
  };
}
