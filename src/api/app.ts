import Koa from 'koa';
import { allRoutes, components } from './catalogue.js';
import { errorMiddleware } from './middleware/errors.js';
import { requestContextMiddleware } from './middleware/request-context.js';
import { buildRouter } from './router.js';
import { errors, ApiError } from '../errors/api-error.js';
import type { AppServices } from './services.js';

export function createApp(services: AppServices): Koa {
  const app = new Koa({ proxy: false });
  // Koa's own error printing would duplicate our log line, and could print a request body.
  app.silent = true;
  const router = buildRouter(services, allRoutes, components);
  app.use(requestContextMiddleware(services));
  app.use(errorMiddleware());
  app.use(router.routes());
  app.use(
    router.allowedMethods({
      throw: true,
      methodNotAllowed: () => new ApiError(405, 'invalid_request_error', 'method_not_allowed', 'This method is not allowed on this URL; see the Allow header.'),
      notImplemented: () => errors.badRequest('method_not_implemented', 'This HTTP method is not supported.'),
    }),
  );
  return app;
}
