import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { AppServices } from '../api/services.js';
import { ApiError } from '../errors/api-error.js';
import { html, type Html } from '../html/html.js';
import { sendHtml } from '../html/respond.js';
import { clientAddress } from '../net/client-address.js';
import {
  KNOWN_DEVICE_COOKIE,
  knownDeviceCookie,
  newKnownDevice,
  signKnownDevice,
  verifyKnownDevice,
} from './known-device.js';
import { consoleMessage, wordsFor, type ConsoleMessageKey } from './messages.js';
import { layout, totpField, type PageContext } from './layout.js';
import type { HashLane } from './passwords.js';
import { formFields, readCookie, SESSION_COOKIE, sessionCookie } from './request.js';
import { newSession, signSession, type SessionClaims } from './session-token.js';
import { openSession } from './sessions.js';
import { ATTEMPTS_KEY_LABEL, reserveAttempt, settleSuccess } from './sign-in-attempts.js';
import { codeChecker } from './totp.js';
import { setPasswordWithToken, signIn, userOfEmail, userOfToken, type ConsoleUserRow } from './users.js';
import { csrfField } from './views.js';

/*
 * The way into the console, before any session (docs/console.md, "Sign-in and sessions"): the sign-in form
 * and its POST (email and password, then the code of a second factor where the user has one), and the page
 * of an invitation's or a reset's link, where the password is set. Every check of a password is counted
 * before it runs (`checkCounted`), and a success begins a session (`beginSession`): the frame (http.ts)
 * lends both to the signed-in pages too, for a check of the password there and the session after it.
 */

/** What the frame lends the pages before a session. */
export interface SignInFrame {
  services: AppServices;
  /** The page context of a page before any session: the request's language, no user. */
  pageContext(ctx: Context): PageContext;
  refuse(ctx: Context, status: number, key: ConsoleMessageKey): void;
}

/** A route before any session: the frame mounts these ahead of its session check. */
export interface SignInRoute {
  method: 'get' | 'post';
  /** Under /console. */
  path: string;
  handle(ctx: Context, door: SignInDoor): Promise<void>;
}

/** Checks of a password counted as sign-in attempts, and the session a success begins. */
export interface SignInDoor extends SignInFrame {
  /**
   * A password (and code) check, counted before it runs (sign-in-attempts.ts). From a browser known to this
   * user: against the browser's own budget only, its hash in the known lane (passwords.ts), so nothing a
   * stranger spends (an email's budget, an address's, the open hash queue) refuses it. Otherwise against
   * the email's budget and the client address's (net/client-address.ts), in the open lane. Over a budget it
   * answers 'throttled' with Retry-After and checks nothing. A success starts the counts again and makes
   * the browser known to the user.
   */
  checkCounted<T extends { ok: boolean; user?: ConsoleUserRow }>(
    ctx: Context,
    email: string,
    user: ConsoleUserRow | undefined,
    now: number,
    check: (lane: HashLane) => Promise<T>,
  ): Promise<T | 'throttled'>;
  /**
   * A new session for `user`, as this response's cookie: a row on the server and a token naming it. A
   * change of credentials passes the session's own sign-in time, so that it never extends the session.
   */
  beginSession(ctx: Context, user: ConsoleUserRow, now: number, authTime?: number): Promise<SessionClaims>;
}

export function signInDoor(frame: SignInFrame): SignInDoor {
  const { db, secrets } = frame.services;
  const attemptsKey = secrets.derivedKey(ATTEMPTS_KEY_LABEL)!.key;
  async function checkCounted<T extends { ok: boolean; user?: ConsoleUserRow }>(
    ctx: Context,
    email: string,
    user: ConsoleUserRow | undefined,
    now: number,
    check: (lane: HashLane) => Promise<T>,
  ): Promise<T | 'throttled'> {
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
  }
  return {
    ...frame,
    checkCounted,
    async beginSession(ctx, user, now, authTime = now) {
      const sid = await db.transaction((trx) => openSession(trx, user.id, authTime, now));
      const claims = newSession(user.id, sid, Number(user.session_epoch), now, authTime);
      ctx.append('Set-Cookie', sessionCookie(signSession(secrets, claims), claims.exp - now));
      return claims;
    },
  };
}

