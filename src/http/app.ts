import Router from '@koa/router';
import Koa from 'koa';
import { allRoutes, components } from './catalogue.js';
import { requestContextMiddleware } from './middleware/request-context.js';
import { apiRoutes, methodRefused } from './router.js';
import { widgetRouter } from '../widget/http.js';
import { consoleRouter } from '../console/http.js';
import type { AnyRoute } from '../api/route.js';
import type { AppServices } from '../api/services.js';

/** `extraRoutes` lets a test mount a route through the real middleware stack (e.g. one that throws). */
/**
 * The API process's app: the API, the widget and the console. The simulated consent bank was mounted here, on
 * the console's origin, until issue 44 (item 7); it has an origin of its own (src/test-mode/serve-consent-banks.ts).
 */
export function createApp(services: AppServices, extraRoutes: AnyRoute[] = []): Koa {
  const app = new Koa({ proxy: false });
  // Koa's own error printing would duplicate our log line, and could print a request body.
  app.silent = true;
  app.use(requestContextMiddleware(services));
  app.use(apiRoutes(services, [...allRoutes, ...extraRoutes], components));
  // The hosted widget's page, files and JSON API (not part of the OpenAPI document: see src/widget/http.ts).
  app.use(widgetRouter(services).routes());
  // The operator's web console (src/console/): its own pages and session, never an API key.
  if (services.config.console.enabled) {
    app.use(consoleRouter(services).routes());
    // A person who types the bare address finds the console (an API client never asks for `/`).
    const door = new Router().get('/', (ctx) => {
      ctx.redirect('/console');
      ctx.status = 303;
    });
    app.use(door.routes());
  }
  // koa-router's `allowedMethods` (below) answers a widget or console path asked with another method with a
  // bare 405 or 501 and `Allow`; this turns it into our envelope, as the API's own routes do.
  app.use(async (ctx, next) => {
    await next();
    if (ctx.body === undefined && (ctx.status === 405 || ctx.status === 501))
      throw methodRefused(ctx.status, ctx.response.get('Allow'));
  });
  // Reads the widget's and console's matched routes (`ctx.matched`), whatever router it is called on.
  app.use(new Router().allowedMethods());
  return app;
}
