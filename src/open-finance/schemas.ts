import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

/*
 * Open Finance Brasil's OpenAPI files (specs/, the repository's one unmodified copy) as each market reads
 * them. Both halves of the consent path start here and share nothing else: the connector checks a bank's
 * answers, the simulated banks check requests and answers. Brazil reads the files as published but for page
 * links; Chile reads them with one adaptation, applied to the parsed document and never to the files
 * (docs/open-finance.md, "Data mapping"):
 * - a RUT (`12345678-9`, `K` allowed) where Brazil has a CNPJ or CPF (`companyCnpj`, `partieCnpjCpf`);
 * - page links may name any URI (both markets): the credit-card file's pattern and the `url` format want a
 *   public DNS name, and a bank's test environment on loopback has only an IP address. The links carry no
 *   data; the connector follows only `next`, and only to the bank's own API origin.
 * Amounts keep Brazil's decimal pattern (`1500.00`; CLP has no minor unit, so its decimals are `.00`).
 */

const SPECS = fileURLToPath(new URL('../../../src/open-finance/specs/', import.meta.url));
export const RUT_PATTERN = '^\\d{1,8}-[\\dK]$';
const RUT_FIELDS = new Set(['companyCnpj', 'partieCnpjCpf']);
const LINK_FIELDS = new Set(['self', 'first', 'prev', 'next', 'last']);

export type OpenFinanceFile = 'accounts-2.4.2' | 'credit-cards-2.3.1';
export type BrasilFile = OpenFinanceFile | 'consents-3.3.1' | 'resources-3.1.0';
/** Whose rules a document follows: Chile's adaptation, or Brazil's own. */
export type Market = 'CL' | 'BR';

type Schema = Record<string, unknown>;

/** The adaptation of one market, as a walk over a parsed OpenAPI document (returns a changed copy). */
function adapt(node: unknown, market: Market, key = ''): unknown {
  if (Array.isArray(node)) return node.map((item) => adapt(item, market));
  if (node === null || typeof node !== 'object') return node;
  const copy: Schema = {};
  for (const [name, value] of Object.entries(node as Schema)) copy[name] = adapt(value, market, name);
  if (market === 'CL' && RUT_FIELDS.has(key) && copy.type === 'string') {
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

/** Chile's reading of a parsed document. */
export const adaptToChile = (node: unknown): unknown => adapt(node, 'CL');
/** Brazil's reading: the files as published but for page links. */
export const adaptLinks = (node: unknown): unknown => adapt(node, 'BR');

const documents = new Map<string, Schema>();

/** A whole OpenAPI document as `market` reads it (parsed once a process; callers get a copy). */
export function openApiDocument(file: BrasilFile, market: Market): Schema {
  const key = `${market}:${file}`;
  let document = documents.get(key);
  if (!document) {
    document = adapt(parse(readFileSync(`${SPECS}${file}.yml`, 'utf8')), market) as Schema;
    documents.set(key, document);
  }
  return structuredClone(document);
}

export interface OpenFinanceValidator {
  /** A validator for a component schema, e.g. `validator('accounts-2.4.2', 'ResponseAccountList')`. */
  (file: OpenFinanceFile, schema: string): ValidateFunction;
}

export interface BrasilValidator {
  (file: BrasilFile, schema: string): ValidateFunction;
}

/** Validators of Brazil's four files as Brazil reads them: the Brazilian bank's requests, tests' answers. */
export function brasilValidator(): BrasilValidator {
  return compile(['accounts-2.4.2', 'credit-cards-2.3.1', 'consents-3.3.1', 'resources-3.1.0'], 'BR');
}

/** Validators of the data files as Chile reads them. */
export function openFinanceValidator(): OpenFinanceValidator {
  return compile(['accounts-2.4.2', 'credit-cards-2.3.1'], 'CL');
}

function compile<F extends BrasilFile>(files: readonly F[], market: Market) {
  // OpenAPI 3.0 keywords (`example`, `nullable` and the like) are not JSON Schema's: strict mode would refuse them.
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  for (const format of ['double', 'int32', 'int64', 'float', 'integer']) ajv.addFormat(format, true);
  for (const file of files)
    ajv.addSchema({ $id: file, components: openApiDocument(file, market).components }, file);
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