/** Whether a path of the console is one of these pages, which open without a session. */
export function opensWithoutSession(path: string): boolean {
  return path === '/console/login' || path.startsWith('/console/accept/');
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

function signInPage(
  context: PageContext,
  form: {
    email: string;
    problem: ConsoleMessageKey | null;
    problemValues?: Record<string, string>;
    askTotp: boolean;
    /** The pre-session CSRF token, which the form sends back. */
    formToken: string;
  },
): Html {
  const t = wordsFor(context.locale);
  const problem =
    form.problem &&
    html`<p class="error" role="alert" id="signin-problem">${t(form.problem, form.problemValues)}</p>`;
  const described = form.problem && html` aria-describedby="signin-problem"`;
  const totp = form.askTotp && totpField(t('signin.totp'));
  return layout(
    context,
    t('signin.title'),
    html`${problem}
<form method="post" action="/console/login" class="console-form"${described}>${csrfField(form.formToken)}
<label for="email">${t('signin.email')}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${form.email}">
<label for="password">${t('signin.password')}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
${totp}
<button type="submit" class="primary">${t('signin.submit')}</button>
</form>`,
  );
}

function acceptPage(
  context: PageContext,
  form: { email: string; token: string; problem: string | null; formToken: string },
): Html {
  const t = wordsFor(context.locale);
  const problem = form.problem && html`<p class="error" role="alert">${form.problem}</p>`;
  return layout(
    context,
    t('accept.title'),
    html`<p>${t('accept.intro', { email: form.email })}</p>
${problem}
<form method="post" action="/console/accept/${encodeURIComponent(form.token)}" class="console-form">${csrfField(form.formToken)}
<input type="hidden" name="email" autocomplete="username" value="${form.email}">
<label for="password">${t('accept.password')}</label>
<input id="password" name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="256">
<label for="confirm">${t('accept.confirm')}</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" required minlength="12" maxlength="256">
<button type="submit" class="primary">${t('accept.submit')}</button>
</form>`,
  );
}

const showSignIn: SignInRoute['handle'] = async (ctx, door) => {
  const expired = readCookie(ctx, SESSION_COOKIE) !== null;
  sendHtml(
    ctx,
    200,
    signInPage(door.pageContext(ctx), {
      email: '',
      problem: expired ? 'signin.expired' : null,
      askTotp: false,
      formToken: formToken(ctx),
    }),
  );
};

const signInAction: SignInRoute['handle'] = async (ctx, door) => {
  const { db, clock, secrets, logger } = door.services;
  const fields = await formFields(ctx);
  const email = (fields.email ?? '').slice(0, 254);
  const now = clock.now();
  const page = (
    status: number,
    problem: ConsoleMessageKey,
    values?: Record<string, string>,
    askTotp = false,
  ) =>
    sendHtml(
      ctx,
      status,
      signInPage(door.pageContext(ctx), {
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
  const result = await door.checkCounted(ctx, email, user, now, (lane) =>
    signIn(db, {
      user,
      lane,
      address: clientAddress(ctx),
      password: (fields.password ?? '').slice(0, 1024),
      checkTotp: codeChecker(secrets, fields.totp?.slice(0, 16), now, (row) =>
        logger.warn(
          { user: row },
          "a console user's second factor does not open (a master key this process lacks, or a damaged row); svc console users reset --remove-totp removes it",
        ),
      ),
      now,
    }),
  );
  if (result === 'throttled') return page(429, 'signin.throttled', undefined, askedTotp);
  if (result.ok) {
    await door.beginSession(ctx, result.user, now);
    ctx.redirect('/console');
    ctx.status = 303;
    return;
  }
  if (result.reason === 'second_factor') return page(401, 'signin.second_factor', undefined, true);
  return askedTotp ? page(401, 'totp.wrong', undefined, true) : page(401, 'signin.wrong');
};

const showInvitation: SignInRoute['handle'] = async (ctx, door) => {
  const { db, clock } = door.services;
  const found = await userOfToken(db.reader, ctx.params.token!, clock.now());
  if (!found) return door.refuse(ctx, 404, 'accept.invalid');
  sendHtml(
    ctx,
    200,
    acceptPage(door.pageContext(ctx), {
      email: found.user.email,
      token: ctx.params.token!,
      problem: null,
      formToken: formToken(ctx),
    }),
  );
};

const acceptAction: SignInRoute['handle'] = async (ctx, door) => {
  const { db, clock } = door.services;
  const token = ctx.params.token!;
  const fields = await formFields(ctx);
  const now = clock.now();
  const found = await userOfToken(db.reader, token, now);
  if (!found) return door.refuse(ctx, 404, 'accept.invalid');
  const context = door.pageContext(ctx);
  const again = (problem: string, status = 400) =>
    sendHtml(
      ctx,
      status,
      acceptPage(context, { email: found.user.email, token, problem, formToken: formToken(ctx) }),
    );
  const text = (key: ConsoleMessageKey) => consoleMessage(context.locale, key);
  if (!formTokenMatches(ctx, fields._csrf)) return again(text('signin.form_expired'), 403);
  if ((fields.password ?? '') !== (fields.confirm ?? '')) return again(text('accept.mismatch'));
  let user: ConsoleUserRow;
  try {
    user = await db.transaction((trx) => setPasswordWithToken(trx, token, fields.password ?? '', now));
  } catch (error) {
    if (error instanceof ApiError && error.status === 400) return again(error.message);
    throw error;
  }
  await door.beginSession(ctx, user, now);
  ctx.redirect('/console');
  ctx.status = 303;
};

export const signInRoutes: SignInRoute[] = [
  { method: 'get', path: '/login', handle: showSignIn },
  { method: 'post', path: '/login', handle: signInAction },
  { method: 'get', path: '/accept/:token', handle: showInvitation },
  { method: 'post', path: '/accept/:token', handle: acceptAction },
];
