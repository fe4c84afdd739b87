import { unescape } from 'node:querystring';
import type { Context, Middleware } from 'koa';
import { ApiError, errors } from '../errors/api-error.js';
import type { RateGroup, RateLimit } from '../config/defaults.js';
import { rateGroupFor } from '../ratelimit/groups.js';
import { RefusalLimiter } from '../ratelimit/refusals.js';
import { organisationLimit } from '../ratelimit/overrides.js';
import type { Decision } from '../ratelimit/token-bucket.js';
import type { CredentialKind, Principal } from '../auth/principal.js';
import { jsonBodyReader } from '../api/body.js';
import { allowPageToRead, answerPreflight } from '../api/cors.js';
import { withIdempotency } from '../api/idempotency.js';
import type { AnyRoute, JsonSchema } from '../api/route.js';
import { RouteTable, type TableEntry } from './route-table.js';
import { clientAddress } from '../net/client-address.js';
import type { AppServices } from '../api/services.js';
import { compileValidator, type Validator } from '../api/validation.js';

const KIND_NAMES: Record<string, string> = {
  secret_key: 'a secret key (sk_)',
  publishable_key: 'a publishable key (pk_)',
  widget_token: 'a widget token',
  exchange_token: 'an exchange token',
};

/** What answers one method and path: the route's handler, or a browser route's preflight. */
type Endpoint = (ctx: Context, params: Record<string, string>) => Promise<void> | void;

/** koa-router's list of methods, kept: on a known path, a method outside it is 501 rather than 405. */
const KNOWN_METHODS = ['HEAD', 'OPTIONS', 'GET', 'PUT', 'PATCH', 'POST', 'DELETE'];

/**
 * The API's routes as one middleware: a request for a route is answered here and goes no further; any other
 * passes on (the widget's and the console's routers, then the 404). A known path asked with another method
 * is answered here too: OPTIONS with `Allow`, a method of the list with 405, any other with 501.
 */
export function apiRoutes(
  services: AppServices,
  routes: AnyRoute[],
  components: Record<string, JsonSchema>,
): Middleware {
  const entries: TableEntry<Endpoint>[] = [];
  const allowedOrigins = services.config.widget.allowedOrigins;
  const context = {
    services,
    readBody: jsonBodyReader(services.config.api.bodyLimitBytes),
    refusals: new RefusalLimiter(services.config.auth.refusedRequests),
  };
  for (const route of routes) {
    if (route.browser) {
      entries.push({
        method: 'OPTIONS',
        path: route.path,
        route: (ctx) => {
          ctx.state.routePath = route.path;
          answerPreflight(ctx, route.method.toUpperCase(), allowedOrigins);
        },
      });
    }
    const handle = routeHandler(route, components, context);
    entries.push({
      method: route.method.toUpperCase(),
      path: route.path,
      route: route.browser
        ? async (ctx, params) => {
            try {
              await handle(ctx, params);
            } finally {
              // Errors included: a page must be able to read why its request was refused.
              allowPageToRead(ctx, allowedOrigins);
            }
          }
        : handle,
    });
  }
  const table = new RouteTable(entries);

  return (ctx, next) => {
    const found = table.match(ctx.method, ctx.path);
    if (found.kind === 'route') return found.route(ctx, found.params);
    if (found.kind === 'none') return next();
    const allow = found.allowed.join(', ');
    ctx.set('Allow', allow);
    if (!KNOWN_METHODS.includes(ctx.method)) throw methodRefused(501, allow);
    if (ctx.method !== 'OPTIONS') throw methodRefused(405, allow);
    ctx.status = 200;
    ctx.body = '';
  };
}

/** The envelope for a known path asked with a method it does not have (405) or no route has (501). */
export function methodRefused(status: 405 | 501, allow: string): ApiError {
  if (status === 501)
    return errors.badRequest('method_not_implemented', 'This HTTP method is not supported.');
  return new ApiError(
    405,
    'invalid_request_error',
    'method_not_allowed',
    'This method is not allowed on this URL; see the Allow header.',
    undefined,
    { Allow: allow },
  );
}

interface RouterContext {
  services: AppServices;
  readBody: (ctx: Context) => Promise<unknown>;
  refusals: RefusalLimiter;
}

