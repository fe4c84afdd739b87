import { unescape } from 'node:querystring';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { ApiError, errors } from '../errors/api-error.js';
import type { RateGroup, RateLimit } from '../config/defaults.js';
import { rateGroupFor } from '../ratelimit/groups.js';
import { RefusalLimiter } from '../ratelimit/refusals.js';
import type { Decision } from '../ratelimit/token-bucket.js';
import type { CredentialKind, Principal } from '../auth/principal.js';
import { jsonBodyReader } from './body.js';
import { allowPageToRead, answerPreflight } from './cors.js';
import { withIdempotency } from './middleware/idempotency.js';
import { koaPath, type AnyRoute, type JsonSchema } from './route.js';
import type { AppServices } from './services.js';
import { compileValidator, type Validator } from './validation.js';

const KIND_NAMES: Record<string, string> = {
  secret_key: 'a secret key (sk_)',
  publishable_key: 'a publishable key (pk_)',
  widget_token: 'a widget token',
  exchange_token: 'an exchange token',
};

export function buildRouter(
  services: AppServices,
  routes: AnyRoute[],
  components: Record<string, JsonSchema>,
): Router {
  const router = new Router();
  const readBody = jsonBodyReader(services.config.api.bodyLimitBytes);
  const refusals = new RefusalLimiter(services.config.auth.refusedRequests);
  const allowedOrigins = services.config.widget.allowedOrigins;

  for (const route of routes) {
    const validate = {
      params: route.params ? compileValidator(route.params, 'params', components) : null,
      query: route.query
        ? compileValidator(route.query, 'query', components)
        : compileValidator({ type: 'object', additionalProperties: false }, 'query', components),
      body: route.body ? compileValidator(route.body, 'body', components) : null,
    } satisfies Record<string, Validator | null>;
    const validQueries = new ValidQueries();
    const group = route.rateGroup ?? rateGroupFor(route.method, route.path);
    const hasBody = route.method === 'post' || route.method === 'patch';

    const handle = async (ctx: Context) => {
      const principal =
        route.auth === 'none' ? undefined : await authorise(ctx, services, refusals, route.auth, group);
      let body: unknown = undefined;
      if (hasBody && !isEmptyBody(ctx)) {
        rejectNonJson(ctx);
        body = await readBody(ctx);
      }
      // An idempotent POST runs with a database that keeps its answer with its change (idempotency.ts).
      const run = async (requestServices: AppServices = services) => {
        const known = validQueries.get(ctx.querystring);
        if (!known) rejectMalformedQuery(ctx.querystring);
        const input = {
          params: validate.params ? validate.params({ ...ctx.params }) : ctx.params,
          query: known
            ? copyQuery(known)
            : validQueries.remember(ctx.querystring, validate.query({ ...ctx.query })),
          body: validate.body ? validate.body(isEmptyBody(ctx) ? undefined : body) : undefined,
          principal: principal!,
          services: requestServices,
          ctx,
          now: services.clock.now(),
        };
        if (!validate.body && hasBody && !isEmptyBody(ctx) && !isEmptyObject(body)) {
          throw errors.badRequest('parameter_invalid', 'This endpoint takes no request body.');
        }
        const result = await route.handler(input);
        ctx.status = result.status ?? 200;
        for (const [name, value] of Object.entries(result.headers ?? {})) ctx.set(name, value);
        ctx.body = result.body;
      };
      if (principal && route.method === 'post') await withIdempotency(ctx, services, principal, body, run);
      else await run();
    };

    if (route.browser) {
      router.options(koaPath(route.path), async (ctx: Context, next: Next) => {
        ctx.state.routePath = route.path;
        answerPreflight(ctx, route.method.toUpperCase(), allowedOrigins);
        return next();
      });
    }
    // The route answers, so nothing after it runs: the widget's router, the 405/501 envelope and
    // `allowedMethods` (app.ts) act only on requests no route answered (no two routes match one request), and
    // passing every answered request through them cost a second router's match and three middleware calls.
    router[route.method](koaPath(route.path), async (ctx: Context) => {
      ctx.state.routePath = route.path;
      try {
        await handle(ctx);
      } finally {
        // Errors included: a page must be able to read why its request was refused.
        if (route.browser) allowPageToRead(ctx, allowedOrigins);
      }
    });
  }
  return router;
}

/**
 * Who is calling, and whether this route accepts that kind of credential. Only then is the route's group
 * charged to the key: a request refused for its credential is charged to a bucket of refusals instead
 * (refusals.ts), so it never spends another key's budget.
 */
