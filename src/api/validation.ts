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
  return (value) => {
    if (where === 'body' && value === undefined && schema.type === 'object') value = {};
    if (validate(value)) return value;
    throw toApiError(validate.errors?.[0], where);
  };
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
