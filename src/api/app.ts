import Koa from 'koa';
import { allRoutes, components } from './catalogue.js';
import { errorMiddleware } from './middleware/errors.js';
import { requestContextMiddleware } from './middleware/request-context.js';
import { buildRouter } from './router.js';
import { widgetRouter } from '../widget/http.js';
import { consoleRouter } from '../console/http.js';
import { errors, ApiError } from '../errors/api-error.js';
import type { AnyRoute } from './route.js';
import type { AppServices } from './services.js';

/** `extraRoutes` lets a test mount a route through the real middleware stack (e.g. one that throws). */
export function createApp(services: AppServices, extraRoutes: AnyRoute[] = []): Koa {
  const app = new Koa({ proxy: false });
  // Koa's own error printing would duplicate our log line, and could print a request body.
  app.silent = true;
  const router = buildRouter(services, [...allRoutes, ...extraRoutes], components);
  app.use(requestContextMiddleware(services));
  app.use(errorMiddleware());
  app.use(router.routes());
  // The hosted widget's page, files and JSON API (not part of the OpenAPI document: see src/widget/http.ts).
  app.use(widgetRouter(services).routes());
  // The operator's web console (src/console/): its own pages and session, never an API key.
  if (services.config.console.enabled) app.use(consoleRouter(services).routes());
  // koa-router's `throw: true` mode throws before it sets `Allow`, so let it set the status and header,
  // then turn the bare 405/501 into our envelope (keeping `Allow`).
  app.use(async (ctx, next) => {
    await next();
    if (ctx.body !== undefined) return;
    if (ctx.status === 405) {
      throw new ApiError(
        405,
        'invalid_request_error',
        'method_not_allowed',
        'This method is not allowed on this URL; see the Allow header.',
        undefined,
        { Allow: ctx.response.get('Allow') },
      );
    }
    if (ctx.status === 501) {
      throw errors.badRequest('method_not_implemented', 'This HTTP method is not supported.');
    }
  });
  app.use(router.allowedMethods());
  return app;
}
