import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { ConsoleKit, ConsoleRoute, ConsoleState } from './kit.js';
import { recordAudit } from '../audit/audit-log.js';
import type { AppServices } from '../api/services.js';
import { pageHeaders, sendHtml } from '../html/respond.js';
import { ApiError } from '../errors/api-error.js';
import { chooseLocale, type Locale } from '../html/locale.js';
import { wordsFor, type ConsoleMessageKey } from './messages.js';
import { PasswordChecksBusy } from './passwords.js';
import { messagePage, type PageContext } from './layout.js';
import { formFields, readCookie, SESSION_COOKIE, sessionCookie } from './request.js';
import { csrfMatches, renewal, signSession, verifySession } from './session-token.js';
import { signInDoor, signInRoutes, opensWithoutSession } from './sign-in.js';
import { userOfSession } from './users.js';
import { endSession } from './sessions.js';
import { may, seesOrganisation } from './access.js';
import { accountRoutes } from './pages/account-pages.js';
import { historyRoutes } from './pages/history-pages.js';
import { keyRoutes } from './pages/keys-pages.js';
import { linkRoutes } from './pages/links-pages.js';
import { organisationRoutes } from './pages/orgs-page.js';
import { overviewRoutes } from './pages/overview-page.js';
import { userRoutes } from './pages/users-pages.js';
import { webhookRoutes } from './pages/webhooks/routes.js';
import { readingAs } from './views.js';
import { getOrganisation } from '../orgs/orgs.js';

/*
 * The web console, served by the API process under /console (docs/console.md): the frame every page stands
 * in. Its routes accept only the console's session (a signed JWT in a cookie, session-token.ts) and never an
 * API key; /v1 never accepts the session. Every change is a POST that carries the session's CSRF token. The
 * pages before a session are sign-in.ts's; every page after it is an entry of a route table (`PAGES`).
 */

const STATIC_DIR = fileURLToPath(new URL('../../../src/console/static/', import.meta.url));

/** Every signed-in page, in the order they are tried. */
const PAGES: readonly ConsoleRoute[] = [
  ...organisationRoutes,
  ...overviewRoutes,
  ...userRoutes,
  ...accountRoutes,
  ...keyRoutes,
  ...linkRoutes,
  ...historyRoutes,
  ...webhookRoutes,
];
/** The last step of every action's address (`…/keys/{id}/revoke`): each is a POST. */
const ACTIONS = new Set([
  'rotate',
  'revoke',
  'limits',
  'pause',
  'resume',
  'refresh',
  'delete',
  'redeliver',
  'roll',
  'disable',
  'enable',
  'reset',
]);
/** The console's pages load only the appliance's own files, post only to it, and are never framed. */
const CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "img-src 'self' data:",
  "script-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
];

/**
 * Whether a POST comes from the console's own pages as far as the browser says: a browser sends
 * Sec-Fetch-Site, and Origin on a form's POST; a request with neither (a script, curl) is judged by its
 * tokens alone. The console's pages send no referrer, so their own forms come with `Origin: null`, which
 * says nothing and leaves it to Sec-Fetch-Site. The host is compared, not the scheme: behind a TLS proxy the
 * browser's https is this server's http.
 */
function sameOrigin(ctx: Context): boolean {
  const site = ctx.get('Sec-Fetch-Site');
  if (site && site !== 'same-origin' && site !== 'none') return false;
  const origin = ctx.get('Origin');
  if (!origin || origin === 'null') return true;
  try {
    return new URL(origin).host === ctx.host;
  } catch {
    return false;
  }
}

