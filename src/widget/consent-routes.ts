import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import { compileValidator } from '../api/validation.js';
import { CONSENT_CALLBACK_PATH } from '../banks/consent/register.js';
import {
  completeConsent,
  CONSENT_WAIT_MS,
  newTripSecret,
  startConsent,
  TRIP_COOKIE,
  tripCookie,
  type ConsentFlowContext,
  type ConsentStartInput,
} from './consent/consent-flow.js';
import type { WidgetKit, WidgetRoute } from './kit.js';
import { authenticateSession, rotateSessionSecret } from './sessions.js';
import { widgetTokenOf } from './widget-tokens.js';

/*
 * A consent bank's two steps of the widget (docs/open-finance.md): "Continue to the bank" pushes the
 * authorization request and hands the page the bank's address; the bank sends the browser back to the
 * callback. The flow itself is consent/consent-flow.ts.
 */

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

/** A cookie of the request by name (the first, as RFC 6265 §5.4 orders them), or undefined. */
function cookieOf(ctx: Context, name: string): string | undefined {
  for (const part of ctx.get('Cookie').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

function consentContext(kit: WidgetKit): ConsentFlowContext {
  const { services } = kit;
  return {
    ...kit.context(),
    db: services.db,
    consentClients: services.consentClients,
    logger: services.logger,
    clock: services.clock,
    rateLimiter: services.rateLimiter,
  };
}

/** "Continue to the bank": the bank's page to go to, and the trip cookie that ties its callback to this browser. */
async function startConsentRoute(ctx: Context, kit: WidgetKit): Promise<void> {
  const session = await kit.session(ctx);
  const body = validateConsentStart(await kit.readJson(ctx)) as ConsentStartInput;
  const tripSecret = newTripSecret();
  const start = await startConsent(session, body, consentContext(kit), tripSecret);
  ctx.append(
    'Set-Cookie',
    tripCookie(tripSecret, {
      callbackPath: CONSENT_CALLBACK_PATH,
      // A browser drops a Secure cookie an http page sets (but on localhost).
      secure: new URL(kit.services.config.api.baseUrl).protocol === 'https:',
      maxAgeMs: CONSENT_WAIT_MS,
    }),
  );
  ctx.body = { ...start, status: { state: 'awaiting_bank', expires_at: start.expires_at } };
}

/**
 * Where the bank sends the browser back (docs/open-finance.md). In the hosted flow it is the widget's own
 * window: the page is the widget again, under a new session secret (the old one went with the page that
 * left for the bank), and goes on polling. In a popup it says how the trip ended and closes; the widget
 * that opened it learns the rest by polling. The query carries the code: never logged, never cached.
 */
async function consentCallback(ctx: Context, kit: WidgetKit, fields: Record<string, unknown>): Promise<void> {
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
    consentContext(kit),
    { tripCookie: cookieOf(ctx, TRIP_COOKIE) },
  );
  const { db, clock } = kit.services;
  const now = clock.now();
  const session = outcome.session;
  const problem = outcome.ok ? null : outcome.problem;
  // No session to go back to (a callback that names no trip, a used one, a window that has timed out, or a
  // browser other than the trip's).
  if (!session || problem === 'session_expired')
    return kit.sendPage(
      ctx,
      problem === 'consent_used' || problem === 'consent_other_browser'
        ? 409
        : problem === 'session_expired'
          ? 200
          : 400,
      kit.errorPage(problem ?? 'consent_unknown', null, session?.locale ?? kit.localeOf(ctx)),
    );
  if (session.opener_origin !== '') {
    // The popup's page: the trip's end in words, then it closes; the widget that opened it polls.
    const page = kit.errorPage(problem ?? 'consent_returned', null, session.locale, session.bank_id);
    return kit.sendPage(ctx, 200, { ...page, error: problem ? page.error : null, returned_from_bank: true });
  }
  const secret = await rotateSessionSecret(db.knex, session.id, now);
  const fresh = await authenticateSession(db.knex, secret, now);
  const bootstrap = await kit.sessionPage(fresh, secret, await widgetTokenOf(db.reader, fresh), now);
  bootstrap.status = await kit.status(fresh, now);
  kit.sendPage(ctx, 200, bootstrap);
}

export const consentRoutes: WidgetRoute[] = [
  { method: 'post', path: '/widget/api/consent', handle: startConsentRoute },
  { method: 'get', path: CONSENT_CALLBACK_PATH, handle: (ctx, kit) => consentCallback(ctx, kit, ctx.query) },
  /**
   * The same callback as a form post (OAuth 2.0 Form Post Response Mode §2): a Brazilian bank's `code
   * id_token` answer (FAPI 1.0 Advanced §5.2.2.1), which the fragment would keep from any server. The form
   * is small (a code, an ID token, the state, `iss`); anything else is no callback.
   */
  {
    method: 'post',
    path: CONSENT_CALLBACK_PATH,
    handle: async (ctx, kit) => consentCallback(ctx, kit, await callbackForm(ctx)),
  },
];
