/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { Context } from 'koa';
import type { ShellContext } from './bank-profile.js';
import { certificateThumbprint } from './test-ca.js';

/*
 * The bearer of a call to the bank's own endpoints (RFC 6750), as the library stored it. A token bound to a
 * certificate (RFC 8705 section 3, `cnf.x5t#S256`, issued only to a client registered for it) is good only
 * over a TLS connection with that certificate (section 3.1); an unbound one is good over any.
 */

export type TokenModel = 'AccessToken' | 'ClientCredentials';

export interface TokenRefusal {
  status: 401;
  error: 'invalid_token';
  description: string;
}

export async function bearerToken(
  ctx: Context,
  context: ShellContext & { provider: any },
  model: TokenModel,
): Promise<{ token: any } | TokenRefusal> {
  const refuse = (description: string): TokenRefusal => ({
    status: 401,
    error: 'invalid_token',
    description,
  });
  const match = /^Bearer ([^\s]+)$/.exec(ctx.get('authorization'));
  if (!match) return refuse('A bearer token is required');
  const token = await context.provider[model].find(match[1]);
  if (!token || token.isExpired) return refuse('The access token is invalid or expired');
  const bound: string | undefined = token['x5t#S256'];
  const cert = context.peerCertificate(ctx);
  if (bound !== undefined && (!cert || certificateThumbprint(cert) !== bound))
    return refuse('The access token is bound to another certificate');
  return { token };
}

/** RFC 6750 section 3's challenge of a refusal (401 `invalid_token`, 403 `insufficient_scope`). */
export function challenge(error: string, description: string, scope?: string): string {
  const quoted = description.replace(/["\\]/g, '');
  return `Bearer error="${error}", error_description="${quoted}"${scope ? `, scope="${scope}"` : ''}`;
}

/** Whether a token carries a scope. */
export function hasScope(token: any, scope: string): boolean {
  return String(token.scope ?? '')
    .split(' ')
    .includes(scope);
}
