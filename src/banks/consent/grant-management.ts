import { bankWordsOf, bankWordsOfError, describeBankWords, retryAtOfAnswer } from './bank-answers.js';
import { clientCredentialsToken, dropClientCredentialsToken } from './client-credentials.js';
import type { ConsentClient, GrantQuery, RevokeOutcome } from './profile.js';

/*
 * Grant Management for OAuth 2.0 (FAPI WG draft, which the CMF's annex adopts):
 * - §6.1: the client calls the grant management endpoint with an access token it got by `client_credentials`
 *   carrying `grant_management_query` (to read a grant) or `grant_management_revoke` (to revoke one), over
 *   mutual TLS (the token is bound to the certificate where the registration asked for it);
 * - §6.2 query: `GET {grant_management_endpoint}/{grant_id}` → 200 with what the grant holds;
 * - §6.3 revoke: `DELETE {grant_management_endpoint}/{grant_id}` → 204;
 * - §6.4 errors: 401 (no or bad token), 403 (the token lacks the scope), 404 (no such grant for this
 *   client): the status is the answer; a body is optional.
 * A 404 therefore means the bank no longer has the grant (revoked or expired), as good as revoked.
 */

/** A call's answer budget: the draft gives a bank 4 s; a slow one is tried again later, not waited for. */
export const REVOKE_BUDGET_MS = 4_000;

export const QUERY_SCOPE = 'grant_management_query';
export const REVOKE_SCOPE = 'grant_management_revoke';

function grantManagementEndpoint(bank: ConsentClient): string | null {
  const metadata = bank.configuration.serverMetadata() as {
    grant_management_endpoint?: unknown;
    mtls_endpoint_aliases?: { grant_management_endpoint?: unknown };
  };
  const endpoint =
    metadata.mtls_endpoint_aliases?.grant_management_endpoint ?? metadata.grant_management_endpoint;
  return typeof endpoint === 'string' ? endpoint : null;
}

type Answer = { status: number; body: unknown; retryAfter: string | null } | { unreachable: string };

/** One call with a token of `scope`; a 401 drops the token and tries once with a new one. */
async function call(
  bank: ConsentClient,
  method: 'GET' | 'DELETE',
  grantId: string,
  scope: string,
): Promise<Answer> {
  const endpoint = grantManagementEndpoint(bank);
  if (!endpoint) return { unreachable: "the bank's discovery names no grant_management_endpoint" };
  const url = `${endpoint.replace(/\/+$/, '')}/${encodeURIComponent(grantId)}`;
  for (let retried = false; ; retried = true) {
    let token: string;
    try {
      token = await clientCredentialsToken(bank, scope);
    } catch (error) {
      return {
        unreachable: `the bank refused a ${scope} token (${describeBankWords(bankWordsOfError(error))})`,
      };
    }
    let response: Response;
    let body: unknown;
    try {
      response = await bank.fetch(url, {
        method,
        headers: { accept: 'application/json', authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(REVOKE_BUDGET_MS),
      });
      body = await response.json().catch(() => null);
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError';
      const said = timedOut
        ? `no answer within ${REVOKE_BUDGET_MS} ms`
        : describeBankWords(bankWordsOfError(error));
      return { unreachable: `the bank could not be reached: ${said}` };
    }
    if (response.status === 401 && !retried) {
      dropClientCredentialsToken(bank, scope);
      continue;
    }
    return { status: response.status, body, retryAfter: response.headers.get('retry-after') };
  }
}

/** The bank's words of an answer, with no grant id in them (a bank that echoes what it was sent). */
function said(answer: { status: number; body: unknown }, grantId: string): string {
  return describeBankWords(bankWordsOf(answer.status, answer.body)).split(grantId).join('…');
}

export async function revokeGrant(bank: ConsentClient, grantId: string, now: number): Promise<RevokeOutcome> {
  const answer = await call(bank, 'DELETE', grantId, REVOKE_SCOPE);
  if ('unreachable' in answer) return { kind: 'failed', reason: answer.unreachable, retryAt: null };
  if (answer.status === 204 || answer.status === 200) return { kind: 'revoked' };
  if (answer.status === 404) return { kind: 'gone' };
  return {
    kind: 'failed',
    reason: `the bank answered ${said(answer, grantId)}`,
    retryAt: retryAtOfAnswer(answer.status, answer.retryAfter, now),
  };
}

/** One query of a grant, within the same 4 s budget as a revoke. */
export async function queryGrant(bank: ConsentClient, grantId: string): Promise<GrantQuery> {
  const answer = await call(bank, 'GET', grantId, QUERY_SCOPE);
  if ('unreachable' in answer) return { kind: 'unknown', reason: answer.unreachable };
  if (answer.status === 404) return { kind: 'ended', status: 'not found' };
  if (answer.status !== 200) return { kind: 'unknown', reason: said(answer, grantId) };
  // The draft's query answer lists what the grant holds (a 200 says it exists); the Chilean annex's consent
  // resources add a `status`, which may say it has ended.
  const body = answer.body as { status?: unknown } | null;
  const status = typeof body?.status === 'string' ? body.status.toLowerCase() : null;
  if (status === 'revoked') return { kind: 'ended', status: 'revoked' };
  if (status === 'expired') return { kind: 'ended', status: 'expired' };
  return { kind: 'authorised' };
}
