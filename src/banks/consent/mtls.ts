import { randomUUID } from 'node:crypto';
import { Agent, fetch as undiciFetch } from 'undici';

/*
 * Every call to a consent bank goes over mutual TLS with the client's certificate (RFC 8705: the bank
 * authenticates the client by it, `tls_client_auth`, and binds the tokens it issues to it). One undici
 * Agent per registration carries the certificate and key; openid-client takes it through its
 * `customFetch` hook, and the grant revocation and resource calls use the same fetch.
 */

export interface ClientIdentity {
  certificatePem: string;
  privateKeyPem: string;
  /** Extra trust for the bank's server certificate (a sandbox CA); null: the system's roots. */
  serverCaPem: string | null;
}

/**
 * TLS 1.2 at least: the CMF's draft asks for 1.3, which both sides negotiate when they can; FAPI 2.0 allows
 * 1.2 with its cipher list, and a bank's test environment may still offer only that. Redirects are not
 * followed (undici 7's default), so a bank cannot bounce a call, with the certificate, elsewhere.
 */
export function mtlsAgent(identity: ClientIdentity, timeoutMs = 10_000): Agent {
  return new Agent({
    connect: {
      cert: identity.certificatePem,
      key: identity.privateKeyPem,
      ...(identity.serverCaPem ? { ca: identity.serverCaPem } : {}),
      minVersion: 'TLSv1.2',
      timeout: timeoutMs,
    },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

export type MtlsFetch = (url: string, init: RequestInit) => Promise<Response>;

/**
 * A fetch whose every request goes through `agent` (openid-client's `customFetch` signature), and carries an
 * `x-fapi-interaction-id` (a UUID, RFC 4122) unless the caller set one: FAPI 1.0 Advanced §6.2.2 and Open
 * Finance Brasil ask for it on every call, PAR and token included, so a bank's logs and ours meet.
 */
export function mtlsFetch(agent: Agent): MtlsFetch {
  return (url, init) => {
    const headers = new Headers(init.headers);
    if (!headers.has('x-fapi-interaction-id')) headers.set('x-fapi-interaction-id', randomUUID());
    return undiciFetch(url, {
      ...(init as Parameters<typeof undiciFetch>[1]),
      headers: Object.fromEntries(headers),
      dispatcher: agent,
    }) as unknown as Promise<Response>;
  };
}