function routeHandler(
  route: AnyRoute,
  components: Record<string, JsonSchema>,
  { services, readBody, refusals }: RouterContext,
): Endpoint {
  const validate = {
    params: route.params ? compileValidator(route.params, 'params', components) : null,
    query: route.query
      ? compileValidator(route.query, 'query', components)
      : compileValidator({ type: 'object', additionalProperties: false }, 'query', components),
    body: route.body ? compileValidator(route.body, 'body', components) : null,
  } satisfies Record<string, Validator | null>;
  const validQueries = new KnownValid();
  // Only reads remember their ids: the same ones are read again and again, where a write's may be a
  // one-time secret (an exchange token is its own path parameter) that must not outlive its request.
  const validParams = route.method === 'get' ? new KnownValid() : null;
  const group = route.rateGroup ?? rateGroupFor(route.method, route.path);
  const hasBody = route.method === 'post' || route.method === 'patch';
  const validParamsOf = (params: Record<string, string>) => {
    if (!validParams) return validate.params!({ ...params });
    const text = paramsText(params);
    return validParams.get(text) ?? validParams.remember(text, validate.params!({ ...params }));
  };

  return async (ctx, params) => {
    ctx.state.routePath = route.path;
    ctx.params = params;
    const principal =
      route.auth === 'none' ? undefined : await authorise(ctx, services, refusals, route.auth, group);
    let body: unknown = undefined;
    if (hasBody && !isEmptyBody(ctx)) {
      rejectNonJson(ctx);
      body = await readBody(ctx);
    }
    // An idempotent POST runs with a database that keeps its answer with its change (idempotency.ts).
    const run = async (requestServices: AppServices = services) => {
      const knownQuery = validQueries.get(ctx.querystring);
      if (!knownQuery) rejectMalformedQuery(ctx.querystring);
      const input = {
        params: validate.params ? validParamsOf(params) : params,
        query: knownQuery ?? validQueries.remember(ctx.querystring, validate.query({ ...ctx.query })),
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
    principal = await services.authenticator.authenticate(ctx.req.headers.authorization || undefined);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401)
      enforce(
        ctx,
        await refusals.takeForAddress(clientAddress(ctx), now),
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
  const own = await services.rateLimiter.take(`${principal.bucketId}:${group}`, limit, now);
  if (!own.allowed || !principal.organisation) {
    enforce(ctx, own, `requests in the ${group} group`, limit);
    return principal;
  }
  // Then the organisation's bucket, which all its keys of this mode share (issue 44, item 2): the key's own
  // bucket first, so a key over its own limit spends nothing of its siblings' budget.
  const shared = organisationLimit(principal.organisation.ceilings[group], limit);
  const whole = await services.rateLimiter.take(`${principal.organisation.bucketId}:${group}`, shared, now);
  // The headers describe the key's own bucket while the organisation's has room (each bucket's counts are
  // exact, a mix of the two is not); a refusal by the organisation's says so, with its Retry-After.
  if (!whole.allowed) enforce(ctx, whole, `requests of this organisation in the ${group} group`, shared);
  else enforce(ctx, own, `requests in the ${group} group`, limit);
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

/** Texts a route kept at most: a client's few shapes of request and the ids it reads most, not every one. */
const INPUTS_KEPT = 1000;

/**
 * A route's valid query strings, or path parameters, and what validation made of each. The validator's
 * answer is a function of the text alone (it is parsed, coerced and defaulted, nothing else is read), so a
 * text seen before is not parsed and validated again: that cost about a tenth of the stack's own CPU on a
 * list request (bench/movements.ts), and 3 µs of a one-row GET's. Only valid ones are kept; an invalid one is
 * refused afresh each time.
 */
class KnownValid {
  private readonly inputs = new Map<string, Record<string, unknown>>();

  get(text: string): Record<string, unknown> | undefined {
    const known = this.inputs.get(text);
    return known && copyInput(known);
  }

  /** Keeps a copy of `input`, the validator's answer for `text` (the request has `input` itself). */
  remember(text: string, input: unknown): Record<string, unknown> {
    if (this.inputs.size >= INPUTS_KEPT) this.inputs.clear();
    this.inputs.set(text, copyInput(input as Record<string, unknown>));
    return input as Record<string, unknown>;
  }
}

/** Path parameters as one text: the one value, or the list of them (a value may hold any character). */
function paramsText(params: Record<string, string>): string {
  const values = Object.values(params);
  return values.length === 1 ? values[0]! : JSON.stringify(values);
}

/** A request's own copy of a validated input: its values are text, numbers, booleans or lists of them. */
function copyInput(input: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const name in input) {
    const value = input[name];
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
