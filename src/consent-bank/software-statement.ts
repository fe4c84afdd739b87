import {
  constants,
  createPrivateKey,
  createPublicKey,
  randomUUID,
  verify,
  type KeyObject,
} from 'node:crypto';
import { SignJWT } from 'jose';

/*
 * Software statements of the simulated participant directory (RFC 7591 section 2.3). In Chile the CMF's
 * directory signs one per participant's software; here the directory is the key the test CA's install made.
 * Issuing is async (jose); checking is synchronous node:crypto, because oidc-provider's client-metadata
 * validator, where the check runs, must be synchronous.
 */

export const DIRECTORY_ISSUER = 'svc-sandbox-directory';
/** How long a statement issued by `issueSoftwareStatement` is accepted, unless told otherwise. */
export const SOFTWARE_STATEMENT_TTL_S = 365 * 86_400;

export interface SoftwareStatementRequest {
  clientName: string;
  redirectUris: string[];
  /** The client certificate's subject DN, as `subjectDnOf` prints it. */
  subjectDn: string;
  /** Seconds since the epoch. */
  now: number;
  ttlSeconds?: number;
  softwareId?: string;
}

export interface SoftwareStatementClaims {
  iss: string;
  iat: number;
  exp: number;
  jti: string;
  software_id: string;
  client_name: string;
  redirect_uris: string[];
  tls_client_auth_subject_dn: string;
}

/** A PS256 JWT the bank's registration endpoint accepts for this client. */
export async function issueSoftwareStatement(
  directoryKeyPem: string,
  request: SoftwareStatementRequest,
): Promise<string> {
  const key = createPrivateKey(directoryKeyPem);
  return new SignJWT({
    software_id: request.softwareId ?? randomUUID(),
    client_name: request.clientName,
    redirect_uris: request.redirectUris,
    tls_client_auth_subject_dn: request.subjectDn,
  })
    .setProtectedHeader({ alg: 'PS256', typ: 'JWT' })
    .setIssuer(DIRECTORY_ISSUER)
    .setIssuedAt(request.now)
    .setExpirationTime(request.now + (request.ttlSeconds ?? SOFTWARE_STATEMENT_TTL_S))
    .setJti(randomUUID())
    .sign(key);
}

export function directoryPublicKey(directoryKeyPem: string): KeyObject {
  return createPublicKey(createPrivateKey(directoryKeyPem));
}

/** Why a statement is refused (a sentence safe to send back: it never quotes the statement), or its claims. */
export type StatementCheck = { ok: true; claims: SoftwareStatementClaims } | { ok: false; reason: string };

export function checkSoftwareStatement(jwt: unknown, key: KeyObject, nowSeconds: number): StatementCheck {
  if (typeof jwt !== 'string' || jwt.length === 0)
    return { ok: false, reason: 'software_statement is required' };
  const parts = jwt.split('.');
  if (parts.length !== 3) return { ok: false, reason: 'software_statement is not a signed JWT' };
  const [head, body, signature] = parts as [string, string, string];
  let header: { alg?: unknown };
  let claims: Partial<SoftwareStatementClaims>;
  try {
    header = JSON.parse(Buffer.from(head, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, reason: 'software_statement is not a readable JWT' };
  }
  if (header.alg !== 'PS256') return { ok: false, reason: 'software_statement must be signed with PS256' };
  const signed = verify(
    'sha256',
    Buffer.from(`${head}.${body}`),
    { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
    Buffer.from(signature, 'base64url'),
  );
  if (!signed) return { ok: false, reason: 'software_statement signature is not the directory’s' };
  if (claims.iss !== DIRECTORY_ISSUER)
    return { ok: false, reason: 'software_statement issuer is not the directory' };
  if (typeof claims.exp !== 'number' || claims.exp <= nowSeconds)
    return { ok: false, reason: 'software_statement has expired' };
  if (typeof claims.iat !== 'number' || claims.iat > nowSeconds + 60)
    return { ok: false, reason: 'software_statement is issued in the future' };
  if (
    typeof claims.client_name !== 'string' ||
    typeof claims.tls_client_auth_subject_dn !== 'string' ||
    !Array.isArray(claims.redirect_uris) ||
    !claims.redirect_uris.every((uri) => typeof uri === 'string')
  )
    return {
      ok: false,
      reason: 'software_statement lacks client_name, redirect_uris or tls_client_auth_subject_dn',
    };
  return { ok: true, claims: claims as SoftwareStatementClaims };
}
