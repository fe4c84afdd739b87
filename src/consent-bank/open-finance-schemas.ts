import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

/*
 * The Open Finance Brasil schemas (specs/, unmodified copies) adapted to Chile, for whoever checks an
 * answer: the tests of the simulated bank, and the consent connector. The adaptation, applied to the
 * parsed files and never to the files:
 * - a RUT (`12345678-9`, `K` allowed) where Brazil has a CNPJ or CPF (`companyCnpj`, `partieCnpjCpf`);
 * - `links` may name any URI: the credit-card file's pattern and the `url` format want a public DNS name,
 *   and a bank on loopback has only an IP address.
 * Amounts keep Brazil's decimal pattern (`1500.00`; CLP has no minor unit, so its decimals are `.00`).
 */

const SPECS = fileURLToPath(new URL('../../../src/consent-bank/specs/', import.meta.url));
export const RUT_PATTERN = '^\\d{1,8}-[\\dK]$';
const RUT_FIELDS = new Set(['companyCnpj', 'partieCnpjCpf']);
const LINK_FIELDS = new Set(['self', 'first', 'prev', 'next', 'last']);

type Schema = Record<string, unknown>;

/** The adaptation, as a walk over a parsed OpenAPI document (returns a changed copy). */
export function adaptToChile(node: unknown, key = ''): unknown {
  if (Array.isArray(node)) return node.map((item) => adaptToChile(item));
  if (node === null || typeof node !== 'object') return node;
  const copy: Schema = {};
  for (const [name, value] of Object.entries(node as Schema)) copy[name] = adaptToChile(value, name);
  if (RUT_FIELDS.has(key) && copy.type === 'string') {
    copy.pattern = RUT_PATTERN;
    delete copy.maxLength;
  }
  if (LINK_FIELDS.has(key) && copy.type === 'string') {
    delete copy.pattern;
    // ajv-formats' `url` refuses an IP address as the host; `uri` is RFC 3986 and takes one.
    if (copy.format === 'url') copy.format = 'uri';
  }
  return copy;
}

export type OpenFinanceFile = 'accounts-2.4.2' | 'credit-cards-2.3.1';
export type BrasilFile = OpenFinanceFile | 'consents-3.3.1' | 'resources-3.1.0';

/** Brazil's files as they are, but for page links (any URI, as in Chile's: a bank on loopback has no DNS name). */
export function adaptLinks(node: unknown, key = ''): unknown {
  if (Array.isArray(node)) return node.map((item) => adaptLinks(item));
  if (node === null || typeof node !== 'object') return node;
  const copy: Schema = {};
  for (const [name, value] of Object.entries(node as Schema)) copy[name] = adaptLinks(value, name);
  if (LINK_FIELDS.has(key) && copy.type === 'string') {
    delete copy.pattern;
    if (copy.format === 'url') copy.format = 'uri';
  }
  return copy;
}

export interface OpenFinanceValidator {
  /** A validator for a component schema, e.g. `validator('accounts-2.4.2', 'ResponseAccountList')`. */
  (file: OpenFinanceFile, schema: string): ValidateFunction;
}

export interface BrasilValidator {
  (file: BrasilFile, schema: string): ValidateFunction;
}

/**
 * Validators for the Brazilian bank: the four files with CPF, CNPJ and BRL as Brazil has them (only page links
 * adapted, `adaptLinks`). The bank checks every consent request with it; tests check every answer.
 */
export function brasilValidator(): BrasilValidator {
  return compile(['accounts-2.4.2', 'credit-cards-2.3.1', 'consents-3.3.1', 'resources-3.1.0'], adaptLinks);
}

export function openFinanceValidator(): OpenFinanceValidator {
  return compile(['accounts-2.4.2', 'credit-cards-2.3.1'], adaptToChile);
}

function compile<F extends string>(files: readonly F[], adapt: (node: unknown) => unknown) {
  // OpenAPI 3.0 keywords (`example`, `nullable` and the like) are not JSON Schema's: strict mode would refuse them.
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  for (const format of ['double', 'int32', 'int64', 'float', 'integer']) ajv.addFormat(format, true);
  for (const file of files) {
    const document = adapt(parse(readFileSync(`${SPECS}${file}.yml`, 'utf8'))) as Schema;
    ajv.addSchema({ $id: file, components: document.components }, file);
  }
  const cache = new Map<string, ValidateFunction>();
  return (file: F, schema: string): ValidateFunction => {
    const id = `${file}#/components/schemas/${schema}`;
    let validate = cache.get(id);
    if (!validate) {
      validate = ajv.getSchema(id);
      if (!validate) throw new Error(`No schema ${schema} in ${file}`);
      cache.set(id, validate);
    }
    return validate;
  };
}
