import type { Context } from 'koa';
import type { Principal } from '../auth/principal.js';
import { errors } from '../errors/api-error.js';

/**
 * Cross-origin calls from web pages, for the routes a publishable key may call (the spec's "browser-safe"
 * key): today only `POST /v1/widget_tokens`. The pages allowed are the ones that may open the widget
 * (`widget.allowedOrigins`; empty, any page). A secret key's response never carries CORS headers, so a
 * browser never hands a page what a secret key fetched: a secret key belongs on a server.
 */

/** What a page may send: the key, a JSON body, and the API's own request headers. */
const REQUEST_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Request-Id';
/** What a page may read beyond the basics: the request id and the rate-limit and replay headers. */
const EXPOSED_HEADERS =
  'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed';
/** Browsers cap a preflight's cache at 2 hours (Chromium) anyway; 10 minutes lets a changed list apply soon. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/** Whether a page of this origin may open the widget and create its tokens from the browser. */
export function isAllowedOrigin(origin: string, allowedOrigins: readonly string[]): boolean {
  return allowedOrigins.length === 0 || allowedOrigins.includes(origin);
}

/** The answer to `OPTIONS` on a browser route: the browser asks whether a page may send its request. */
export function answerPreflight(ctx: Context, method: string, allowedOrigins: readonly string[]): void {
  ctx.vary('Origin');
  const origin = ctx.get('Origin');
  if (origin && !isAllowedOrigin(origin, allowedOrigins)) {
    throw errors.forbiddenOrigin(
      `Pages of ${origin} may not call this endpoint; the operator lists the pages that may in widget.allowedOrigins.`,
    );
  }
  ctx.status = 204;
  ctx.set('Allow', `${method}, OPTIONS`);
  if (!origin) return;
  ctx.set('Access-Control-Allow-Origin', origin);
  ctx.set('Access-Control-Allow-Methods', method);
  ctx.set('Access-Control-Allow-Headers', REQUEST_HEADERS);
  ctx.set('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
}

/**
 * Lets an allowed page read the answer to its request, success or error, unless a secret key made it.
 * Called once the answer is settled, whatever it is.
 */
export function allowPageToRead(ctx: Context, allowedOrigins: readonly string[]): void {
  ctx.vary('Origin');
  const origin = ctx.get('Origin');
  const principal = ctx.state.principal as Principal | undefined;
  if (!origin || !isAllowedOrigin(origin, allowedOrigins) || principal?.kind === 'secret_key') return;
  ctx.set('Access-Control-Allow-Origin', origin);
  ctx.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
}
