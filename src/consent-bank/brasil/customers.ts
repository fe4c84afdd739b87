import { createHash } from 'node:crypto';
import type { WrittenDocument } from '../resource-server.js';

/*
 * Open Finance Brasil's customers API 2.2.1 (`OpenBanking-Brasil/openapi`, `swagger-apis/customers/2.2.1.yml`),
 * the one operation this bank serves: `GET /personal/identifications`, a person's identification record, behind
 * the permission CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ (the consents file's group "Dados Cadastrais PF", with
 * RESOURCES_READ) and the scope `customers`. The file is not among the four in src/open-finance/specs/, so the
 * operation is written here from its text (its parameters, `ResponsePersonalCustomersIdentification` and the
 * members of `PersonalIdentificationData` it requires), as an OpenAPI document the resource server routes and
 * checks answers against like the files. The bank shares none of it with the appliance's connector, which reads
 * the same text its own way.
 */

export const CUSTOMERS_BASE = '/open-banking/customers/v2';
export const CUSTOMERS_VERSION = '2.2.1';

/** The file's date-time: RFC 3339, UTC, whole seconds. */
const DATE_TIME =
  '^(\\d{4})-(1[0-2]|0?[1-9])-(3[01]|[12][0-9]|0?[1-9])T(?:[01]\\d|2[0123]):(?:[012345]\\d):(?:[012345]\\d)Z$';

const header = (name: string, required: boolean, schema: Record<string, unknown>) => ({
  name,
  in: 'header',
  required,
  schema,
});

const query = (name: string, schema: Record<string, unknown>) => ({ name, in: 'query', schema });

/** The operation's parameters, as `components.parameters` of the file define them. */
const PARAMETERS = [
  header('Authorization', true, { type: 'string', maxLength: 2048 }),
  header('x-fapi-auth-date', false, {
    type: 'string',
    minLength: 29,
    maxLength: 29,
    pattern:
      '^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \\d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \\d{4} \\d{2}:\\d{2}:\\d{2} (GMT|UTC)$',
  }),
  header('x-fapi-customer-ip-address', false, { type: 'string', minLength: 1, maxLength: 100 }),
  header('x-fapi-interaction-id', true, {
    type: 'string',
    minLength: 1,
    maxLength: 36,
    pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  }),
  header('x-customer-user-agent', false, { type: 'string', minLength: 1, maxLength: 100 }),
  query('page', { type: 'integer', default: 1, minimum: 1, maximum: 2147483647 }),
  query('page-size', { type: 'integer', default: 25, minimum: 1, maximum: 1000 }),
  query('pagination-key', { type: 'string', maxLength: 2048 }),
];

/** `PersonalIdentificationData`: its required members, and `socialName`, as the file types them. */
const PERSONAL_IDENTIFICATION = {
  type: 'object',
  required: [
    'updateDateTime',
    'personalId',
    'brandName',
    'civilName',
    'birthDate',
    'documents',
    'hasBrazilianNationality',
    'contacts',
    'companiesCnpj',
  ],
  properties: {
    updateDateTime: { type: 'string', maxLength: 20, pattern: DATE_TIME },
    personalId: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[a-zA-Z0-9][a-zA-Z0-9-]{0,99}$' },
    brandName: { type: 'string', maxLength: 80 },
    civilName: { type: 'string', maxLength: 70 },
    socialName: { type: 'string', maxLength: 70 },
    birthDate: {
      type: 'string',
      maxLength: 10,
      pattern: '^(\\d{4})-(1[0-2]|0?[1-9])-(3[01]|[12][0-9]|0?[1-9])$',
    },
    documents: {
      type: 'object',
      properties: { cpfNumber: { type: 'string', maxLength: 11, pattern: '^\\d{11}$' } },
    },
    hasBrazilianNationality: { type: 'boolean' },
    contacts: {
      type: 'object',
      required: ['postalAddresses', 'phones', 'emails'],
      properties: {
        postalAddresses: { type: 'array', minItems: 0 },
        phones: { type: 'array', minItems: 0 },
        emails: { type: 'array', minItems: 0 },
      },
    },
    companiesCnpj: {
      type: 'array',
      minItems: 1,
      items: { type: 'string', maxLength: 14, pattern: '^\\d{14}$' },
    },
  },
};