async function authorise(
  ctx: Context,
  services: AppServices,
  refusals: RefusalLimiter,
  accepted: CredentialKind[],
  group: RateGroup,
): Promise<Principal> {
  const now = services.clock.now();
  let principal: Principal;
  try {
    principal = await services.authenticator.authenticate(ctx.get('Authorization') || undefined);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401)
      enforce(
        ctx,
        await refusals.takeForAddress(ctx.ip, now),
        'refused requests from this address',
        refusals.limit,
      );
    throw error;
  }
  ctx.state.principal = principal;
  if (!accepted.includes(principal.kind)) {
    enforce(
      ctx,
      await refusals.takeForCredential(principal.credentialId, now),
      'refused requests with this credential',
      refusals.limit,
    );
    throw errors.insufficientScope(
      `This endpoint accepts ${accepted.map((kind) => KIND_NAMES[kind]).join(' or ')}, not ${KIND_NAMES[principal.kind]}.`,
    );
  }
  const limit = principal.limits[group];
  enforce(
    ctx,
    await services.rateLimiter.take(`${principal.bucketId}:${group}`, limit, now),
    `requests in the ${group} group`,
    limit,
  );
  return principal;
}

/** Sets the spec's rate-limit headers from a bucket's decision, and refuses the request when it is empty. */
function enforce(ctx: Context, decision: Decision, what: string, limit: RateLimit): void {
  ctx.set('X-RateLimit-Limit', String(decision.limit));
  ctx.set('X-RateLimit-Remaining', String(decision.remaining));
  ctx.set('X-RateLimit-Reset', String(decision.resetAt));
  if (!decision.allowed) {
    throw new ApiError(
      429,
      'rate_limit_error',
      'rate_limit_exceeded',
      `Too many ${what} (${limit.perMinute} per minute, burst ${limit.burst}). Retry after ${decision.retryAfter} s.`,
      undefined,
      { 'Retry-After': String(decision.retryAfter) },
    );
  }
}

/** Query strings a route kept at most: a client's few shapes of request, not every page it reads. */
const QUERIES_KEPT = 1000;

/**
 * A route's valid query strings and what validation made of each. The validator's answer is a function of
 * the query string alone (the text is parsed, coerced and defaulted, nothing else is read), so a query
 * string seen before is not parsed and validated again: that cost about a tenth of the stack's own CPU on a
 * list request (bench/movements.ts). Only valid ones are kept; an invalid one is refused afresh each time.
 */
class ValidQueries {
  private readonly queries = new Map<string, Record<string, unknown>>();

  get(text: string): Record<string, unknown> | undefined {
    return this.queries.get(text);
  }

  /** Keeps a copy of `query`, the validator's answer for `text` (the request has `query` itself). */
  remember(text: string, query: unknown): Record<string, unknown> {
    if (this.queries.size >= QUERIES_KEPT) this.queries.clear();
    this.queries.set(text, copyQuery(query as Record<string, unknown>));
    return query as Record<string, unknown>;
  }
}

/** A request's own copy of a validated query: its values are text, numbers, booleans or lists of them. */
function copyQuery(query: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const name in query) {
    const value = query[name];
    copy[name] = Array.isArray(value) ? [...(value as unknown[])] : value;
  }
  return copy;
}

function isEmptyBody(ctx: Context): boolean {
  const length = ctx.get('Content-Length');
  return (length === '' || length === '0') && ctx.get('Transfer-Encoding') === '';
}

function isEmptyObject(value: unknown): boolean {
  return (
    value === undefined || (typeof value === 'object' && value !== null && Object.keys(value).length === 0)
  );
}

/**
 * Node's query parser turns bytes that are not UTF-8 into U+FFFD and keeps a broken escape (`%`, `%zz`) as
 * text, so a filter or a stored value would get characters the client never sent; refuse both instead, as
 * a body that is not UTF-8 is refused.
 */
function rejectMalformedQuery(querystring: string): void {
  if (!querystring.includes('%')) return;
  for (const pair of querystring.split('&')) {
    try {
      decodeURIComponent(pair);
    } catch {
      const name = unescape(pair.split('=', 1)[0]!.replace(/\+/g, ' '));
      throw errors.invalidParameter(name, `Invalid ${name}: the query string is not percent-encoded UTF-8.`);
    }
  }
}

function rejectNonJson(ctx: Context): void {
  if (!ctx.is('application/json')) {
    throw new ApiError(
      415,
      'invalid_request_error',
      'unsupported_media_type',
      'Send request bodies as application/json.',
    );
  }
}
