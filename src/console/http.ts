import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import type { ConsoleKit, ConsoleState } from './kit.js';
import { recordAudit } from '../audit/audit-log.js';
import type { AppServices } from '../api/services.js';
import { ApiError } from '../errors/api-error.js';
import { chooseLocale, type Locale } from '../widget/messages.js';
import { escapeHtml } from '../widget/page.js';
import { consoleMessage, wordsFor, type ConsoleMessageKey } from './messages.js';
import { PasswordChecksBusy } from './passwords.js';
import { acceptPage, layout, messagePage, signInPage, type PageContext } from './pages.js';
import {
  csrfMatches,
  newSession,
  renewal,
  signSession,
  verifySession,
  SESSION_TTL_MS,
} from './session-token.js';
import { setPasswordWithToken, signIn, userOfSession, userOfToken, type ConsoleUserRow } from './users.js';
import { LoginThrottle } from './throttle.js';
import { seesOrganisation, type ConsoleScope } from './access.js';
import { registerKeyPages } from './keys-pages.js';
import { registerLinkPages } from './links-pages.js';
import { registerHistoryPages } from './history-pages.js';
import { registerOverviewPage } from './overview-page.js';
import { registerUserPages } from './users-pages.js';
import { registerAccountPages } from './account-pages.js';
import { codeChecker } from './totp.js';
import { registerWebhookPages } from './webhooks-pages.js';
import { pageWindow, pager, pagerWords, table } from './views.js';
import { getOrganisation, pageOrganisations } from '../orgs/orgs.js';

/*
 * The web console, served by the API process under /console (docs/console.md). Its routes accept only the
 * console's session (a signed JWT in a cookie, session-token.ts) and never an API key; /v1 never accepts
 * the session. Every change is a POST that carries the session's CSRF token.
 */

export const SESSION_COOKIE = 'svc_console';
const STATIC_DIR = fileURLToPath(new URL('../../../src/console/static/', import.meta.url));
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
/** Forms are a few fields: a larger body is no form of ours. */
const FORM_LIMIT = '16kb';

function sessionCookie(token: string, maxAgeMs: number): string {
  // Set by hand: Koa's cookies refuse `Secure` on a plain-HTTP connection, and the console behind a TLS
  // proxy (or on localhost, which browsers treat as secure) is exactly that.
  return `${SESSION_COOKIE}=${token}; Path=/console; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}; HttpOnly; Secure; SameSite=Strict`;
}

