import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, webcrypto } from 'node:crypto';
import type * as client from 'openid-client';

/*
 * The appliance's own signing key at a bank whose profile signs (Open Finance Brasil): FAPI 1.0 Advanced
 * §5.2.2 clause 10 has the client send a request object signed with PS256 (§8.6), with PAR in the body of
 * the pushed request (RFC 9126 §3, `request=<JWS>`); RFC 7523 §2.2 `private_key_jwt` signs the client
 * assertion with the same key when the bank authenticates clients that way. The key is RSA 2048, made at
 * registration and stored sealed beside the TLS key (`consent_clients.signing_key_sealed`); the bank learns
 * its public half from the registration's `jwks` (RFC 7591 §2). It is not the TLS key: Brazil issues
 * separate transport and signing certificates, a TLS key may be EC (PS256 needs RSA), and a key of its own
 * costs one `generateKeyPairSync` (~100 ms) per registration.
 */

/** RSA 2048: the least PS256 keys are allowed (FAPI 1.0 Advanced §8.6 clause 5 asks for 2048 bits). */
const MODULUS_BITS = 2048;

export interface SigningKeyMaterial {
  /** PKCS#8 PEM: the secret to seal. */
  privateKeyPem: string;
  /** The public JWK to register (`jwks.keys[0]`), with its RFC 7638 thumbprint as `kid`. */
  publicJwk: Record<string, string>;
}

/** RFC 7638 §3.2 thumbprint of an RSA key: SHA-256 of its required members in lexicographic order. */
export function rsaThumbprint(jwk: { e: string; kty: string; n: string }): string {
  return createHash('sha256')
    .update(JSON.stringify({ e: jwk.e, kty: jwk.kty, n: jwk.n }))
    .digest('base64url');
}

/** The public JWK of a key (RFC 7517), `kid` its RFC 7638 thumbprint, for PS256 signatures only. */
export function publicJwkOf(privateKeyPem: string): Record<string, string> {
  const { kty, n, e } = createPublicKey(createPrivateKey(privateKeyPem)).export({ format: 'jwk' }) as Record<
    string,
    string
  >;
  return {
    kty: kty!,
    n: n!,
    e: e!,
    kid: rsaThumbprint({ e: e!, kty: kty!, n: n! }),
    use: 'sig',
    alg: 'PS256',
  };
}

export function generateSigningKey(): SigningKeyMaterial {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: MODULUS_BITS });
  const privateKeyPem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  return { privateKeyPem, publicJwk: publicJwkOf(privateKeyPem) };
}

/** The key as openid-client signs with it: an RSA-PSS SHA-256 CryptoKey (PS256) and its registered `kid`. */
export async function signingKeyOf(privateKeyPem: string): Promise<client.PrivateKey> {
  const der = createPrivateKey(privateKeyPem).export({ format: 'der', type: 'pkcs8' });
  const key = await webcrypto.subtle.importKey('pkcs8', der, { name: 'RSA-PSS', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  return { key: key as client.CryptoKey, kid: publicJwkOf(privateKeyPem).kid };
}

/** The client authentication methods the appliance can use, in the order it prefers them. */
export type ClientAuthMethod = 'tls_client_auth' | 'private_key_jwt';

/**
 * The method to register with, from the bank's discovery (RFC 8414 §2 `token_endpoint_auth_methods_supported`)
 * and the profile's own list in order of preference; null when they share none. `tls_client_auth` first
 * where both are allowed: the certificate already authenticates every call and binds every token (RFC 8705),
 * so nothing more is signed per call; `private_key_jwt` (RFC 7523 §2.2, OIDC Core §9) when the bank lists
 * only that. A discovery without the member means `client_secret_basic` (RFC 8414 §2), which no profile allows.
 */
export function chooseClientAuth(
  supported: readonly string[] | undefined,
  allowed: readonly ClientAuthMethod[],
): ClientAuthMethod | null {
  return allowed.find((method) => supported?.includes(method)) ?? null;
}
