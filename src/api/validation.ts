import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { errors } from '../errors/api-error.js';
import type { JsonSchema } from './route.js';

/** Query strings and path parameters arrive as text, so their validator coerces; bodies are JSON and do not. */
const strictAjv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: true });
const coercingAjv = new Ajv({ allErrors: false, strict: false, coerceTypes: true, useDefaults: true });
addFormats.default(strictAjv);
addFormats.default(coercingAjv);

export type Validator = (value: unknown) => unknown;

export function compileValidator(
  schema: JsonSchema,
  where: 'query' | 'params' | 'body',
  components: JsonSchema,
): Validator {
  const ajv = where === 'body' ? strictAjv : coercingAjv;
  const validate: ValidateFunction = ajv.compile({ ...schema, components });
  const numeric = where === 'body' ? [] : numericProperties(schema);
  return (value) => {
    if (where === 'body' && value === undefined && schema.type === 'object') value = {};
    for (const [name, type] of numeric) {
      const text = (value as Record<string, unknown> | undefined)?.[name];
      if (typeof text === 'string' && !DECIMAL[type].test(text))
        throw errors.invalidParameter(
          name,
          `Invalid ${name}: must be ${type === 'integer' ? 'a whole number' : 'a number'} in decimal digits.`,
        );
    }
    if (!validate(value)) throw toApiError(validate.errors?.[0], where);
    const withNul = pathToNul(value);
    if (withNul) {
      const param = withNul.join('.');
      throw param
        ? errors.invalidParameter(param, `Invalid ${param}: must not contain the NUL character (U+0000).`)
        : errors.badRequest('parameter_invalid', `The request ${where} must not contain the NUL character.`);
    }
    return value;
  };
}

/** The first way a value breaks a schema, for a caller that words it for a person (the console's forms). */
export interface SchemaIssue {
  /** The property, dotted (`enabled_events`); empty for the value itself. */
  param: string;
  /** ajv's keyword (`required`, `maxLength`, `minItems`, `pattern`, …), or `nul` for a NUL character. */
  keyword: string;
  /** The keyword's bound where it has one (`maxLength`'s 2048). */
  limit?: number;
}

/** A check of values against `schema`, as a JSON body is checked (no coercion), the NUL rule included. */
export function compileChecker(schema: JsonSchema): (value: unknown) => SchemaIssue | null {
  const validate = strictAjv.compile(schema);
  return (value) => {
    if (!validate(value)) {
      const issue = validate.errors?.[0];
      const path = (issue?.instancePath ?? '').split('/').filter(Boolean);
      if (issue?.keyword === 'required') path.push(String(issue.params.missingProperty));
      const limit = issue?.params.limit;
      return {
        param: path.join('.'),
        keyword: issue?.keyword ?? 'invalid',
        ...(typeof limit === 'number' && { limit }),
      };
    }
    const withNul = pathToNul(value);
    return withNul ? { param: withNul.join('.'), keyword: 'nul' } : null;
  };
}

/**
 * What a number in a query string or a path may look like. ajv's coercion is JavaScript's `Number()`, which
 * also takes `0x10`, `1e2`, ` 1` and `0b1`: numbers the documentation never promised (api.md: "a whole
 * number").
 */
const DECIMAL = { integer: /^-?[0-9]{1,16}$/, number: /^-?[0-9]{1,16}(\.[0-9]{1,16})?$/ } as const;

/** The query's or path's properties that hold a number, by name. */
function numericProperties(schema: JsonSchema): [string, keyof typeof DECIMAL][] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  return Object.entries(properties).flatMap(([name, property]) =>
    property.type === 'integer' || property.type === 'number'
      ? [[name, property.type] as [string, keyof typeof DECIMAL]]
      : [],
  );
}

/**
 * PostgreSQL's text cannot hold U+0000 (the driver's error would be a 500) and SQLite would store it as
 * given, so a NUL anywhere is refused up front on both engines. Bodies are depth-capped by the reader.
 */
function pathToNul(value: unknown, path: string[] = []): string[] | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (value === null || typeof value !== 'object') return null;
  for (const [key, item] of Object.entries(value)) {
    if (key.includes('\u0000')) return [...path, key];
    const found = pathToNul(item, [...path, key]);
    if (found) return found;
  }
  return null;
}

function toApiError(issue: ErrorObject | undefined, where: string) {
  if (!issue) return errors.badRequest('parameter_invalid', `The request ${where} is invalid.`);
  const path = issue.instancePath.split('/').filter(Boolean).join('.');
  if (issue.keyword === 'required') {
    const param = [path, issue.params.missingProperty].filter(Boolean).join('.');
    return errors.missingParameter(param);
  }
  if (issue.keyword === 'additionalProperties') {
    const param = [path, issue.params.additionalProperty].filter(Boolean).join('.');
    return errors.invalidParameter(param, `Unknown parameter: ${param}.`);
  }
  if (path === '') {
    return errors.badRequest('parameter_invalid', `The request ${where} ${issue.message ?? 'is invalid'}.`);
  }
  const detail =
    issue.keyword === 'enum'
      ? `must be one of ${(issue.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
      : issue.message;
  return errors.invalidParameter(path, `Invalid ${path}: ${detail}.`);
}
