import { readFile } from 'node:fs/promises';
import type { Context } from 'koa';
import { isAllowedOrigin } from '../api/cors.js';
import { INTENT_TOKEN, WIDGET_TOKEN } from '../auth/tokens.js';
import type { WidgetKit, WidgetRoute } from './kit.js';
import { openSession, type OpenFailure } from './sessions.js';

/*
 * The widget's page and its files: `GET /widget?token=…&origin=…` opens a session and answers its page;
 * `embed.js` is what a customer's page loads to open it; the page's own script, styles, theme and logo.
 */

const OPEN_FAILURE_STATUS: Record<OpenFailure | 'origin_invalid', number> = {
  origin_invalid: 400,
  // A page, not an error of the request: widget_url opened as a plain link by a person, whose app meant to
  // embed it. The page says what to do; the token is not spent.
  opener_missing: 200,
  token_invalid: 404,
  token_consumed: 410,
  token_expired: 410,
  link_missing: 404,
  link_not_expired: 409,
};

/** `https://app.example.com` or `http://127.0.0.1:3000`: a scheme, a host, perhaps a port, nothing else. */
export function parseOrigin(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 255) return null;
  try {
    const url = new URL(value);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
    return url.origin === value ? value : null;
  } catch {
    return null;
  }
}

/** Opens the widget: the token is spent and a session starts, or the page says why not. */
async function openPage(ctx: Context, kit: WidgetKit): Promise<void> {
  const { config } = kit.services;
  if (ctx.method === 'HEAD') {
    // A link checker's HEAD must not spend the token: only a real open (GET) consumes it.
    ctx.status = 200;
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Cache-Control', 'no-store');
    ctx.body = '';
    return;
  }
  const now = kit.services.clock.now();
  const token = typeof ctx.query.token === 'string' ? ctx.query.token : '';
  const browserLocale = kit.localeOf(ctx);
  // No `origin`: widget_url opened as it was returned, as a top-level page or in a mobile web view. That
  // is the hosted flow when the token has a redirect_uri; otherwise the page explains (openSession).
  const hosted = ctx.query.origin === undefined;
  const origin = hosted ? null : parseOrigin(ctx.query.origin);
  const allowed = hosted || (origin !== null && isAllowedOrigin(origin, config.widget.allowedOrigins));
  // Checked before the token is consumed: a page that may not open the widget does not burn its token.
  if (!allowed) return kit.sendPage(ctx, 400, kit.errorPage('origin_invalid', origin, browserLocale));
  if (!WIDGET_TOKEN.test(token) && !INTENT_TOKEN.test(token))
    return kit.sendPage(ctx, 400, kit.errorPage('token_invalid', origin, browserLocale));
  const opened = await openSession(kit.services.db, token, {
    origin,
    locale: (tokenLocale) => kit.localeOf(ctx, tokenLocale),
    sessionTtlMs: config.widget.sessionTtlMinutes * 60_000,
    now,
  });
  if (!opened.ok)
    return kit.sendPage(
      ctx,
      OPEN_FAILURE_STATUS[opened.problem],
      kit.errorPage(opened.problem, origin, browserLocale),
    );
  kit.sendPage(ctx, 200, await kit.sessionPage(opened.session, opened.secret, opened.widgetToken, now));
}

async function embedScript(ctx: Context, kit: WidgetKit): Promise<void> {
  ctx.type = 'text/javascript; charset=utf-8';
  ctx.set('Cache-Control', 'public, max-age=300');
  ctx.set('Access-Control-Allow-Origin', '*');
  ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.body = kit.files.embedJs;
}

/** The page's script and styles, the theme, the logo; a long cache for the version the page asks for. */
async function assetFile(ctx: Context, kit: WidgetKit): Promise<void> {
  const { assets, theme, logo } = kit.files;
  const name = ctx.params.name!;
  ctx.set('X-Content-Type-Options', 'nosniff');
  if (name === 'logo') {
    if (logo.kind !== 'file') return;
    const body = await readFile(logo.path).catch(() => null);
    if (!body) return;
    ctx.type = logo.contentType;
    ctx.set('Cache-Control', 'public, max-age=3600');
    // An SVG logo is an image, never a document that runs scripts.
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    ctx.body = body;
    return;
  }
  const file = name === 'theme.css' ? theme : name === 'embed.js' ? undefined : assets.get(name);
  if (!file) return;
  ctx.type = file.contentType;
  ctx.set(
    'Cache-Control',
    ctx.query.v === file.version ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
  );
  ctx.body = file.body;
}

export const pageRoutes: WidgetRoute[] = [
  { method: 'get', path: '/widget', handle: openPage },
  { method: 'get', path: '/widget/embed.js', handle: embedScript },
  { method: 'get', path: '/widget/assets/{name}', handle: assetFile },
];
