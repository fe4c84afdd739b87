import type { Context } from 'koa';
import type { AppServices } from '../api/services.js';
import type { WidgetFiles } from './assets.js';
import type { WidgetStatus } from './flows.js';
import type { Locale } from '../html/locale.js';
import type { Bootstrap } from './page.js';
import type { SessionRow, WidgetContext } from './sessions.js';
import type { WidgetTokenRow } from './widget-tokens.js';

/*
 * What the widget's router (http.ts) hands each route's handler (page-routes.ts, session-routes.ts,
 * consent-routes.ts), as the console's kit does its pages: the services and the answers every route uses.
 * Types only, so that the route modules need not import the router that mounts them.
 */

export interface WidgetKit {
  services: AppServices;
  /** The page's files (widget.js, the theme, the logo, embed.js), read once. */
  files: WidgetFiles;
  /** The steps' context, at this moment. */
  context(): WidgetContext;
  /** The session of the `X-Widget-Session` header (the answer is not to be cached), or a 401. */
  session(ctx: Context): Promise<SessionRow>;
  /** A JSON body of at most 16 KiB (the widget's forms are small), or a 400. */
  readJson(ctx: Context): Promise<unknown>;
  /** Where the session's connection stands (`sessionStatus`, flows.ts). */
  status(session: SessionRow, now: number): Promise<WidgetStatus>;
  /** The page's language: the token's, else the browser's, else the operator's. */
  localeOf(ctx: Context, tokenLocale?: Locale | null): Locale;
  /** The page for a session just opened (or handed to a new secret at the callback). */
  sessionPage(
    session: SessionRow,
    secret: string,
    token: WidgetTokenRow | null,
    now: number,
  ): Promise<Bootstrap>;
  /** The page that says `code` in the person's words instead of the flow. */
  errorPage(code: string, origin: string | null, locale: Locale, bankId?: string | null): Bootstrap;
  /** Sends the page with its headers: its CSP, framed only by the opener's origin. */
  sendPage(ctx: Context, status: number, bootstrap: Bootstrap): void;
}

/**
 * One route of the widget: its method, its path as the access log and the metrics name it (`{name}` for a
 * parameter) and its one handler. The router (http.ts) mounts each table in the list it walks.
 */
export interface WidgetRoute {
  method: 'get' | 'post';
  path: string;
  handle(ctx: Context, kit: WidgetKit): Promise<void>;
}
