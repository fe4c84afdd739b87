import type { AnyRoute, JsonSchema } from '../api/route.js';

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

type DeclaredResponse = AnyRoute['responses'][number];

const errorResponse = (description: string, headers?: string[]): DeclaredResponse => ({
  description,
  schema: { $ref: '#/components/schemas/Error' },
  ...(headers ? { headers } : {}),
});

/** Statuses the HTTP server answers itself, before any route runs (server.ts): no rate-limit headers. */
const SERVER_LEVEL = new Set([408, 431]);

const IDEMPOTENCY_CONFLICT =
  '`idempotency_key_reused` (the same `Idempotency-Key` with another body or credential) or `idempotency_key_in_use` (the first request is still running; see `Retry-After`)';

/** Whether the query or body requires an id of ours (a pattern such as `^link_[0-9a-f]{16}$`). */
function requiresReference(route: AnyRoute): boolean {
  return [route.query, route.body].some((schema) => {
    const properties = (schema?.properties ?? {}) as Record<string, JsonSchema>;
    return ((schema?.required ?? []) as string[]).some((name) =>
      /^\^[a-z]+_\[0-9a-f\]\{16\}\$$/.test(String(properties[name]?.pattern ?? '')),
    );
  });
}

/**
 * Every status the server can answer for a route: the route's own answers, then those that follow from
 * its declaration, as the router and the middleware give them (router.ts, body.ts, idempotency.ts,
 * errors.ts, server.ts). The document publishes these, and the tests' contract check fails on any other.
 */
export function answeredStatuses(route: AnyRoute): Record<string, DeclaredResponse> {
  const authenticated = route.auth !== 'none';
  const takesBody = route.method === 'post' || route.method === 'patch';
  const answers: Record<string, DeclaredResponse> = {};
  for (const [status, response] of Object.entries(route.responses)) answers[status] = response;
  const add = (status: number, response: DeclaredResponse) => (answers[status] ??= response);

  add(
    400,
    errorResponse(
      takesBody
        ? 'A path, query or body value fails validation or is unknown (`parameter_invalid`, `parameter_missing`), or the body is not JSON (`invalid_json`)'
        : 'A path or query value fails validation or is unknown (`parameter_invalid`, `parameter_missing`)',
    ),
  );
  if (authenticated) {
    add(
      401,
      errorResponse('Missing, malformed, unknown, revoked or expired credential (`invalid_credential`)'),
    );
    add(
      403,
      errorResponse(
        route.browser
          ? 'Credential of the wrong kind (`insufficient_scope`) or mode (`wrong_mode`), or a page whose origin is not allowed (`origin_not_allowed`)'
          : 'Credential of the wrong kind (`insufficient_scope`) or mode (`wrong_mode`)',
      ),
    );
  }
  // A path id, or a required id in the query or body (`link_id`), names a resource the caller must own:
  // another organisation's, or none, is 404. An optional id is a filter (`GET /v1/events?link_id=`); a
  // route that looks one up declares its 404 itself.
  if (Object.keys((route.params?.properties ?? {}) as object).length > 0 || requiresReference(route))
    add(404, errorResponse("No such resource, or another organisation's (`resource_missing`)"));
  if (authenticated && route.method === 'post') {
    const own = answers['409'];
    answers['409'] = own
      ? { ...own, description: `${own.description}; or ${IDEMPOTENCY_CONFLICT}`, headers: ['retry-after'] }
      : errorResponse(IDEMPOTENCY_CONFLICT, ['retry-after']);
  }
  add(408, errorResponse('The headers or the whole request took too long (`request_timeout`)'));
  if (takesBody) {
    add(413, errorResponse('The body exceeds `api.bodyLimitBytes` (`request_too_large`)'));
    add(415, errorResponse('A body that is not `application/json` (`unsupported_media_type`)'));
  }
  if (authenticated)
    add(
      429,
      errorResponse('Rate limit exceeded (`rate_limit_exceeded`); see `Retry-After`', ['retry-after']),
    );
  add(431, errorResponse('The request line and headers exceed 16 KiB (`request_header_fields_too_large`)'));
  add(500, errorResponse('Unexpected error (`internal_error`); the body carries a request id'));
  add(
    503,
    errorResponse(
      'The database is not answering (`service_unavailable`); retry after `Retry-After` seconds',
      ['retry-after'],
    ),
  );
  // In status order, as a reader scans them.
  return Object.fromEntries(Object.entries(answers).sort(([a], [b]) => Number(a) - Number(b)));
}

/** Response headers, declared once under `components.headers` and referred to from each response. */
const headerComponents = {
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
  'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
  'X-Total-Count': { description: 'Number of results matching the query', schema: { type: 'integer' } },
  Link: {
    description: 'RFC 5988 links: first, prev, next, last (absolute URLs)',
    schema: { type: 'string' },
  },
};

const headerRefs = (...names: (keyof typeof headerComponents)[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

const rateHeaders = headerRefs('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset');
const retryAfterHeader = headerRefs('Retry-After');
const pageHeaders = headerRefs('X-Total-Count', 'Link');

/** Each operation's tag, described once: the groups a reader of the document sees. */
const TAGS: Record<string, string> = {
  health: 'Liveness of the API and its database',
  institutions: 'The banks, their products and health',
  links: "An end user's connection to one bank: create, read, pause, resume, delete, backfill",
  accounts: "A link's accounts and balances",
  movements: "An account's movements",
  income: 'The income snapshot of a link',
  refresh_intents: 'On-demand syncs, and the MFA step some banks ask for',
  widget: 'Widget tokens for the hosted widget, and exchange tokens for the links it makes',
  events: 'Everything that happened, as webhooks deliver it',
  webhooks: 'Webhook endpoints, deliveries, redelivery and test events',
  meta: 'This document',
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
    for (const [status, response] of Object.entries(answeredStatuses(route))) {
      // Every answer of an authenticated route carries the bucket's headers, refusals included (router.ts);
      // those the HTTP server gives before any route runs do not.
      const headers: Record<string, unknown> =
        authenticated && !SERVER_LEVEL.has(Number(status)) ? { ...rateHeaders } : {};
      if (response.headers?.includes('pagination')) Object.assign(headers, pageHeaders);
      if (response.headers?.includes('retry-after')) Object.assign(headers, retryAfterHeader);
      responses[status] = {
        description: response.description,
        ...(Object.keys(headers).length ? { headers } : {}),
        ...(response.schema ? { content: { 'application/json': { schema: response.schema } } } : {}),
      };
    }
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
    tags: [...new Set(routes.map((route) => route.tag))].map((name) => ({
      name,
      ...(TAGS[name] ? { description: TAGS[name] } : {}),
    })),
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      headers: headerComponents,
      schemas: { ...baseComponents, ...components },
    },
  };
}