const INTERACTION_HEADER = {
  'x-fapi-interaction-id': {
    schema: { type: 'string', pattern: '^[0-9a-fA-F-]{36}$' },
  },
};

/** The file's `ResponseError` (`errors` of one to 13 items with `code`, `title`, `detail`; a `meta`). */
const RESPONSE_ERROR = {
  type: 'object',
  required: ['errors'],
  properties: {
    errors: {
      type: 'array',
      minItems: 1,
      maxItems: 13,
      items: {
        type: 'object',
        required: ['code', 'title', 'detail'],
        properties: {
          code: { type: 'string', maxLength: 255 },
          title: { type: 'string', maxLength: 255 },
          detail: { type: 'string', maxLength: 2048 },
        },
      },
    },
    meta: { type: 'object' },
  },
};

export const CUSTOMERS_DOCUMENT: WrittenDocument = {
  name: `customers-${CUSTOMERS_VERSION}`,
  document: {
    openapi: '3.0.0',
    info: {
      title: 'API Customers - Open Finance Brasil (personal identifications)',
      version: CUSTOMERS_VERSION,
    },
    servers: [{ url: `https://api.banco.com.br${CUSTOMERS_BASE}` }],
    paths: {
      '/personal/identifications': {
        get: {
          operationId: 'customersGetPersonalIdentifications',
          parameters: PARAMETERS,
          responses: {
            '200': {
              description: 'ResponsePersonalCustomersIdentification',
              headers: INTERACTION_HEADER,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['data', 'links', 'meta'],
                    properties: {
                      data: { type: 'array', minItems: 1, items: PERSONAL_IDENTIFICATION },
                      links: {
                        type: 'object',
                        required: ['self'],
                        properties: { self: { type: 'string', maxLength: 2000 } },
                      },
                      meta: {
                        type: 'object',
                        required: ['requestDateTime'],
                        properties: {
                          requestDateTime: { type: 'string', maxLength: 20, pattern: DATE_TIME },
                        },
                      },
                    },
                  },
                },
              },
            },
            default: {
              description: 'ResponseError',
              content: { 'application/json': { schema: RESPONSE_ERROR } },
            },
          },
        },
      },
    },
  },
};

/** `2026-01-15T12:00:00Z`: the file's date-times. */
function zulu(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** A birth date the bank keeps for a sandbox customer: fixed by their CPF, between 1950 and 2004. */
export function birthDateOf(cpf: string): string {
  const digest = createHash('sha256').update(`birth:${cpf}`).digest();
  const year = 1950 + (digest[0]! % 55);
  const month = 1 + (digest[1]! % 12);
  const day = 1 + (digest[2]! % 28);
  return `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/**
 * The identification record of the consent's customer, as `ResponsePersonalCustomersIdentification`: one
 * record (this bank is the one institution that registered the person), with the name the bank has on file.
 */
export function personalIdentification(input: {
  cpf: string;
  name: string;
  bankName: string;
  bankCnpj: string;
  self: URL;
  now: number;
}): Record<string, unknown> {
  return {
    data: [
      {
        updateDateTime: zulu(input.now),
        personalId: `pf-${input.cpf}`,
        brandName: input.bankName.slice(0, 80),
        civilName: input.name.slice(0, 70),
        birthDate: birthDateOf(input.cpf),
        documents: { cpfNumber: input.cpf },
        hasBrazilianNationality: true,
        contacts: { postalAddresses: [], phones: [], emails: [] },
        companiesCnpj: [input.bankCnpj],
      },
    ],
    links: { self: input.self.href },
    meta: { requestDateTime: zulu(input.now) },
  };
}
