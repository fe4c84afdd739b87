import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Context, Next } from 'koa';
import { accessLogWriter } from '../../logging/logger.js';
import { answerWithError, unrecognised } from './errors.js';
import type { AppServices } from '../../api/services.js';
import { settleClientAddress, trustedProxies } from '../../net/client-address.js';

const INCOMING_ID = /^[A-Za-z0-9._-]{8,64}$/;

// Request ids need to be unique, not unguessable: a random per-process prefix and a counter cost nothing,
// where 8 random bytes per request cost 2% of a small request's CPU.
const processPrefix = randomBytes(4).toString('hex');
let counter = 0;
export function nextRequestId(): string {
  counter = (counter + 1) % 0x1_0000_0000;
  return `req_${processPrefix}${counter.toString(16).padStart(8, '0')}`;
}

/**
 * Every request's frame, matched or not: its id, the error envelope for any failure (errors.ts), its access
 * log line and its metrics. One middleware rather than one per concern: each costs an async call and its
 * promises on every request.
 */
export function requestContextMiddleware(services: AppServices) {
  const writeAccessLine = accessLogWriter(services.logger);
  const proxies = trustedProxies(services.config.api.trustProxy);
  return async (ctx: Context, next: Next) => {
    const started = performance.now();
    const client = settleClientAddress(ctx, proxies);
    const incoming = ctx.req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && INCOMING_ID.test(incoming) ? incoming : nextRequestId();
    ctx.state.requestId = requestId;
    ctx.state.logger = services.logger;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw unrecognised(ctx);
    } catch (caught) {
      answerWithError(ctx, caught);
    } finally {
      const seconds = (performance.now() - started) / 1000;
      const route = (ctx.state.routePath as string | undefined) ?? 'unmatched';
      services.metrics.observe(ctx.method, route, ctx.status, seconds);
      writeAccessLine({
        request_id: requestId,
        method: ctx.method,
        route,
        status: ctx.status,
        ms: Math.round(seconds * 1e4) / 10,
        client,
        credential: ctx.state.principal?.credentialId,
      });
    }
  };
}
