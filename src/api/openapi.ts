import type { AnyRoute, JsonSchema } from './route.js';

export const OPENAPI_VERSION = '1.0.0';

/** Schemas shared by every capability's routes; capabilities add theirs through `components`. */
export const baseComponents: Record<string, JsonSchema> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['type', 'code', 'message'],
        properties: {
          type: {
            enum: [
              'invalid_request_error',
              'authentication_error',
              'permission_error',
              'rate_limit_error',
              'api_error',
            ],
          },
          code: { type: 'string' },
          message: { type: 'string' },
          param: { type: 'string' },
          request_id: { type: 'string' },
        },
      },
    },
  },
};

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

const rateHeaders = {
  'X-RateLimit-Limit': {
    description: 'Effective limit of the group, requests per minute',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Remaining': {
    description: 'Requests left before the bucket is empty',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Reset': {
    description: 'Unix time at which the bucket is full again',
    schema: { type: 'integer' },
  },
};

const pageHeaders = {
  'X-Total-Count': { description: 'Number of results matching the query', schema: { type: 'integer' } },
  Link: {
    description: 'RFC 5988 links: first, prev, next, last (absolute URLs)',
    schema: { type: 'string' },
  },
};

/**
 * The router reads a missing body as `{}`, so a body whose fields are all optional may be left out (a widget
 * token with every default); the document says so rather than demanding one.
 */
function bodyRequired(schema: JsonSchema): boolean {
  return ((schema.required as unknown[] | undefined)?.length ?? 0) > 0 || Boolean(schema.minProperties);
}

/** The OpenAPI 3.1 document, generated from the same route declarations the router mounts. */
export function buildOpenApi(
  routes: AnyRoute[],
  components: Record<string, JsonSchema>,
  baseUrl: string,
  brand: string,
) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const authenticated = route.auth !== 'none';
    const parameters = [
      ...Object.entries((route.params?.properties ?? {}) as Record<string, JsonSchema>).map(
        ([name, schema]) => ({
          name,
          in: 'path',
          required: true,
          schema,
        }),
      ),
      ...Object.entries((route.query?.properties ?? {}) as Record<string, JsonSchema>).map(
        ([name, schema]) => ({
          name,
          in: 'query',
          required: ((route.query?.required ?? []) as string[]).includes(name),
          schema,
        }),
      ),
    ];
    if (route.method === 'post') {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        schema: { type: 'string', maxLength: 255 },
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, response] of Object.entries(route.responses)) {
      const headers: Record<string, unknown> = authenticated ? { ...rateHeaders } : {};
      if (response.headers?.includes('pagination')) Object.assign(headers, pageHeaders);
      responses[status] = {
        description: response.description,
        ...(Object.keys(headers).length ? { headers } : {}),
        ...(response.schema ? { content: { 'application/json': { schema: response.schema } } } : {}),
      };
    }
    responses['400'] ??= errorResponse('Invalid request');
    if (authenticated) {
      responses['401'] = errorResponse(
        'Missing, malformed, unknown, revoked or expired credential (`invalid_credential`)',
      );
      responses['403'] = errorResponse(
        'Credential of the wrong kind (`insufficient_scope`) or mode (`wrong_mode`)',
      );
      responses['429'] = errorResponse('Rate limit exceeded (`rate_limit_exceeded`); see `Retry-After`');
    }
    responses['500'] = errorResponse('Unexpected error; the body carries a request id');
    responses['503'] ??= errorResponse(
      'The database is not answering (`service_unavailable`); retry after `Retry-After` seconds',
    );
    (paths[route.path] ??= {})[route.method] = {
      operationId: route.operationId,
      summary: route.summary,
      tags: [route.tag],
      ...(authenticated ? { 'x-credentials': route.auth } : { security: [] }),
      ...(parameters.length ? { parameters } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: bodyRequired(route.body),
              content: { 'application/json': { schema: route.body } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Bank account aggregation API',
      version: OPENAPI_VERSION,
      description: `Keys look like \`${brand}_sk_test_…\`; webhooks are signed in the \`${brand[0]!.toUpperCase()}${brand.slice(1)}-Signature\` header.`,
    },
    servers: [{ url: baseUrl }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { ...baseComponents, ...components },
    },
  };
}
