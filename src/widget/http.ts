import { readFile } from 'node:fs/promises';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import { jsonBodyReader } from '../api/body.js';
import type { AppServices } from '../api/services.js';
import { compileValidator } from '../api/validation.js';
import { INTENT_TOKEN, WIDGET_TOKEN } from '../auth/tokens.js';
import { profileOf } from '../banks/consent/profiles/index.js';
import { bankHealth } from '../banks/health.js';
import {
  institutionsOf,
  connectionMethod,
  consentProfileOf,
  findInstitution,
  offers,
  type Product,
} from '../banks/institutions.js';
import { registeredBanks } from '../banks/consent/registrations.js';
import type { HolderType } from '../banks/connector.js';
import { errors } from '../errors/api-error.js';
import { formatRut } from '../rut/rut.js';
import { countLinksOfUser, findLink } from '../links/store.js';
import { linkPolicy } from '../links/routes.js';
import { loadStaticAssets, resolveLogo, themeCss } from './assets.js';
import {
  consentText,
  finishSession,
  sessionStatus,
  submitCredentials,
  submitMfa,
  widgetTokenOf,
  type CredentialsInput,
  type WidgetContext,
} from './flows.js';
import { renderPage, type Bootstrap } from './page.js';
import { pageHeaders, sendHtml } from '../html/respond.js';
import { CATALOGUES, chooseLocale, type Locale } from './messages.js';
import { redirectUrl } from './flows.js';
import { describeProblem } from './problems.js';
import { isAllowedOrigin } from '../api/cors.js';
import {
  CONSENT_WAIT_MS,
  newTripSecret,
  TRIP_COOKIE,
  tripCookie,
  completeConsent,
  consentScreenFor,
  startConsent,
  type ConsentFlowContext,
  type ConsentStartInput,
} from './consent-flow.js';
import {
  authenticateSession,
  openSession,
  rotateSessionSecret,
  SESSION_HEADER,
  type OpenFailure,
  type SessionRow,
} from './sessions.js';
import type { WidgetTokenRow } from './widget-tokens.js';
import { CONSENT_CALLBACK_PATH } from '../banks/consent/register.js';

/** A form-posted callback's fields; 16 KiB holds an ID token with room to spare (they are ~1–2 KiB). */
const readCallbackForm = koaBody({
  urlencoded: true,
  json: false,
  text: false,
  multipart: false,
  formLimit: 16 * 1024,
}) as unknown as (ctx: Context, next: Next) => Promise<void>;

async function callbackForm(ctx: Context): Promise<Record<string, unknown>> {
  if (!ctx.is('application/x-www-form-urlencoded')) return {};
  try {
    await readCallbackForm(ctx, async () => undefined);
  } catch {
    return {};
  }
  return (ctx.request as unknown as { body?: Record<string, unknown> }).body ?? {};
}

/** How often the page asks how its connection is going. */
const POLL_INTERVAL_MS = 1000;

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

const credentialsValidator = (components: Record<string, unknown>) =>
  compileValidator(
    {
      type: 'object',
      additionalProperties: false,
      required: ['rut', 'password'],
      properties: {
        bank_id: { type: 'string', minLength: 1, maxLength: 24 },
        holder_type: { enum: ['individual', 'business'] },
        rut: { type: 'string', minLength: 1, maxLength: 20 },
        password: { type: 'string', minLength: 1, maxLength: 256 },
        rut_empresa: { type: 'string', minLength: 1, maxLength: 20 },
      },
    },
    'body',
    components,
  );

