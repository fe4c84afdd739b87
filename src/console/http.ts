import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import type { ConsoleKit, ConsoleRoute, ConsoleState } from './kit.js';
import { recordAudit } from '../audit/audit-log.js';
import type { AppServices } from '../api/services.js';
import { html } from '../html/html.js';
import { pageHeaders, sendHtml } from '../html/respond.js';
import { ApiError } from '../errors/api-error.js';
import { chooseLocale, type Locale } from '../widget/messages.js';
import { consoleMessage, wordsFor, type ConsoleMessageKey } from './messages.js';
import { PasswordChecksBusy, type HashLane } from './passwords.js';
import { clientAddress } from '../net/client-address.js';
import { acceptPage, layout, messagePage, signInPage, type PageContext } from './pages.js';
import { csrfMatches, newSession, renewal, signSession, verifySession } from './session-token.js';
import {
  setPasswordWithToken,
  signIn,
  userOfEmail,
  userOfSession,
  userOfToken,
  type ConsoleUserRow,
} from './users.js';
import { ATTEMPTS_KEY_LABEL, reserveAttempt, settleSuccess } from './sign-in-attempts.js';
import { endSession, openSession } from './sessions.js';
import {
  KNOWN_DEVICE_COOKIE,
  knownDeviceCookie,
  newKnownDevice,
  signKnownDevice,
  verifyKnownDevice,
} from './known-device.js';
import { may, seesOrganisation, type ConsoleScope } from './access.js';
import { keyRoutes } from './pages/keys-pages.js';
import { linkRoutes } from './pages/links-pages.js';
import { historyRoutes } from './pages/history-pages.js';
import { registerOverviewPage } from './pages/overview-page.js';
import { registerUserPages } from './pages/users-pages.js';
import { registerAccountPages } from './pages/account-pages.js';
import { codeChecker } from './totp.js';
import { webhookRoutes } from './pages/webhooks/routes.js';
import { pageWindow, pager, pagerWords, readingAs, table } from './views.js';
import { getOrganisation, pageOrganisations } from '../orgs/orgs.js';
import { shownName } from './format.js';

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
/** Forms are a few fields: a larger body is no form of ours. */
const FORM_LIMIT = '16kb';

function sessionCookie(token: string, maxAgeMs: number): string {
  // Set by hand: Koa's cookies refuse `Secure` on a plain-HTTP connection, and the console behind a TLS
  // proxy (or on localhost, which browsers treat as secure) is exactly that.
  return `${SESSION_COOKIE}=${token}; Path=/console; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}; HttpOnly; Secure; SameSite=Strict`;
}

/**
 * The sign-in and invitation forms come before any session, so their CSRF token is a random value of their
 * own, in a cookie and in the form (the cookie is SameSite=Strict: another site's form carries neither).
 */
const FORM_COOKIE = 'svc_console_form';
const FORM_TOKEN = /^[A-Za-z0-9_-]{24}$/;

function formTokenCookie(token: string): string {
  return `${FORM_COOKIE}=${token}; Path=/console; Max-Age=7200; HttpOnly; Secure; SameSite=Strict`;
}

/** This browser's pre-session form token, issued with the page when it has none. */
function formToken(ctx: Context): string {
  const held = readCookie(ctx, FORM_COOKIE);
  if (held && FORM_TOKEN.test(held)) return held;
  const token = randomBytes(18).toString('base64url');
  ctx.append('Set-Cookie', formTokenCookie(token));
  return token;
}

