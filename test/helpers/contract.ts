import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { allRoutes, components } from '../../src/http/catalogue.js';
import { answeredStatuses, baseComponents } from '../../src/http/openapi.js';

/**
 * Checks a response against the OpenAPI document for its route: its status must be one the document
 * declares for the operation (errors included: an undeclared 404 or 413 fails), and its body must match
 * that status's schema. So every API test also proves the server keeps its published contract. Unmatched
 * paths (404s, 405s) are checked against the error envelope.
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
  if (!match) {
    if (status >= 400 && status !== 503 && !errorValidator(body))
      return `error body breaks the envelope: ${ajv.errorsText(errorValidator.errors)}`;
    return null;
  }
  // The document's answers: the route's own, and those its declaration implies (openapi.ts).
  const declared = answeredStatuses(match.route)[status];
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
