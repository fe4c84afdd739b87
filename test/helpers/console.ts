import { inviteConsoleUser, setPasswordWithToken, type ConsoleRole } from '../../src/console/users.js';
import type { TestApp } from './harness.js';

/** The password every console user of the tests chooses. */
export const PASSWORD = 'a long and quiet password';

/** A console user made as the CLI does, signed in over HTTP: returns a request function with its session. */
export async function signedIn(
  app: TestApp,
  role: ConsoleRole,
  orgId: string | null,
  email: string,
  language = 'en',
) {
  const { token } = await app.db.transaction((trx) =>
    inviteConsoleUser(trx, { email, role, orgId, actor: 'cli:test', now: app.clock.now() }),
  );
  const user = await app.db.transaction((trx) => setPasswordWithToken(trx, token, PASSWORD, app.clock.now()));
  const response = await fetch(`${app.url}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ email, password: PASSWORD }).toString(),
    redirect: 'manual',
  });
  const cookie = response.headers.getSetCookie()[0]!.split(';')[0]!;
  const home = await fetch(`${app.url}/console/orgs`, { headers: { cookie }, redirect: 'manual' });
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await home.text())?.[1] ?? '';
  /** A console request as this user; POSTs carry the session's CSRF token unless `form._csrf` says otherwise. */
  const send = async (method: 'GET' | 'POST', path: string, form: Record<string, string> = {}) => {
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
    return { status: answer.status, text: await answer.text(), location: answer.headers.get('location') };
  };
  return Object.assign(send, { userId: user.id });
}

/** A console answer as a test reads it. */
export interface ConsolePage {
  status: number;
  headers: Headers;
  text: string;
}

/** One console request with no session of its own: `cookie` and `form` say what to send. */
export async function consolePage(
  app: TestApp,
  method: string,
  path: string,
  options: { cookie?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<ConsolePage> {
  const headers: Record<string, string> = { 'accept-language': 'en', ...(options.headers ?? {}) };
  if (options.cookie) headers.cookie = options.cookie;
  let body: string | undefined;
  if (options.form) {
    body = new URLSearchParams(options.form).toString();
    headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  const response = await fetch(app.url + path, { method, headers, body, redirect: 'manual' });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** The session cookie a response set last, as a `Cookie` header's value (`svc_console=…`), or null. */
export function sessionFrom(response: ConsolePage): string | null {
  const set = response.headers.getSetCookie().findLast((cookie) => cookie.startsWith('svc_console='));
  if (!set) return null;
  const value = set.split(';')[0]!;
  return value === 'svc_console=' ? null : value;
}

export const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
