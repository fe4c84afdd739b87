import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';

/*
 * What the console's frame (http.ts) and its sign-in (sign-in.ts) both read of a request and set on its
 * answer: cookies, the session's among them, and a form's fields.
 */

export const SESSION_COOKIE = 'svc_console';
/** Forms are a few fields: a larger body is no form of ours. */
const FORM_LIMIT = '16kb';

export function sessionCookie(token: string, maxAgeMs: number): string {
  // Set by hand: Koa's cookies refuse `Secure` on a plain-HTTP connection, and the console behind a TLS
  // proxy (or on localhost, which browsers treat as secure) is exactly that.
  return `${SESSION_COOKIE}=${token}; Path=/console; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}; HttpOnly; Secure; SameSite=Strict`;
}

export function readCookie(ctx: Context, name: string): string | null {
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

/** A POST's form fields (strings only); none for a body that is not a form. */
export async function formFields(ctx: Context): Promise<Record<string, string>> {
  if (!ctx.is('application/x-www-form-urlencoded')) return {};
  await readForm(ctx, async () => undefined);
  const body = (ctx.request as unknown as { body?: Record<string, unknown> }).body ?? {};
  return Object.fromEntries(
    Object.entries(body).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}
