import { Agent, fetch as undiciFetch } from 'undici';
import { inviteConsoleUser, setPasswordWithToken, type ConsoleRole } from '../../src/console/users.js';
import type { Test } from 'tap';
import { createTenant, linkBody, type TestApp } from './harness.js';

/** The password every console user of the tests chooses. */
export const PASSWORD = 'a long and quiet password';

/** A console user invited as the CLI invites one (`svc console users invite`): the user and the link's token. */
export function invite(
  app: Pick<TestApp, 'db' | 'clock'>,
  orgId: string | null,
  email = 'ana@lender.cl',
  role: ConsoleRole = 'admin',
) {
  return app.db.transaction((trx) =>
    inviteConsoleUser(trx, { email, role, orgId, actor: 'cli:test', now: app.clock.now() }),
  );
}

/** A console user made as the CLI does, signed in over HTTP: returns a request function with its session. */
export async function signedIn(
  app: TestApp,
  role: ConsoleRole,
  orgId: string | null,
  email: string,
  language = 'en',
) {
  const { token } = await invite(app, orgId, email, role);
  const user = await app.db.transaction((trx) => setPasswordWithToken(trx, token, PASSWORD, app.clock.now()));
  return Object.assign(await signIn(app, email, language), { userId: user.id });
}

/**
 * Signs in with the password through the form (a user whose password is set): a console request function
 * with that session, in `language`. POSTs carry the session's CSRF token unless `form._csrf` says otherwise.
 */
export async function signIn(app: Pick<TestApp, 'url'>, email: string, language = 'en') {
  const form = await preSessionToken(app.url);
  const response = await fetch(`${app.url}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookie },
    body: new URLSearchParams({ _csrf: form.token, email, password: PASSWORD }).toString(),
    redirect: 'manual',
  });
  if (response.status !== 303) throw new Error(`sign-in of ${email}: ${response.status}`);
  const cookie = response.headers
    .getSetCookie()
    .find((set) => set.startsWith('svc_console='))!
    .split(';')[0]!;
  const home = await fetch(`${app.url}/console/orgs`, { headers: { cookie }, redirect: 'manual' });
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await home.text())?.[1] ?? '';
  return async (method: 'GET' | 'POST', path: string, form: Record<string, string> = {}) => {
    const init: RequestInit = {
      method,
      headers: { cookie, 'accept-language': language },
      redirect: 'manual',
    };
    if (method === 'POST') {
      init.body = new URLSearchParams({ _csrf: csrf, ...form }).toString();
      (init.headers as Record<string, string>)['content-type'] = 'application/x-www-form-urlencoded';
    }
    const answer = await fetch(`${app.url}${path}`, init);
    return {
      status: answer.status,
      text: await answer.text(),
      location: answer.headers.get('location'),
      retryAfter: answer.headers.get('retry-after'),
    };
  };
}

/** A console answer as a test reads it. */
export interface ConsolePage {
  status: number;
  headers: Headers;
  text: string;
}

/** Connections from one loopback address each (127.0.0.2, …): clients the server tells apart by address. */
const fromAddress = new Map<string, Agent>();

function agentFrom(address: string): Agent {
  let agent = fromAddress.get(address);
  if (!agent) fromAddress.set(address, (agent = new Agent({ localAddress: address })));
  return agent;
}

/**
 * One console request with no session of its own: `cookie` and `form` say what to send, `from` the loopback
 * address it comes from (127.0.0.1 by default).
 */
export async function consolePage(
  app: TestApp,
  method: string,
  path: string,
  options: {
    cookie?: string;
    form?: Record<string, string>;
    headers?: Record<string, string>;
    from?: string;
  } = {},
): Promise<ConsolePage> {
  const headers: Record<string, string> = { 'accept-language': 'en', ...(options.headers ?? {}) };
  if (options.cookie) headers.cookie = options.cookie;
  let body: string | undefined;
  if (options.form) {
    body = new URLSearchParams(options.form).toString();
    headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  if (
    method === 'POST' &&
    options.form &&
    options.form._csrf === undefined &&
    (path === '/console/login' || path.startsWith('/console/accept/'))
  ) {
    // As a browser would: the form's page first, for the pre-session token it sends back.
    const { cookie, token } = await preSessionToken(app.url, { from: options.from, cookie: options.cookie });
    headers.cookie = options.cookie ? `${options.cookie}; ${cookie}` : cookie;
    body = new URLSearchParams({ _csrf: token, ...options.form }).toString();
  }
  if (options.from) {
    const agent = agentFrom(options.from);
    const response = await undiciFetch(app.url + path, {
      method,
      headers,
      body,
      redirect: 'manual',
      dispatcher: agent,
    });
    return {
      status: response.status,
      headers: response.headers as unknown as Headers,
      text: await response.text(),
    };
  }
  const response = await fetch(app.url + path, { method, headers, body, redirect: 'manual' });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/**
 * What a browser holds after opening the sign-in page: the pre-session form token's cookie (as a `Cookie`
 * header's value) and the token its forms send back.
 */
export async function preSessionToken(
  baseUrl: string,
  options: { from?: string; cookie?: string } = {},
): Promise<{ cookie: string; token: string }> {
  const headers: Record<string, string> = options.cookie ? { cookie: options.cookie } : {};
  const init = { headers, redirect: 'manual' as const };
  const response = options.from
    ? await undiciFetch(`${baseUrl}/console/login`, { ...init, dispatcher: agentFrom(options.from) })
    : await fetch(`${baseUrl}/console/login`, init);
  const set = response.headers.getSetCookie().find((c) => c.startsWith('svc_console_form='));
  const held = options.cookie?.split('; ').find((c) => c.startsWith('svc_console_form='));
  return { cookie: set?.split(';')[0] ?? held ?? '', token: csrfOf(await response.text()) };
}

/** The cookie a response set under `name`, as a `Cookie` header's value (`name=…`), or null. */
export function cookieFrom(response: ConsolePage, name: string): string | null {
  const set = response.headers.getSetCookie().findLast((cookie) => cookie.startsWith(`${name}=`));
  const value = set?.split(';')[0];
  return value && value !== `${name}=` ? value : null;
}

/** The session cookie a response set last, as a `Cookie` header's value (`svc_console=…`), or null. */
export function sessionFrom(response: ConsolePage): string | null {
  return cookieFrom(response, 'svc_console');
}

export const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';

/**
 * A tenant whose organisation is named `Lender ‮exe.gpj` (U+202E, RIGHT-TO-LEFT OVERRIDE), with a link of
 * `externalUserId` and an endpoint described as `description`: text the console must show with its hidden
 * characters visible. Answers the tenant and the link's and endpoint's ids.
 */
export async function tenantWithHiddenCharacters(
  t: Test,
  app: TestApp,
  texts: { externalUserId: string; description: string },
) {
  const tenant = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  await app.db.knex('organisations').where({ id: tenant.orgId }).update({ name: 'Lender \u202eexe.gpj' });
  const link = await app.request('POST', '/v1/links', {
    key: sk,
    body: linkBody({ external_user_id: texts.externalUserId }),
  });
  t.equal(link.status, 200, link.text);
  const hook = await app.request('POST', '/v1/webhook_endpoints', {
    key: sk,
    body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'], description: texts.description },
  });
  t.equal(hook.status, 200, hook.text);
  return { tenant, linkId: link.body.id as string, hookId: hook.body.id as string };
}