function readCookie(ctx: Context, name: string): string | null {
  const header = ctx.get('Cookie');
  for (const part of header.split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return null;
}

const readForm = koaBody({
  urlencoded: true,
  json: false,
  text: false,
  multipart: false,
  formLimit: FORM_LIMIT,
}) as unknown as (ctx: Context, next: Next) => Promise<void>;

async function form(ctx: Context): Promise<Record<string, string>> {
  if (!ctx.is('application/x-www-form-urlencoded')) return {};
  await readForm(ctx, async () => undefined);
  const body = (ctx.request as unknown as { body?: Record<string, unknown> }).body ?? {};
  return Object.fromEntries(
    Object.entries(body).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

export function consoleRouter(services: AppServices): Router {
  const { config, db, clock, secrets } = services;
  const throttle = new LoginThrottle();
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
  const send = (ctx: Context, status: number, html: string) => {
    ctx.status = status;
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  };
  const text = (ctx: Context, key: ConsoleMessageKey, values?: Record<string, string>) =>
    consoleMessage(localeOf(ctx), key, values);
  const refuse = (ctx: Context, status: number, key: ConsoleMessageKey, state?: ConsoleState) =>
    send(
      ctx,
      status,
      messagePage(pageContext(ctx, state ?? ctx.state.console), String(status), text(ctx, key)),
    );
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
  const kit: ConsoleKit = {
    services,
    scoped,
    send,
    pageContext: (ctx, section) => pageContext(ctx, ctx.state.console as ConsoleState, section),
    refuse: (ctx, status, key) => refuse(ctx, status, key),
    state: (ctx) => ctx.state.console as ConsoleState & { scope: ConsoleScope },
    words: (ctx) => wordsFor((ctx.state.console as ConsoleState).locale),
    startSession: (ctx, user) => {
      const claims = newSession(user.id, Number(user.session_epoch), clock.now());
      ctx.append('Set-Cookie', sessionCookie(signSession(secrets, claims), SESSION_TTL_MS));
      (ctx.state.console as ConsoleState).claims = claims;
    },
  };

  // Every console response: never cached, never framed, no referrer (an invitation's URL holds its token).
  router.use(async (ctx, next) => {
    ctx.state.routePath = '/console';
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set(
      'Content-Security-Policy',
      "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    ctx.set('Vary', 'Accept-Language, Cookie');
    // The console's only credential is its session: an API key sent here is a mistake worth naming.
    if (ctx.get('Authorization')) return refuse(ctx, 401, 'error.api_key');
    try {
      await next();
    } catch (error) {
      if (error instanceof PasswordChecksBusy) {
        ctx.set('Retry-After', String(error.retryAfterSeconds));
        return refuse(ctx, 503, 'error.busy');
      }
      if (!(error instanceof ApiError)) throw error;
      send(
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

  router.get('/login', (ctx) => {
    const expired = readCookie(ctx, SESSION_COOKIE) !== null;
    send(
      ctx,
      200,
      signInPage(pageContext(ctx), { email: '', problem: expired ? 'signin.expired' : null, askTotp: false }),
    );
  });

  router.post('/login', async (ctx) => {
    const fields = await form(ctx);
    const email = (fields.email ?? '').slice(0, 254);
    const now = clock.now();
    const page = (
      status: number,
      problem: ConsoleMessageKey,
      values?: Record<string, string>,
      askTotp = false,
    ) => send(ctx, status, signInPage(pageContext(ctx), { email, problem, problemValues: values, askTotp }));
    // The code field is there once the page has asked for it: from then on every answer asks again, and a
    // wrong password or code gets one message, so this step does not tell which of the two was wrong. The
    // password is typed again each time (a password manager fills it): it is never sent back in the page.
    const askedTotp = fields.totp !== undefined;
    if (!throttle.allows(ctx.ip, now)) return page(429, 'signin.throttled', undefined, askedTotp);
    const result = await signIn(db, {
      email,
      password: (fields.password ?? '').slice(0, 1024),
      checkTotp: codeChecker(secrets, fields.totp?.slice(0, 16), now, (user) =>
        services.logger.warn(
          { user },
          "a console user's second factor does not open (a master key this process lacks, or a damaged row); svc console users reset --remove-totp removes it",
        ),
      ),
      now,
    });
    if (result.ok) {
      throttle.succeeded(ctx.ip);
      const claims = newSession(result.user.id, Number(result.user.session_epoch), now);
      ctx.append('Set-Cookie', sessionCookie(signSession(secrets, claims), SESSION_TTL_MS));
      ctx.redirect('/console');
      ctx.status = 303;
      return;
    }
    throttle.failed(ctx.ip, now);
    if (result.reason === 'second_factor') return page(401, 'signin.second_factor', undefined, true);
    if (result.reason === 'locked')
      return page(423, 'signin.locked', { time: new Date(result.lockedUntil!).toISOString().slice(11, 16) });
    // Each failure in a row answers more slowly: 0.25 s, 0.5 s, 1 s, 2 s (then the account locks).
    await sleep(Math.min(250 * 2 ** Math.max(0, result.failures - 1), 4_000));
    return askedTotp ? page(401, 'totp.wrong', undefined, true) : page(401, 'signin.wrong');
  });

  router.get('/accept/:token', async (ctx) => {
    const found = await userOfToken(db.reader, ctx.params.token!, clock.now());
    if (!found) return refuse(ctx, 404, 'accept.invalid');
    send(
      ctx,
      200,
      acceptPage(pageContext(ctx), { email: found.user.email, token: ctx.params.token!, problem: null }),
    );
  });

  router.post('/accept/:token', async (ctx) => {
    const token = ctx.params.token!;
    const fields = await form(ctx);
    const now = clock.now();
    const found = await userOfToken(db.reader, token, now);
    if (!found) return refuse(ctx, 404, 'accept.invalid');
    const again = (problem: string) =>
      send(ctx, 400, acceptPage(pageContext(ctx), { email: found.user.email, token, problem }));
    if ((fields.password ?? '') !== (fields.confirm ?? '')) return again(text(ctx, 'accept.mismatch'));
    let user: ConsoleUserRow;
    try {
      user = await db.transaction((trx) => setPasswordWithToken(trx, token, fields.password ?? '', now));
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) return again(error.message);
      throw error;
    }
    const claims = newSession(user.id, Number(user.session_epoch), now);
    ctx.append('Set-Cookie', sessionCookie(signSession(secrets, claims), SESSION_TTL_MS));
    ctx.redirect('/console');
    ctx.status = 303;
  });

  // Everything below needs a session; every POST below also needs its CSRF token.
  router.use(async (ctx, next) => {
    if (
      ctx.path === '/console/login' ||
      ctx.path.startsWith('/console/accept/') ||
      ctx.path.startsWith('/console/assets/')
    )
      return next();
    const now = clock.now();
    const token = readCookie(ctx, SESSION_COOKIE);
    const claims = token ? verifySession(secrets, token, now) : null;
    const user = claims ? await userOfSession(db.reader, claims) : null;
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
      state.form = await form(ctx);
      if (!csrfMatches(claims, state.form._csrf ?? ctx.get('X-CSRF-Token')))
        return refuse(ctx, 403, 'error.csrf', state);
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

  router.get('/orgs', async (ctx) => {
    const state = ctx.state.console as ConsoleState;
    if (state.user.org_id !== null) return refuse(ctx, 404, 'error.not_found');
    const window = pageWindow(ctx.query);
    const { data, total } = await pageOrganisations(db.reader, window);
    const t = wordsFor(state.locale);
    const rows = data.map((org) => [
      `<a href="/console/o/${org.id}/test">${escapeHtml(org.name)}</a>`,
      `<code>${org.id}</code>`,
      escapeHtml(org.created_at.slice(0, 10)),
    ]);
    send(
      ctx,
      200,
      layout(
        pageContext(ctx, state),
        t('orgs.title'),
        table(t('orgs.caption'), [t('orgs.name'), 'ID', t('orgs.created')], rows, t('orgs.empty')) +
          pager('/console/orgs', ctx.query, window.page, total, pagerWords(state.locale)),
      ),
    );
  });

  registerOverviewPage(router, kit);
  registerKeyPages(router, kit);
  registerLinkPages(router, kit);
  registerHistoryPages(router, kit);
  registerUserPages(router, kit);
  registerAccountPages(router, kit);
  registerWebhookPages(router, kit);

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
    await db.transaction((trx) =>
      recordAudit(
        trx,
        { orgId: state.user.org_id, actor: `console:${state.user.id}`, action: 'console.signed_out' },
        clock.now(),
      ),
    );
    ctx.append('Set-Cookie', sessionCookie('', 0));
    ctx.redirect('/console/login');
    ctx.status = 303;
  });

  return router;
}
