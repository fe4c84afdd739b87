import type { Context } from 'koa';
import { compileValidator } from '../api/validation.js';
import { finishSession, submitCredentials, submitMfa, type CredentialsInput } from './flows.js';
import type { WidgetKit, WidgetRoute } from './kit.js';
import { authenticateSession, SESSION_HEADER } from './sessions.js';

/*
 * The small JSON API under /widget/api that the page calls with its session (`X-Widget-Session`): where its
 * connection stands, the credentials form, the MFA code, and closing after success. It is the widget's
 * private interface, not the customer's: none of it is in the OpenAPI document. The consent bank's steps
 * are in consent-routes.ts.
 */

const validateCredentials = compileValidator(
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
  {},
);

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

async function showStatus(ctx: Context, kit: WidgetKit): Promise<void> {
  const session = await kit.session(ctx);
  ctx.body = await kit.status(session, kit.services.clock.now());
}

/** The credentials form: a connect makes its link, a reconnect renews its link's login; then the status. */
async function submitCredentialsRoute(ctx: Context, kit: WidgetKit): Promise<void> {
  const session = await kit.session(ctx);
  const body = validateCredentials(await kit.readJson(ctx)) as CredentialsInput;
  const { db, clock } = kit.services;
  await db.transaction((trx) => submitCredentials(trx, session, body, kit.context()));
  // The session as the submission left it: it now follows the link's first sync, or says why not.
  const fresh = await authenticateSession(db.knex, ctx.get(SESSION_HEADER), clock.now());
  ctx.body = await kit.status(fresh, clock.now());
}

async function submitMfaRoute(ctx: Context, kit: WidgetKit): Promise<void> {
  const session = await kit.session(ctx);
  const body = validateCode(await kit.readJson(ctx)) as { code: string };
  await kit.services.db.transaction((trx) => submitMfa(trx, session, body.code, kit.context()));
  ctx.body = await kit.status(session, kit.services.clock.now());
}

/** Closing after success: the exchange token for the opener (or the hosted flow's way back). */
async function finish(ctx: Context, kit: WidgetKit): Promise<void> {
  const session = await kit.session(ctx);
  ctx.body = await kit.services.db.transaction((trx) => finishSession(trx, session, kit.context()));
}

export const sessionRoutes: WidgetRoute[] = [
  { method: 'get', path: '/widget/api/status', handle: showStatus },
  { method: 'post', path: '/widget/api/credentials', handle: submitCredentialsRoute },
  { method: 'post', path: '/widget/api/mfa', handle: submitMfaRoute },
  { method: 'post', path: '/widget/api/finish', handle: finish },
];
