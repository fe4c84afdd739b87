import type { Context } from 'koa';
import { html, type HtmlValue } from '../../html/html.js';
import type { ConsoleKit, ConsoleRoute, ConsoleState } from '../kit.js';
import { layout, totpField } from '../layout.js';
import {
  acceptedStep,
  base32Decode,
  codeChecker,
  groupedSecret,
  newTotpSecret,
  openEnrolment,
  otpauthUri,
  sealEnrolment,
  sealTotpSecret,
} from '../totp.js';
import { disableTotp, enableTotp } from '../users.js';
import { verifyPassword } from '../passwords.js';
import { csrfField, noticeHtml, problemHtml } from '../views.js';

/*
 * The signed-in user's own account: whether their second factor (TOTP, totp.ts) is on, turning it on (a
 * new secret shown once, confirmed by the password and a code from the app before anything is saved) and
 * off (password and a current code). Each check of the password counts as a sign-in attempt. Every user has this page, whatever their role; nobody sees or changes anyone else's
 * factor here: an operator removes a lost one with `svc console users reset --remove-totp`.
 */

const ACCOUNT = '/console/account';

const state = (ctx: Context) => ctx.state.console as ConsoleState;
const pageContext = (ctx: Context, kit: ConsoleKit) => ({
  ...kit.pageContext(ctx),
  current: 'account' as const,
});

/** The account page, with `notice` (HTML) above: what just changed, or why it was refused. */
function renderAccount(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue): void {
  const { user, claims } = state(ctx);
  const t = kit.words(ctx);
  const on = user.totp_secret_sealed !== null;
  const form = on
    ? html`<form method="post" action="${ACCOUNT}/totp/disable" class="console-form">${csrfField(claims.csrf)}
<fieldset><legend>${t('totp.turn_off')}</legend>
<p>${t('totp.turn_off_intro')}</p>
<input type="hidden" name="email" autocomplete="username" value="${user.email}">
<label for="password">${t('signin.password')}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
${totpField(t('signin.totp'))}
<button type="submit" class="danger">${t('totp.turn_off')}</button>
</fieldset></form>`
    : html`<form method="post" action="${ACCOUNT}/totp/start" class="console-form">${csrfField(claims.csrf)}
<button type="submit" class="primary">${t('totp.turn_on')}</button>
</form>`;
  kit.send(
    ctx,
    status,
    layout(
      pageContext(ctx, kit),
      t('account.title'),
      html`${notice}
<p>${t('overview.signed_in', { email: user.email, role: t(`role.${user.role}`) })}</p>
<h2>${t('totp.heading')}</h2>
<p><strong>${t(on ? 'totp.is_on' : 'totp.is_off')}</strong></p>
<p>${t(on ? 'totp.lost' : 'totp.about')}</p>
${form}`,
    ),
  );
}

/** The enrolment page for `secret` (base32), carried to the next step sealed in `sealed`. */
function renderEnrolment(
  ctx: Context,
  kit: ConsoleKit,
  status: number,
  secret: string,
  sealed: string,
  problem: HtmlValue = null,
): void {
  const { user, claims } = state(ctx);
  const t = kit.words(ctx);
  const uri = otpauthUri(kit.services.config.widget.name, user.email, secret);
  kit.send(
    ctx,
    status,
    layout(
      pageContext(ctx, kit),
      t('totp.enrol_title'),
      html`${problem}
<ol class="steps">
<li>${t('totp.enrol_app')}</li>
<li>${t('totp.enrol_add')}
<dl class="facts">
<dt>${t('totp.secret')}</dt><dd><code id="totp-secret" class="totp-key">${groupedSecret(secret)}</code></dd>
<dt>${t('totp.uri')}</dt><dd><code class="totp-uri">${uri}</code></dd>
</dl></li>
<li>${t('totp.enrol_code')}</li>
</ol>
<form method="post" action="${ACCOUNT}/totp/confirm" class="console-form">${csrfField(claims.csrf)}
<input type="hidden" name="enrolment" value="${sealed}">
<input type="hidden" name="email" autocomplete="username" value="${user.email}">
<label for="password">${t('signin.password')}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
${totpField(t('signin.totp'))}
<button type="submit" class="primary">${t('totp.confirm')}</button>
</form>
<p><a href="${ACCOUNT}">${t('totp.cancel')}</a></p>`,
    ),
  );
}

