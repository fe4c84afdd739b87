import type { ConsentClient } from './client.js';
import { retryAtOf } from './consent-connector.js';

/*
 * Grant Management (FAPI Grant Management, draft 08, which the CMF's annex adopts): the client revokes a
 * grant with `DELETE {grant_management_endpoint}/{grant_id}` over mutual TLS. 204 says it is revoked; 404
 * `invalid_grant` says the bank no longer has it (already revoked or expired), which is as good. A `GET`
 * of the same URL queries it: the sync asks when the bank stops honouring a grant's tokens, to tell a
 * consent the user revoked at the bank from a token that merely went bad.
 */

export type RevokeOutcome =
  | { kind: 'revoked' }
  | { kind: 'gone' }
  /** Try again later: `retryAt` when the bank said when (429, 529; 503 with `Retry-After`). No secret in `reason`. */
  | { kind: 'failed'; reason: string; retryAt: number | null };

/** A revoke's answer budget: the draft gives a bank 4 s; a slow one is tried again later, not waited for. */
export const REVOKE_BUDGET_MS = 4_000;

function grantManagementEndpoint(client: ConsentClient): string | null {
  const metadata = client.configuration.serverMetadata() as {
    grant_management_endpoint?: unknown;
    mtls_endpoint_aliases?: { grant_management_endpoint?: unknown };
  };
  const endpoint =
    metadata.mtls_endpoint_aliases?.grant_management_endpoint ?? metadata.grant_management_endpoint;
  return typeof endpoint === 'string' ? endpoint : null;
}

export async function revokeGrant(
  client: ConsentClient,
  grantId: string,
  now: number,
): Promise<RevokeOutcome> {
  const endpoint = grantManagementEndpoint(client);
  if (!endpoint)
    return {
      kind: 'failed',
      reason: "the bank's discovery names no grant_management_endpoint",
      retryAt: null,
    };
  let response: Response;
  try {
    response = await client.fetch(`${endpoint.replace(/\/+$/, '')}/${encodeURIComponent(grantId)}`, {
      method: 'DELETE',
      signal: AbortSignal.timeout(REVOKE_BUDGET_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string }; name?: string }).cause;
    const said =
      (error as Error).name === 'TimeoutError'
        ? `no answer within ${REVOKE_BUDGET_MS} ms`
        : (cause?.code ?? 'no answer');
    return { kind: 'failed', reason: `the bank could not be reached: ${said}`, retryAt: null };
  }
  const body = (await response.json().catch(() => null)) as { error?: unknown } | null;
  if (response.status === 204 || response.status === 200) return { kind: 'revoked' };
  if (response.status === 404 && body?.error === 'invalid_grant') return { kind: 'gone' };
  const code = oauthErrorCode(body?.error, grantId);
  return {
    kind: 'failed',
    reason: `the bank answered HTTP ${response.status}${code ? ` ${code}` : ''}`,
    retryAt: retryAtOfAnswer(response.status, response.headers.get('retry-after'), now),
  };
}

/**
 * The bank's OAuth error code, for `last_error` (which `svc links inspect` prints): only a code's shape
 * (RFC 6749's are lower-case words joined by `_`), and never one that carries the grant id, so a bank that
 * echoes what it was sent cannot put a secret in the row.
 */
function oauthErrorCode(error: unknown, grantId: string): string | null {
  if (typeof error !== 'string' || !/^[a-z][a-z_]{0,59}$/.test(error)) return null;
  return error.includes(grantId) ? null : error;
}

/**
 * When the bank said to call again: a 429 or 529 always means later (its `Retry-After`, else a default); a
 * 503 when it says so (RFC 9110 §15.6.4: a bank down for maintenance may name its end). Else the schedule.
 */
function retryAtOfAnswer(status: number, retryAfter: string | null, now: number): number | null {
  if (status === 429 || status === 529) return retryAtOf(retryAfter, status, now);
  if (status === 503 && retryAfter !== null) return retryAtOf(retryAfter, 503, now);
  return null;
}

/**
 * What Grant Management says of a grant. `ended`: the bank no longer honours it (`status` in the appliance's
 * words: revoked, not found, expired). `unknown`: it did not say (unreachable, another status, no endpoint),
 * with why, no secret in it.
 */
export type GrantQuery =
  | { kind: 'authorised' }
  | { kind: 'ended'; status: 'revoked' | 'not found' | 'expired' }
  | { kind: 'unknown'; reason: string };

/** One query of a grant, within the same 4 s budget as a revoke. */
export async function queryGrant(client: ConsentClient, grantId: string): Promise<GrantQuery> {
  const endpoint = grantManagementEndpoint(client);
  if (!endpoint) return { kind: 'unknown', reason: 'no grant_management_endpoint' };
  let response: Response;
  let body: { status?: unknown; error?: unknown } | null;
  try {
    response = await client.fetch(`${endpoint.replace(/\/+$/, '')}/${encodeURIComponent(grantId)}`, {
      method: 'GET',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(REVOKE_BUDGET_MS),
    });
    body = (await response.json().catch(() => null)) as typeof body;
  } catch {
    return { kind: 'unknown', reason: 'no answer' };
  }
  if (response.status === 404 && body?.error === 'invalid_grant')
    return { kind: 'ended', status: 'not found' };
  if (response.status !== 200) return { kind: 'unknown', reason: `HTTP ${response.status}` };
  // The draft's query answer lists what the grant holds (a 200 says it exists); the simulated bank, like the
  // Chilean annex's consent resources, adds its `status`, which may say it has ended.
  const status = typeof body?.status === 'string' ? body.status.toLowerCase() : null;
  if (status === 'revoked') return { kind: 'ended', status: 'revoked' };
  if (status === 'expired') return { kind: 'ended', status: 'expired' };
  return { kind: 'authorised' };
}