export function consoleRouter(services: AppServices): Router {
  const { config, db, clock, secrets } = services;
  const css = readFileSync(`${STATIC_DIR}console.css`, 'utf8');
  const js = readFileSync(`${STATIC_DIR}console.js`, 'utf8');
  const router = new Router({ prefix: '/console' });

  const localeOf = (ctx: Context): Locale =>
    chooseLocale(
      ctx.query.lang as string | undefined,
      ctx.get('Accept-Language') || undefined,
      config.widget.locale,
    );
  const pageContext = (ctx: Context, state?: ConsoleState, section?: string): PageContext => ({
    locale: state?.locale ?? localeOf(ctx),
    operator: config.widget.name,
    session: state
      ? {
          csrf: state.claims.csrf,
          email: state.user.email,
          seesAllOrganisations: state.user.org_id === null,
          managesUsers: state.user.role === 'operator',
        }
      : null,
    scope: state?.scope && section !== undefined ? { ...state.scope, section } : undefined,
  });
  const refuse = (ctx: Context, status: number, key: ConsoleMessageKey, state?: ConsoleState) => {
    const context = pageContext(ctx, state ?? ctx.state.console);
    sendHtml(ctx, status, messagePage(context, String(status), wordsFor(localeOf(ctx))(key)));
  };
  // An organisation's pages: the user must see the organisation (else 404, as for another tenant's link).
  const scoped = async (ctx: Context, next: Next) => {
    const state = ctx.state.console as ConsoleState;
    const { org, mode } = ctx.params as { org: string; mode: string };
    if ((mode !== 'test' && mode !== 'live') || !seesOrganisation(state.user, org))
      return refuse(ctx, 404, 'error.not_found');
    const organisation = await getOrganisation(db.reader, org).catch(() => null);
    if (!organisation) return refuse(ctx, 404, 'error.not_found');
    state.scope = { orgId: organisation.id, orgName: organisation.name, mode };
    await next();
  };
  const door = signInDoor({ services, pageContext: (ctx) => pageContext(ctx), refuse });
  const kit: ConsoleKit = {
    services,
    send: sendHtml,
    pageContext: (ctx, section) => pageContext(ctx, ctx.state.console as ConsoleState, section),
    refuse: (ctx, status, key) => refuse(ctx, status, key),
    state: (ctx) => ctx.state.console as ReturnType<ConsoleKit['state']>,
    words: (ctx) => wordsFor((ctx.state.console as ConsoleState).locale),
    checkCredentials: async (ctx, check) => {
      const { user } = ctx.state.console as ConsoleState;
      const result = await door.checkCounted(ctx, user.email, user, clock.now(), async (lane) => {
        const changed = await check(lane);
        return changed ? { ok: true, user: changed } : { ok: false };
      });
      return result === 'throttled' ? result : (result.user ?? null);
    },
    startSession: async (ctx, user) => {
      const state = ctx.state.console as ConsoleState;
      state.claims = await door.beginSession(ctx, user, clock.now(), state.claims.auth_time);
    },
  };

  // Every console response: never cached, never framed, no referrer (an invitation's URL holds its token).
  router.use(async (ctx, next) => {
    ctx.state.routePath = '/console';
    pageHeaders(ctx, CSP);
    ctx.set('Vary', 'Accept-Language, Cookie');
    // The console's only credential is its session: an API key sent here is a mistake worth naming.
    if (ctx.get('Authorization')) return refuse(ctx, 401, 'error.api_key');
    if (ctx.method === 'POST' && !sameOrigin(ctx)) return refuse(ctx, 403, 'error.csrf');
    try {
      // Every time on the page in the operator's zone, in the reader's language (views.ts, atMinute).
      await readingAs({ locale: localeOf(ctx), zone: config.console.timeZone }, next);
    } catch (error) {
      if (error instanceof PasswordChecksBusy) {
        ctx.set('Retry-After', String(error.retryAfterSeconds));
        return refuse(ctx, 503, 'error.busy');
      }
      if (!(error instanceof ApiError)) throw error;
      sendHtml(
        ctx,
        error.status,
        messagePage(pageContext(ctx, ctx.state.console), String(error.status), error.message),
      );
    }
  });

  router.get('/assets/console.css', (ctx) => {
    ctx.type = 'text/css; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = css;
  });
  router.get('/assets/console.js', (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = js;
  });

  for (const route of signInRoutes) router[route.method](route.path, (ctx) => route.handle(ctx, door));

  // Everything below needs a session; every POST below also needs its CSRF token.
  router.use(async (ctx, next) => {
    if (opensWithoutSession(ctx.path) || ctx.path.startsWith('/console/assets/')) return next();
    const now = clock.now();
    const token = readCookie(ctx, SESSION_COOKIE);
    const claims = token ? verifySession(secrets, token, now) : null;
    const user = claims ? await userOfSession(db.reader, claims, now) : null;
    if (!claims || !user) {
      if (token) ctx.append('Set-Cookie', sessionCookie('', 0));
      if (ctx.method === 'GET' || ctx.method === 'HEAD') {
        ctx.redirect('/console/login');
        ctx.status = 303;
        return;
      }
      return refuse(ctx, 401, 'signin.expired');
    }
    const state: ConsoleState = { user, claims, locale: localeOf(ctx), form: {} };
    ctx.state.console = state;
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      state.form = await formFields(ctx);
      if (!csrfMatches(claims, state.form._csrf ?? ctx.get('X-CSRF-Token')))
        return refuse(ctx, 403, 'error.csrf', state);
      // Every change a user makes takes a token from their own bucket, on every API node alike (the API's
      // limiter): a stolen session or a script cannot issue keys or fire events without end. Signing out
      // always works.
      if (ctx.path !== '/console/logout') {
        const decision = await services.rateLimiter.take(
          `console:${user.id}:actions`,
          config.console.actions,
          now,
        );
        if (!decision.allowed) {
          ctx.set('Retry-After', String(decision.retryAfter));
          return refuse(ctx, 429, 'error.too_many_actions', state);
        }
      }
    }
    const renewed = renewal(claims, now);
    if (renewed) ctx.append('Set-Cookie', sessionCookie(signSession(secrets, renewed), renewed.exp - now));
    await next();
  });

  router.get('/', (ctx) => {
    const { user } = ctx.state.console as ConsoleState;
    ctx.redirect(user.org_id === null ? '/console/orgs' : `/console/o/${user.org_id}/test`);
    ctx.status = 303;
  });

  for (const route of PAGES) mount(router, kit, scoped, route);

  // An action's address opened again (a reload after its POST, a bookmark, the back button): actions are
  // POSTs only, so show what the action was about rather than "page not found". That page checks access.
  for (const path of [
    '/o/:org/:mode/:section/:id/:action',
    '/o/:org/:mode/:section/:kind/:id/:action',
    '/users/:id/:action',
  ])
    router.get(path, (ctx, next) => {
      if (!ACTIONS.has(ctx.params.action!)) return next();
      ctx.redirect(ctx.path.slice(0, ctx.path.lastIndexOf('/')));
      ctx.status = 303;
    });

  router.post('/logout', async (ctx) => {
    const state = ctx.state.console as ConsoleState;
    await db.transaction(async (trx) => {
      await endSession(trx, state.claims.sid);
      await recordAudit(
        trx,
        { orgId: state.user.org_id, actor: `console:${state.user.id}`, action: 'console.signed_out' },
        clock.now(),
      );
    });
    ctx.append('Set-Cookie', sessionCookie('', 0));
    ctx.redirect('/console/login');
    ctx.status = 303;
  });

  return router;
}

const notFoundAsFalse = (error: unknown) => {
  if (error instanceof ApiError && error.status === 404) return false;
  throw error;
};

/**
 * A signed-in page: an organisation's resolves its scope first (`scoped`); then its resource (404), then
 * the user's right (403).
 */
function mount(
  router: Router,
  kit: ConsoleKit,
  scoped: (ctx: Context, next: Next) => Promise<void>,
  route: ConsoleRoute,
): void {
  const answer = async (ctx: Context) => {
    // Not this user's: the page the router shows for any missing page, in the reader's language.
    const found = route.find && (await route.find(ctx, kit).then(() => true, notFoundAsFalse));
    if (found === false) return kit.refuse(ctx, 404, 'error.not_found');
    if (!may(kit.state(ctx).user, route.needs)) return kit.refuse(ctx, 403, 'error.forbidden');
    await route.handle(ctx, kit);
  };
  if (route.under === 'console') router[route.method](route.path, answer);
  else router[route.method](`/o/:org/:mode${route.path}`, scoped, answer);
}