/** Whether a pre-session form came back with the token its browser holds (compared in constant time). */
function formTokenMatches(ctx: Context, given: string | undefined): boolean {
  const held = readCookie(ctx, FORM_COOKIE);
  if (!held || !FORM_TOKEN.test(held) || typeof given !== 'string') return false;
  const a = Buffer.from(held);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

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
  const send = sendHtml;
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
  const attemptsKey = secrets.derivedKey(ATTEMPTS_KEY_LABEL)!.key;
  /**
   * A password (and code) check, counted before it runs (sign-in-attempts.ts). From a browser known to this
   * user: against the browser's own budget only, its hash in the known lane (passwords.ts), so nothing a
   * stranger spends (an email's budget, an address's, the open hash queue) refuses it. Otherwise against
   * the email's budget and the client address's (net/client-address.ts), in the open lane. Over a budget it
   * answers 'throttled' with Retry-After and checks nothing. A success starts the counts again and makes
   * the browser known to the user.
   */
  const guarded = async <T extends { ok: boolean; user?: ConsoleUserRow }>(
    ctx: Context,
    email: string,
    user: ConsoleUserRow | undefined,
    now: number,
    check: (lane: HashLane) => Promise<T>,
  ): Promise<T | 'throttled'> => {
    const device = verifyKnownDevice(secrets, readCookie(ctx, KNOWN_DEVICE_COOKIE), now);
    const knownHere = device !== null && user !== undefined && device.userId === user.id;
    const reservation = knownHere
      ? await reserveAttempt(db, attemptsKey, [{ kind: 'device', value: device.deviceId }], now, {
          userId: user.id,
        })
      : await reserveAttempt(
          db,
          attemptsKey,
          [
            { kind: 'address', value: clientAddress(ctx) },
            { kind: 'email', value: email },
          ],
          now,
          { email },
        );
    if (!reservation.ok) {
      ctx.set('Retry-After', String(Math.max(1, Math.ceil(reservation.retryAfterMs / 1000))));
      return 'throttled';
    }
    let result: T;
    try {
      result = await check(knownHere ? 'known' : 'open');
    } finally {
      reservation.release();
    }
    if (result.ok && result.user) {
      await settleSuccess(db, reservation.subjects);
      const token = signKnownDevice(secrets, knownHere ? device : newKnownDevice(result.user.id, now));
      ctx.append('Set-Cookie', knownDeviceCookie(token));
    }
    return result;
  };
  /**
   * A new session for `user`, as this response's cookie: a row on the server and a token naming it. A
   * change of credentials passes the session's own sign-in time, so that it never extends the session.
   */
  const beginSession = async (ctx: Context, user: ConsoleUserRow, now: number, authTime = now) => {
    const sid = await db.transaction((trx) => openSession(trx, user.id, authTime, now));
    const claims = newSession(user.id, sid, Number(user.session_epoch), now, authTime);
    ctx.append('Set-Cookie', sessionCookie(signSession(secrets, claims), claims.exp - now));
    return claims;
  };
  const kit: ConsoleKit = {
    services,
    scoped,
    send,
    pageContext: (ctx, section) => pageContext(ctx, ctx.state.console as ConsoleState, section),
    refuse: (ctx, status, key) => refuse(ctx, status, key),
    state: (ctx) => ctx.state.console as ConsoleState & { scope: ConsoleScope },
    words: (ctx) => wordsFor((ctx.state.console as ConsoleState).locale),
    checkCredentials: async (ctx, check) => {
      const { user } = ctx.state.console as ConsoleState;
      const result = await guarded(ctx, user.email, user, clock.now(), async (lane) => {
        const changed = await check(lane);
        return changed ? { ok: true, user: changed } : { ok: false };
      });
      return result === 'throttled' ? result : (result.user ?? null);
    },
    startSession: async (ctx, user) => {
      const state = ctx.state.console as ConsoleState;
      state.claims = await beginSession(ctx, user, clock.now(), state.claims.auth_time);
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
      signInPage(pageContext(ctx), {
        email: '',
        problem: expired ? 'signin.expired' : null,
        askTotp: false,
        formToken: formToken(ctx),
      }),
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
    ) =>
      send(
        ctx,
        status,
        signInPage(pageContext(ctx), {
          email,
          problem,
          problemValues: values,
          askTotp,
          formToken: formToken(ctx),
        }),
      );
    if (!formTokenMatches(ctx, fields._csrf)) return page(403, 'signin.form_expired');
    // The code field is there once the page has asked for it: from then on every answer asks again, and a
    // wrong password or code gets one message, so this step does not tell which of the two was wrong. The
    // password is typed again each time (a password manager fills it): it is never sent back in the page.
    const askedTotp = fields.totp !== undefined;
    const user = await userOfEmail(db.knex, email);
    const result = await guarded(ctx, email, user, now, (lane) =>
      signIn(db, {
        user,
        lane,
        address: clientAddress(ctx),
        password: (fields.password ?? '').slice(0, 1024),
        checkTotp: codeChecker(secrets, fields.totp?.slice(0, 16), now, (row) =>
          services.logger.warn(
            { user: row },
            "a console user's second factor does not open (a master key this process lacks, or a damaged row); svc console users reset --remove-totp removes it",
          ),
        ),
        now,
      }),
    );
    if (result === 'throttled') return page(429, 'signin.throttled', undefined, askedTotp);
    if (result.ok) {
      await beginSession(ctx, result.user, now);
      ctx.redirect('/console');
      ctx.status = 303;
      return;
    }
    if (result.reason === 'second_factor') return page(401, 'signin.second_factor', undefined, true);
    return askedTotp ? page(401, 'totp.wrong', undefined, true) : page(401, 'signin.wrong');
  });

  router.get('/accept/:token', async (ctx) => {
    const found = await userOfToken(db.reader, ctx.params.token!, clock.now());
    if (!found) return refuse(ctx, 404, 'accept.invalid');
    send(
      ctx,
      200,
      acceptPage(pageContext(ctx), {
        email: found.user.email,
        token: ctx.params.token!,
        problem: null,
        formToken: formToken(ctx),
      }),
    );
  });

  router.post('/accept/:token', async (ctx) => {
    const token = ctx.params.token!;
    const fields = await form(ctx);
    const now = clock.now();
    const found = await userOfToken(db.reader, token, now);
    if (!found) return refuse(ctx, 404, 'accept.invalid');
    const again = (problem: string, status = 400) =>
      send(
        ctx,
        status,
        acceptPage(pageContext(ctx), { email: found.user.email, token, problem, formToken: formToken(ctx) }),
      );
    if (!formTokenMatches(ctx, fields._csrf)) return again(text(ctx, 'signin.form_expired'), 403);
    if ((fields.password ?? '') !== (fields.confirm ?? '')) return again(text(ctx, 'accept.mismatch'));
    let user: ConsoleUserRow;
    try {
      user = await db.transaction((trx) => setPasswordWithToken(trx, token, fields.password ?? '', now));
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) return again(error.message);
      throw error;
    }
    await beginSession(ctx, user, now);
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
      state.form = await form(ctx);
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

  router.get('/orgs', async (ctx) => {
    const state = ctx.state.console as ConsoleState;
    if (state.user.org_id !== null) return refuse(ctx, 404, 'error.not_found');
    const window = pageWindow(ctx.query);
    const { data, total } = await pageOrganisations(db.reader, window);
    const t = wordsFor(state.locale);
    const rows = data.map((org) => [
      html`<a href="/console/o/${org.id}/test">${shownName(state.locale, org.name)}</a>`,
      html`<code>${org.id}</code>`,
      org.created_at.slice(0, 10),
    ]);
    send(
      ctx,
      200,
      layout(
        pageContext(ctx, state),
        t('orgs.title'),
        html`${table(t('orgs.caption'), [t('orgs.name'), 'ID', t('orgs.created')], rows, t('orgs.empty'))}${pager('/console/orgs', ctx.query, window.page, total, pagerWords(state.locale))}`,
      ),
    );
  });

  registerOverviewPage(router, kit);
  registerUserPages(router, kit);
  registerAccountPages(router, kit);
  for (const route of [...keyRoutes, ...linkRoutes, ...historyRoutes, ...webhookRoutes])
    mountScoped(router, kit, route);

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

/** A route of an organisation's pages: scope, then its resource (404), then the user's right (403). */
function mountScoped(router: Router, kit: ConsoleKit, route: ConsoleRoute): void {
  router[route.method](`/o/:org/:mode${route.path}`, kit.scoped, async (ctx) => {
    // Not this scope's: the page the router shows for any missing page, in the reader's language.
    const found = route.find && (await route.find(ctx, kit).then(() => true, notFoundAsFalse));
    if (found === false) return kit.refuse(ctx, 404, 'error.not_found');
    if (!may(kit.state(ctx).user, route.needs)) return kit.refuse(ctx, 403, 'error.forbidden');
    await route.handle(ctx, kit);
  });
}
