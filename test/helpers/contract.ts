import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { allRoutes, components } from '../../src/api/catalogue.js';
import { baseComponents } from '../../src/api/openapi.js';

/**
 * Checks a response against the OpenAPI document's schema for its route and status, so every API test also
 * proves the server keeps its published contract. Unmatched paths (404s) are checked against the error
 * envelope.
 */
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema({ $id: 'doc', components: { schemas: { ...baseComponents, ...components } } });

const compiled = new Map<string, ValidateFunction>();
const errorValidator = ajv.compile({ $ref: 'doc#/components/schemas/Error' });

function resolveRefs(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/'));
}

const matchers = allRoutes.map((route) => ({
  route,
  pattern: new RegExp('^' + route.path.replace(/\{\w+\}/g, '[^/]+') + '$'),
}));

export function contractViolation(
  method: string,
  path: string,
  status: number,
  body: unknown,
): string | null {
  const pathname = path.split('?')[0]!;
  const match = matchers.find((m) => m.route.method === method.toLowerCase() && m.pattern.test(pathname));
  if (status >= 400 && status !== 503)
    return errorValidator(body)
      ? null
      : `error body breaks the envelope: ${ajv.errorsText(errorValidator.errors)}`;
  if (!match) return null;
  const declared = match.route.responses[status];
  if (!declared)
    return `${method} ${match.route.path} answered ${status}, which the document does not declare`;
  if (!declared.schema) return null;
  const key = `${match.route.operationId} ${status}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(resolveRefs(declared.schema) as object);
    compiled.set(key, validate);
  }
  return validate(body)
    ? null
    : `${method} ${match.route.path} ${status} breaks its schema: ${ajv.errorsText(validate.errors)}`;
}