/** A cookie of the request by name (the first, as RFC 6265 §5.4 orders them), or undefined. */
function cookieOf(ctx: Context, name: string): string | undefined {
  for (const part of ctx.get('Cookie').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

/**
 * The hosted widget, served by the API process: the page (`GET /widget?token=…&origin=…`), `embed.js`, the
 * page's own files, and the small JSON API under /widget/api that the page calls with its session. None of
 * it is in the OpenAPI document: it is the widget's private interface, not the customer's.
 */
export function widgetRouter(services: AppServices): Router {
  const { config } = services;
  const assets = loadStaticAssets();
  const theme = themeCss(config.widget);
  const logo = resolveLogo(config.widget, config.home);
  const logoSrc =
    logo.kind === 'url' ? logo.src : logo.kind === 'file' ? `/widget/assets/logo?v=${theme.version}` : null;
  const imgSources = ["'self'", 'data:', ...(logo.kind === 'url' && logo.origin ? [logo.origin] : [])];
  const apiOrigin = new URL(config.api.baseUrl).origin;
  /** Whether the trip cookie may say `Secure`: a browser drops a Secure cookie an http page sets, but localhost. */
  const secureOrigin = new URL(config.api.baseUrl).protocol === 'https:';
  const embedJs = assets
    .get('embed.js')!
    .body.replace("'__SVC_API_ORIGIN__'", JSON.stringify(apiOrigin))
    .replace(
      "'__SVC_FRAME_TITLES__'",
      JSON.stringify({ es: CATALOGUES.es['page.title'], en: CATALOGUES.en['page.title'] }),
    );
  const validateCredentials = credentialsValidator({});
  const validateCode = compileValidator(
    {
      type: 'object',
      additionalProperties: false,
      required: ['code'],
      properties: { code: { type: 'string', minLength: 1, maxLength: 32 } },
    },
    'body',
    {},
  );
  // The widget's forms are small; a larger body is no form of ours.
  const readBody = jsonBodyReader(16 * 1024);
  const context = (): WidgetContext => ({
    config,
    secrets: services.secrets,
    policy: linkPolicy(services),
    now: services.clock.now(),
  });
  const consentContext = (): ConsentFlowContext => ({
    ...context(),
    db: services.db,
    consentClients: services.consentClients,
    logger: services.logger,
    clock: services.clock,
    rateLimiter: services.rateLimiter,
  });
  const validateConsentStart = compileValidator(
    {
      type: 'object',
      additionalProperties: false,
      properties: {
        bank_id: { type: 'string', minLength: 1, maxLength: 24 },
        holder_type: { enum: ['individual', 'business'] },
        // A Brazilian bank's customer (checked by the flow: a CPF of 11 digits, a CNPJ of 14, with punctuation).
        cpf: { type: 'string', minLength: 1, maxLength: 20 },
        cnpj: { type: 'string', minLength: 1, maxLength: 24 },
      },
    },
    'body',
    {},
  );

  const router = new Router();
  const route = (path: string) => async (ctx: Context, next: Next) => {
    ctx.state.routePath = path;
    await next();
  };

  const sendPage = (ctx: Context, status: number, bootstrap: Bootstrap) => {
    const frameAncestors = bootstrap.opener_origin ?? "'none'";
    ctx.set('Content-Language', bootstrap.locale);
    ctx.set('Vary', 'Accept-Language');
    pageHeaders(ctx, [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src ${imgSources.join(' ')}`,
      "connect-src 'self'",
      "base-uri 'none'",
      "form-action 'none'",
      `frame-ancestors ${frameAncestors}`,
    ]);
    sendHtml(
      ctx,
      status,
      renderPage(bootstrap, {
        widgetJs: assets.get('widget.js')!.version,
        widgetCss: assets.get('widget.css')!.version,
        themeCss: theme.version,
        logoSrc,
      }),
    );
  };

  const localeOf = (ctx: Context, tokenLocale: Locale | null = null): Locale =>
    chooseLocale(tokenLocale, ctx.get('Accept-Language') || undefined, config.widget.locale);

  const errorBootstrap = (
    code: string,
    origin: string | null,
    locale: Locale,
    bankId: string | null = null,
  ): Bootstrap => ({
    session: null,
    kind: null,
    opener_origin: origin,
    hosted: false,
    exit_url: null,
    locale,
    messages: CATALOGUES[locale],
    operator: config.widget.name,
    consent: '',
    poll_interval_ms: POLL_INTERVAL_MS,
    banks: [],
    bank_id: bankId,
    holder_type: null,
    username_prefill: null,
    error: describeProblem(
      code,
      {
        tokenTtlMinutes: config.widget.tokenTtlMinutes,
        bankName: bankId ? findInstitution(bankId)?.name : undefined,
      },
      locale,
    ),
    status: null,
  });

  router.get('/widget', route('/widget'), async (ctx) => {
    if (ctx.method === 'HEAD') {
      // A link checker's HEAD must not spend the token: only a real open (GET) consumes it.
      ctx.status = 200;
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Cache-Control', 'no-store');
      ctx.body = '';
      return;
    }
    const now = services.clock.now();
    const token = typeof ctx.query.token === 'string' ? ctx.query.token : '';
    const browserLocale = localeOf(ctx);
    // No `origin`: widget_url opened as it was returned, as a top-level page or in a mobile web view. That
    // is the hosted flow when the token has a redirect_uri; otherwise the page explains (openSession).
    const hosted = ctx.query.origin === undefined;
    const origin = hosted ? null : parseOrigin(ctx.query.origin);
    const allowed = hosted || (origin !== null && isAllowedOrigin(origin, config.widget.allowedOrigins));
    // Checked before the token is consumed: a page that may not open the widget does not burn its token.
    if (!allowed) return sendPage(ctx, 400, errorBootstrap('origin_invalid', origin, browserLocale));
    if (!WIDGET_TOKEN.test(token) && !INTENT_TOKEN.test(token))
      return sendPage(ctx, 400, errorBootstrap('token_invalid', origin, browserLocale));
    const opened = await openSession(services.db, token, {
      origin,
      locale: (tokenLocale) => localeOf(ctx, tokenLocale),
      sessionTtlMs: config.widget.sessionTtlMinutes * 60_000,
      now,
    });
    if (!opened.ok)
      return sendPage(
        ctx,
        OPEN_FAILURE_STATUS[opened.problem],
        errorBootstrap(opened.problem, origin, browserLocale),
      );
    sendPage(ctx, 200, await bootstrapFor(opened.session, opened.secret, opened.widgetToken, now));
  });

  const bootstrapFor = async (
    session: SessionRow,
    secret: string,
    token: WidgetTokenRow | null,
    now: number,
  ): Promise<Bootstrap> => {
    const product: Product = token?.product ?? 'movements';
    const health = await bankHealth(services.db.reader, session.mode, now);
    const registered = await registeredBanks(services.db.reader, session.mode);
    const banks = institutionsOf(services.config).flatMap((bank) => {
      const connection = connectionMethod(bank, session.mode, registered.has(bank.id));
      // A consent bank is offered once the appliance is registered with it; a credential one with a connector.
      const reachable =
        connection === 'consent'
          ? registered.has(bank.id)
          : services.connectors(bank.id, session.mode) !== null;
      const holderTypes = (['individual', 'business'] as HolderType[]).filter((holder) =>
        offers(bank, product, holder),
      );
      if (!reachable || holderTypes.length === 0) return [];
      return [
        {
          id: bank.id,
          name: bank.name,
          status: health.get(bank.id) ?? ('up' as const),
          holder_types: holderTypes,
          connection,
          consent:
            connection === 'consent'
              ? consentScreenFor(product, bank.name, {
                  config,
                  now,
                  locale: session.locale,
                  zone: profileOf(consentProfileOf(bank).security).zone,
                })
              : null,
          // What the person gives before going to the bank: a Brazilian bank's consent names its customer.
          asks_cpf: connection === 'consent' && profileOf(consentProfileOf(bank).security).asksHolderIds,
        },
      ];
    });
    // Consent banks first: with 11 password banks before them they sat below a phone's fold, unmarked.
    // (A stable sort: each group keeps the institutions' order.)
    banks.sort((a, b) => Number(a.connection !== 'consent') - Number(b.connection !== 'consent'));
    const hosted = session.opener_origin === '';
    const base: Bootstrap = {
      session: secret,
      kind: session.kind,
      opener_origin: hosted ? null : session.opener_origin,
      hosted,
      exit_url:
        hosted && token?.redirect_uri
          ? redirectUrl(token.redirect_uri, { error: 'exited', state: token.state })
          : null,
      locale: session.locale,
      messages: CATALOGUES[session.locale],
      operator: config.widget.name,
      consent: consentText(config.widget.name, session.locale),
      poll_interval_ms: POLL_INTERVAL_MS,
      banks,
      bank_id: session.bank_id,
      holder_type: null,
      username_prefill: token?.username_prefill ? formatRut(token.username_prefill) : null,
      error: null,
      status: null,
    };
    if (session.kind === 'connect' && token?.connection_limit != null && token.external_user_id !== null) {
      const owner = { orgId: session.org_id, mode: session.mode, externalUserId: token.external_user_id };
      if ((await countLinksOfUser(services.db.reader, owner)) >= token.connection_limit)
        base.error = describeProblem(
          'connection_limit_reached',
          { connectionLimit: token.connection_limit },
          session.locale,
        );
    }
    if (session.kind !== 'connect' && session.link_id) {
      const link = await findLink(services.db.reader, session.link_id);
      base.holder_type = link?.holder_type ?? null;
    }
    if (session.kind === 'mfa') base.status = await sessionStatus(services.db, session, statusContext(now));
    return base;
  };

  const statusContext = (now: number) => ({ now, mfaAttempts: config.refresh.mfaAttempts });

  const withSession = async (ctx: Context): Promise<SessionRow> => {
    ctx.set('Cache-Control', 'no-store');
    return authenticateSession(
      services.db.reader,
      ctx.get(SESSION_HEADER) || undefined,
      services.clock.now(),
    );
  };
  const readJson = async (ctx: Context): Promise<unknown> => {
    if (!ctx.is('application/json'))
      throw errors.badRequest('unsupported_media_type', 'Send request bodies as application/json.');
    return readBody(ctx);
  };

  router.get('/widget/api/status', route('/widget/api/status'), async (ctx) => {
    const session = await withSession(ctx);
    ctx.body = await sessionStatus(services.db, session, statusContext(services.clock.now()));
  });

  router.post('/widget/api/credentials', route('/widget/api/credentials'), async (ctx) => {
    const session = await withSession(ctx);
    const body = validateCredentials(await readJson(ctx)) as CredentialsInput;
    await services.db.transaction((trx) => submitCredentials(trx, session, body, context()));
    const fresh = await authenticateSession(services.db.knex, ctx.get(SESSION_HEADER), services.clock.now());
    ctx.body = await sessionStatus(services.db, fresh, statusContext(services.clock.now()));
  });

  router.post('/widget/api/mfa', route('/widget/api/mfa'), async (ctx) => {
    const session = await withSession(ctx);
    const body = validateCode(await readJson(ctx)) as { code: string };
    await services.db.transaction((trx) => submitMfa(trx, session, body.code, context()));
    ctx.body = await sessionStatus(services.db, session, statusContext(services.clock.now()));
  });

  router.post('/widget/api/consent', route('/widget/api/consent'), async (ctx) => {
    const session = await withSession(ctx);
    const body = validateConsentStart(await readJson(ctx)) as ConsentStartInput;
    const tripSecret = newTripSecret();
    const start = await startConsent(session, body, consentContext(), tripSecret);
    ctx.append(
      'Set-Cookie',
      tripCookie(tripSecret, {
        callbackPath: CONSENT_CALLBACK_PATH,
        secure: secureOrigin,
        maxAgeMs: CONSENT_WAIT_MS,
      }),
    );
    ctx.body = { ...start, status: { state: 'awaiting_bank', expires_at: start.expires_at } };
  });

  /**
   * Where the bank sends the browser back (docs/open-finance.md). In the hosted flow it is the widget's own
   * window: the page is the widget again, under a new session secret (the old one went with the page that
   * left for the bank), and goes on polling. In a popup it says how the trip ended and closes; the widget
   * that opened it learns the rest by polling. The query carries the code: never logged, never cached.
   */
  const consentCallback = async (ctx: Context, fields: Record<string, unknown>) => {
    const single = (name: string) => {
      const value = fields[name];
      return typeof value === 'string' ? value : undefined;
    };
    const outcome = await completeConsent(
      {
        state: single('state'),
        code: single('code'),
        iss: single('iss'),
        error: single('error'),
        response: single('response'),
        id_token: single('id_token'),
      },
      consentContext(),
      { tripCookie: cookieOf(ctx, TRIP_COOKIE) },
    );
    const now = services.clock.now();
    const session = outcome.session;
    const problem = outcome.ok ? null : outcome.problem;
    // No session to go back to (a callback that names no trip, a used one, a window that has timed out, or a
    // browser other than the trip's).
    if (!session || problem === 'session_expired')
      return sendPage(
        ctx,
        problem === 'consent_used' || problem === 'consent_other_browser'
          ? 409
          : problem === 'session_expired'
            ? 200
            : 400,
        errorBootstrap(problem ?? 'consent_unknown', null, session?.locale ?? localeOf(ctx)),
      );
    if (session.opener_origin !== '') {
      // The popup's page: the trip's end in words, then it closes; the widget that opened it polls.
      const page = errorBootstrap(problem ?? 'consent_returned', null, session.locale, session.bank_id);
      return sendPage(ctx, 200, { ...page, error: problem ? page.error : null, returned_from_bank: true });
    }
    const secret = await rotateSessionSecret(services.db.knex, session.id, now);
    const fresh = await authenticateSession(services.db.knex, secret, now);
    const bootstrap = await bootstrapFor(fresh, secret, await widgetTokenOf(services.db.reader, fresh), now);
    bootstrap.status = await sessionStatus(services.db, fresh, statusContext(now));
    sendPage(ctx, 200, bootstrap);
  };
  router.get(CONSENT_CALLBACK_PATH, route(CONSENT_CALLBACK_PATH), (ctx) => consentCallback(ctx, ctx.query));
  /**
   * The same callback as a form post (OAuth 2.0 Form Post Response Mode §2): a Brazilian bank's `code
   * id_token` answer (FAPI 1.0 Advanced §5.2.2.1), which the fragment would keep from any server. The form
   * is small (a code, an ID token, the state, `iss`); anything else is no callback.
   */
  router.post(CONSENT_CALLBACK_PATH, route(CONSENT_CALLBACK_PATH), async (ctx) =>
    consentCallback(ctx, await callbackForm(ctx)),
  );

  router.post('/widget/api/finish', route('/widget/api/finish'), async (ctx) => {
    const session = await withSession(ctx);
    ctx.body = await services.db.transaction((trx) => finishSession(trx, session, context()));
  });

  router.get('/widget/embed.js', route('/widget/embed.js'), async (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.body = embedJs;
  });

  router.get('/widget/assets/:name', route('/widget/assets/{name}'), async (ctx) => {
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
  });

  return router;
}
