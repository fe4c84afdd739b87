import * as client from 'openid-client';
import type { ConsentClient } from './profile.js';

/*
 * The appliance's own tokens at a bank (OAuth `client_credentials`, RFC 6749 §4.4, over mutual TLS): Grant
 * Management's query and revoke need one with `grant_management_query` / `grant_management_revoke` (FAPI
 * Grant Management §6.1), Brazil's consents API one with `consents`. Each is kept per registration and
 * scope until shortly before it expires, so a tick of revocations or a round of syncs costs the bank one
 * token call, not one per grant; a 401 drops it (the bank forgot it, or rotated its keys).
 */

/** A token is not used in its last half-minute: a call started then may reach the bank after it expired. */
const EXPIRY_MARGIN_MS = 30_000;
/** A token with no `expires_in` is kept this long: the shortest access-token life Brazil's profile allows. */
const UNSTATED_LIFE_MS = 5 * 60_000;

interface Held {
  token: string;
  expiresAt: number;
}

const held = new WeakMap<ConsentClient, Map<string, Promise<Held>>>();

/** A client-credentials access token of `scope`, from the cache or the bank's token endpoint. */
export async function clientCredentialsToken(
  bank: ConsentClient,
  scope: string,
  now = Date.now(),
): Promise<string> {
  let tokens = held.get(bank);
  if (!tokens) {
    tokens = new Map();
    held.set(bank, tokens);
  }
  const current = tokens.get(scope);
  if (current) {
    const got = await current.catch(() => null);
    if (got && got.expiresAt - EXPIRY_MARGIN_MS > Date.now()) return got.token;
    if (tokens.get(scope) === current) tokens.delete(scope);
  }
  const asking = client.clientCredentialsGrant(bank.configuration, { scope }).then((answer) => ({
    token: answer.access_token,
    expiresAt: now + (answer.expires_in === undefined ? UNSTATED_LIFE_MS : answer.expires_in * 1000),
  }));
  tokens.set(scope, asking);
  asking.catch(() => {
    if (tokens.get(scope) === asking) tokens.delete(scope);
  });
  return (await asking).token;
}

/** Forgets a scope's token: the bank refused it (401), so the next call asks for a new one. */
export function dropClientCredentialsToken(bank: ConsentClient, scope: string): void {
  held.get(bank)?.delete(scope);
}
