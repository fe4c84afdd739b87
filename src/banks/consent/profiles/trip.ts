import type * as client from 'openid-client';

/*
 * What both countries' trips to the bank share: the language of the bank's pages, and whether to ask for a
 * refresh token with `offline_access`.
 */

export const uiLocales = (locale: 'es' | 'en') => (locale === 'es' ? 'es-CL es' : 'en');

/**
 * `openid`, plus `offline_access` where the bank's discovery lists it in `scopes_supported`: OpenID Connect
 * Core §11 makes a refresh token the answer to that scope, and a bank such as oidc-provider with its
 * defaults issues none without it. §11 also asks for `prompt=consent` with it, returned beside the scope.
 */
export function offlineScope(configuration: client.Configuration): { scope: string; prompt?: string } {
  const supported = configuration.serverMetadata().scopes_supported;
  return Array.isArray(supported) && supported.includes('offline_access')
    ? { scope: 'openid offline_access', prompt: 'consent' }
    : { scope: 'openid' };
}

/**
 * Whether the tokens can outlive their access token: a refresh token, or an access token that lasts as
 * long as the consent (`expires_in` absent: the bank did not say it ends). A grant that fails this would be
 * linked as "connected" and stop working at the first sync after the access token expires.
 */
export function outlivesAccessToken(
  tokens: client.TokenEndpointResponse,
  consentEnd: number | null,
  now: number,
): boolean {
  if (tokens.refresh_token) return true;
  if (tokens.expires_in === undefined) return true;
  return consentEnd !== null && now + tokens.expires_in * 1000 >= consentEnd;
}

/**
 * The `state` claim of a JARM `response` (JWT Secured Authorization Response Mode §4.1), unverified: only to
 * find the trip, whose check then verifies it.
 */
export function jarmState(response: string | undefined): string | undefined {
  const payload = response?.split('.')[1];
  if (!payload || response!.split('.').length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { state?: unknown };
    return typeof claims.state === 'string' ? claims.state : undefined;
  } catch {
    return undefined;
  }
}
