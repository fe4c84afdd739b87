import Router from '@koa/router';
import type { Context } from 'koa';
import { jsonBodyReader } from '../api/body.js';
import type { AppServices } from '../api/services.js';
import { errors } from '../errors/api-error.js';
import { linkPolicy } from '../links/routes.js';
import { pageHeaders, sendHtml } from '../html/respond.js';
import { widgetFiles } from './assets.js';
import { errorBootstrap, sessionBootstrap } from './bootstrap.js';
import { consentRoutes } from './consent-routes.js';
import { sessionStatus } from './flows.js';
import type { WidgetKit, WidgetRoute } from './kit.js';
import { chooseLocale } from '../html/locale.js';
import { CATALOGUES } from './messages.js';
import { renderPage } from './page.js';
import { pageRoutes } from './page-routes.js';
import { sessionRoutes } from './session-routes.js';
import { authenticateSession, SESSION_HEADER } from './sessions.js';

/**
 * The hosted widget, served by the API process: the page (`GET /widget?token=…&origin=…`), `embed.js`, the
 * page's own files (page-routes.ts), the small JSON API under /widget/api that the page calls with its
 * session (session-routes.ts), and a consent bank's start and callback (consent-routes.ts). None of it is in
 * the OpenAPI document: it is the widget's private interface, not the customer's. This router builds the
 * kit every handler gets (kit.ts) and mounts the route tables.
 */
export function widgetRouter(services: AppServices): Router {
  const { config } = services;
  const files = widgetFiles(config, { es: CATALOGUES.es['page.title'], en: CATALOGUES.en['page.title'] });
  // The widget's forms are small; a larger body is no form of ours.
  const readBody = jsonBodyReader(16 * 1024);

  const kit: WidgetKit = {
    services,
    files,
    context: () => ({
      config,
      secrets: services.secrets,
      policy: linkPolicy(services),
      now: services.clock.now(),
    }),
    session: async (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      return authenticateSession(
        services.db.reader,
        ctx.get(SESSION_HEADER) || undefined,
        services.clock.now(),
      );
    },
    readJson: async (ctx) => {
      if (!ctx.is('application/json'))
        throw errors.badRequest('unsupported_media_type', 'Send request bodies as application/json.');
      return readBody(ctx);
    },
    status: (session, now) =>
      sessionStatus(services.db, session, { now, mfaAttempts: config.refresh.mfaAttempts }),
    localeOf: (ctx, tokenLocale = null) =>
      chooseLocale(tokenLocale, ctx.get('Accept-Language') || undefined, config.widget.locale),
    sessionPage: (session, secret, token, now) => sessionBootstrap(services, session, secret, token, now),
    errorPage: (code, origin, locale, bankId = null) => errorBootstrap(config, code, origin, locale, bankId),
    sendPage: (ctx, status, bootstrap) => {
      const frameAncestors = bootstrap.opener_origin ?? "'none'";
      ctx.set('Content-Language', bootstrap.locale);
      ctx.set('Vary', 'Accept-Language');
      pageHeaders(ctx, [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        `img-src ${files.imgSources.join(' ')}`,
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        `frame-ancestors ${frameAncestors}`,
      ]);
      sendHtml(
        ctx,
        status,
        renderPage(bootstrap, {
          widgetJs: files.assets.get('widget.js')!.version,
          widgetCss: files.assets.get('widget.css')!.version,
          themeCss: files.theme.version,
          logoSrc: files.logoSrc,
        }),
      );
    },
  };

  const router = new Router();
  for (const route of [...pageRoutes, ...sessionRoutes, ...consentRoutes]) mount(router, kit, route);
  return router;
}

/** A route of the widget, named in the access log and the metrics by its path (`/widget/assets/{name}`). */
function mount(router: Router, kit: WidgetKit, route: WidgetRoute): void {
  router[route.method](route.path.replace(/\{(\w+)\}/g, ':$1'), async (ctx: Context) => {
    ctx.state.routePath = route.path;
    await route.handle(ctx, kit);
  });
}
