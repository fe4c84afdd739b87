/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { Context } from 'koa';
import type { ProviderContext } from '../bank-profile.js';
import { retryAfterOf } from '../faults.js';
import { findRevokedGrant, revokeGrant } from '../store.js';
import { bearerToken, challenge, hasScope } from '../tokens.js';

/*
 * Grant Management for OAuth 2.0 (FAPI working group draft; the Chilean annex names draft 08): the query
 * (`GET /grants/{grant_id}`) and revoke (`DELETE`) endpoints. Section 6.1: "the client MUST use an access token
 * obtained with client_credentials and scope grant_management_query / grant_management_revoke". So a call
 * carries `Authorization: Bearer` with such a token (the library issues it at the token endpoint to a client
 * registered for the `client_credentials` grant, bound to its certificate when the client registered so): none
 * or a bad one is 401, one without the action's scope 403 (RFC 6750 `insufficient_scope`), a grant that is
 * unknown or another client's 404.
 */

export const GRANT_MANAGEMENT_PATH = '/grants';
export const QUERY_SCOPE = 'grant_management_query';
export const REVOKE_SCOPE = 'grant_management_revoke';

function oauthError(ctx: Context, status: number, error: string, description: string): void {
  ctx.status = status;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { error, error_description: description };
}

/** A revoked grant's record, or the grant's state, as the query answers them. */
async function answerQuery(ctx: Context, grant: any) {
  ctx.body = {
    status: grant.isExpired ? 'Expired' : 'Authorised',
    scopes: [{ scope: grant.openid?.scope ?? '' }],
    authorization_details: grant.rar ?? [],
    created_at: new Date(grant.iat * 1000).toISOString(),
    expires_at: grant.exp ? new Date(grant.exp * 1000).toISOString() : null,
  };
}

/** The endpoint; answers true when the path is its own. */
export function grantManagement(context: ProviderContext) {
  const { provider, faults, clock, log, store } = context;
  return async (ctx: Context, path: string): Promise<boolean> => {
    if (!path.startsWith(`${GRANT_MANAGEMENT_PATH}/`)) return false;
    const grantId = decodeURIComponent(path.slice(GRANT_MANAGEMENT_PATH.length + 1));
    ctx.set('Cache-Control', 'no-store');
    if (ctx.method !== 'GET' && ctx.method !== 'DELETE') {
      ctx.set('Allow', 'GET, DELETE');
      oauthError(ctx, 405, 'invalid_request', 'Grant Management answers GET (query) and DELETE (revoke)');
      return true;
    }
    // A fault answers before the bank looks at the call, as a rate limiter or a maintenance page would.
    const fault = faults.bankWide.grantManagementStatus;
    if (fault && ctx.method === 'DELETE') {
      ctx.set('Retry-After', String(retryAfterOf(faults.bankWide, fault)));
      oauthError(ctx, fault, 'temporarily_unavailable', `Grant Management answers ${fault} (fault)`);
      return true;
    }
    const bearer = await bearerToken(ctx, context, 'ClientCredentials');
    if ('status' in bearer) {
      ctx.set('WWW-Authenticate', challenge(bearer.error, bearer.description));
      oauthError(
        ctx,
        401,
        bearer.error,
        `${bearer.description} (a client_credentials token, Grant Management 6.1)`,
      );
      return true;
    }
    const scope = ctx.method === 'GET' ? QUERY_SCOPE : REVOKE_SCOPE;
    if (!hasScope(bearer.token, scope)) {
      ctx.set('WWW-Authenticate', challenge('insufficient_scope', `the token lacks ${scope}`, scope));
      oauthError(ctx, 403, 'insufficient_scope', `The token lacks the ${scope} scope`);
      return true;
    }
    const clientId: string = bearer.token.clientId;
    const unknown = () => {
      oauthError(ctx, 404, 'invalid_grant', 'No grant of this client has that id');
      return true;
    };
    if (!/^[\w-]{1,128}$/.test(grantId)) return unknown();
    const grant = await provider.Grant.find(grantId, { ignoreExpiration: true });
    if (!grant) {
      const revoked = await findRevokedGrant(store, grantId);
      if (!revoked || revoked.clientId !== clientId) return unknown();
      if (ctx.method === 'DELETE') ctx.status = 204;
      else
        ctx.body = {
          status: 'Revoked',
          authorization_details: revoked.authorizationDetails,
          revoked_at: new Date(revoked.revokedAt).toISOString(),
        };
      return true;
    }
    if (grant.clientId !== clientId) return unknown();
    if (ctx.method === 'GET') {
      await answerQuery(ctx, grant);
      return true;
    }
    await revokeGrant(store, grantId, {
      clientId: grant.clientId,
      accountId: grant.accountId,
      revokedAt: clock.now(),
      authorizationDetails: grant.rar ?? [],
    });
    log.info({ client: grant.clientId }, 'consent bank: grant revoked');
    ctx.status = 204;
    return true;
  };
}