const showAccount: ConsoleRoute['handle'] = async (ctx, kit) => renderAccount(ctx, kit, 200, null);

/** A new secret: shown on the page and carried back sealed (totp.ts says why); nothing is saved yet. */
const startTotpAction: ConsoleRoute['handle'] = async (ctx, kit) => {
  const { user, claims } = state(ctx);
  if (user.totp_secret_sealed !== null)
    return renderAccount(ctx, kit, 409, problemHtml(kit.words(ctx)('totp.is_on')));
  const { secrets, clock } = kit.services;
  const secret = newTotpSecret();
  const sealed = sealEnrolment(secrets, { userId: user.id, csrf: claims.csrf }, secret, clock.now());
  renderEnrolment(ctx, kit, 200, secret, sealed);
};

/** The app's code proves it holds the secret: only then is the secret saved, sealed. */
const confirmTotpAction: ConsoleRoute['handle'] = async (ctx, kit) => {
  const { db, clock, secrets } = kit.services;
  const { user, claims, form } = state(ctx);
  const t = kit.words(ctx);
  if (user.totp_secret_sealed !== null) return renderAccount(ctx, kit, 409, problemHtml(t('totp.is_on')));
  const now = clock.now();
  const sealed = (form.enrolment ?? '').slice(0, 1024);
  const secret = openEnrolment(secrets, { userId: user.id, csrf: claims.csrf }, sealed, now);
  if (!secret) return renderAccount(ctx, kit, 400, problemHtml(t('totp.expired')));
  const step = acceptedStep(base32Decode(secret)!, form.totp ?? '', now, null);
  if (step === null) return renderEnrolment(ctx, kit, 400, secret, sealed, problemHtml(t('totp.wrong_code')));
  // A session left open must not be enough to put a factor of someone else's on the account: the
  // password again, counted as a sign-in attempt.
  const password = (form.password ?? '').slice(0, 1024);
  const confirmed = await kit.checkCredentials(ctx, async (lane) =>
    (await verifyPassword(password, user.password_hash, lane)) ? user : null,
  );
  if (confirmed === 'throttled')
    return renderEnrolment(ctx, kit, 429, secret, sealed, problemHtml(t('signin.throttled')));
  if (confirmed === null)
    return renderEnrolment(ctx, kit, 400, secret, sealed, problemHtml(t('totp.wrong_password')));
  const updated = await db.transaction((trx) =>
    enableTotp(trx, { userId: user.id, sealed: sealTotpSecret(secrets, user.id, secret), step, now }),
  );
  await kit.startSession(ctx, updated);
  state(ctx).user = updated;
  renderAccount(ctx, kit, 200, noticeHtml(t('totp.enabled_done')));
};

const disableTotpAction: ConsoleRoute['handle'] = async (ctx, kit) => {
  const { db, clock, secrets } = kit.services;
  const { user, form } = state(ctx);
  const t = kit.words(ctx);
  if (user.totp_secret_sealed === null) return renderAccount(ctx, kit, 409, problemHtml(t('totp.is_off')));
  const now = clock.now();
  const result = await kit.checkCredentials(ctx, (lane) =>
    disableTotp(db, {
      userId: user.id,
      lane,
      password: (form.password ?? '').slice(0, 1024),
      checkTotp: codeChecker(secrets, form.totp?.slice(0, 16), now),
      now,
    }),
  );
  if (result === 'throttled') return renderAccount(ctx, kit, 429, problemHtml(t('signin.throttled')));
  if (result === null) return renderAccount(ctx, kit, 400, problemHtml(t('totp.wrong')));
  await kit.startSession(ctx, result);
  state(ctx).user = result;
  renderAccount(ctx, kit, 200, noticeHtml(t('totp.disabled_done')));
};

/** The signed-in user's own account, under /console: every user's, whatever their role. */
export const accountRoutes: ConsoleRoute[] = [
  { method: 'get', under: 'console', path: '/account', needs: 'read', handle: showAccount },
  { method: 'post', under: 'console', path: '/account/totp/start', needs: 'read', handle: startTotpAction },
  {
    method: 'post',
    under: 'console',
    path: '/account/totp/confirm',
    needs: 'read',
    handle: confirmTotpAction,
  },
  {
    method: 'post',
    under: 'console',
    path: '/account/totp/disable',
    needs: 'read',
    handle: disableTotpAction,
  },
];
