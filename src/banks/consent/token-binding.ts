import * as client from 'openid-client';
import type { ConsentClient } from './client.js';
import { certificateThumbprint } from './certificates.js';

/*
 * FAPI 2.0 wants every access token sender-constrained: bound to the client's certificate (RFC 8705,
 * `cnf.x5t#S256`), so a token that leaks is worth nothing without the key. An opaque token does not say
 * whether it is, so the appliance asks the bank (token introspection, RFC 7662, over mTLS) where the bank
 * offers it, once per consent, at the code exchange. A bank that offers no introspection is taken at its
 * word (`unknown`).
 */

export type TokenBinding = 'bound' | 'unbound' | 'unknown';

export async function tokenBinding(consentClient: ConsentClient, accessToken: string): Promise<TokenBinding> {
  const metadata = consentClient.configuration.serverMetadata();
  if (!metadata.introspection_endpoint && !metadata.mtls_endpoint_aliases?.introspection_endpoint)
    return 'unknown';
  const answer = await client.tokenIntrospection(consentClient.configuration, accessToken, {
    token_type_hint: 'access_token',
  });
  if (!answer.active) return 'unbound';
  const bound = (answer.cnf as { 'x5t#S256'?: unknown } | undefined)?.['x5t#S256'];
  return bound === certificateThumbprint(consentClient.registration.certificate_pem) ? 'bound' : 'unbound';
}
