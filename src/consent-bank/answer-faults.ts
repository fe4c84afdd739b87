import type { KeyObject } from 'node:crypto';
import { CompactSign } from 'jose';
import type { AuthorizationResponseFault, BankFaults, IdTokenFault } from './faults.js';

/*
 * The client conformance faults (faults.ts), applied to what oidc-provider already answered: the bank stays
 * the certified library everywhere else, and each fault is one alteration of one answer on its way out, as
 * the OpenID Foundation's conformance suite alters its own server's answers for a relying-party test. None
 * of these runs unless its fault is set.
 */

/** The discovery document as the faults leave it. */
export function discoveryWithFaults(
  document: Record<string, unknown>,
  faults: Readonly<BankFaults>,
): Record<string, unknown> {
  let altered = document;
  if (faults.noMtlsEndpointAliases) {
    const { mtls_endpoint_aliases: _aliases, ...plain } = altered;
    altered = plain;
  }
  // The suite's ChangeIssuerInServerConfigurationToBeInvalid appends "INVALID".
  if (faults.discoveryIssuerMismatch) altered = { ...altered, issuer: `${String(altered.issuer)}INVALID` };
  return altered;
}

/**
 * The redirect of an authorization response as the fault leaves it, or null when `location` is not an
 * authorization response of this issuer (the library's redirects to its own interaction pages carry no
 * `iss`; every authorization response it makes does, RFC 9207).
 */
export function authorizationResponseWithFault(
  location: string,
  issuer: string,
  fault: AuthorizationResponseFault | undefined,
): string | null {
  if (fault === undefined) return null;
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    return null;
  }
  if (url.searchParams.get('iss') !== issuer) return null;
  const params = url.searchParams;
  // The suite's conditions: "1" appended to the value, or the parameter removed.
  if (fault === 'invalid-iss') params.set('iss', `${issuer}1`);
  if (fault === 'no-iss') params.delete('iss');
  if (fault === 'invalid-state') params.set('state', `${params.get('state') ?? ''}1`);
  if (fault === 'no-state') params.delete('state');
  return url.href;
}

const json = (part: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
const encoded = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The claims of an ID token as the fault changes them, after the suite's condition of the same name. */
function alteredClaims(claims: Record<string, unknown>, fault: IdTokenFault): Record<string, unknown> {
  const altered = { ...claims };
  switch (fault) {
    case 'invalid-iss':
      altered.iss = `${String(claims.iss)}1`;
      break;
    case 'no-iss':
      delete altered.iss;
      break;
    case 'invalid-aud':
      altered.aud = `${String(claims.aud)}1`;
      break;
    case 'no-aud':
      delete altered.aud;
      break;
    case 'aud-array':
      altered.aud = [claims.aud];
      break;
    case 'untrusted-second-aud':
      altered.aud = [claims.aud, `${String(claims.aud)}1`];
      delete altered.azp;
      break;
    case 'expired-exp':
      // Six minutes past (AddInvalidExpiredExpValueToIdToken), measured from the library's own `iat`.
      altered.exp = Number(claims.iat) - 6 * 60;
      break;
    case 'no-exp':
      delete altered.exp;
      break;
    case 'invalid-nonce':
      altered.nonce = `${String(claims.nonce ?? '')}1`;
      break;
    case 'no-nonce':
      delete altered.nonce;
      break;
    default:
      break;
  }
  return altered;
}

/**
 * An ID token the library issued, with the fault applied and signed again with the bank's own key (so only
 * what the fault names is wrong): PS256 as discovery says, or RS256 with the same key, or `alg: none` and no
 * signature at all.
 */
export async function idTokenWithFault(
  idToken: string,
  fault: IdTokenFault,
  key: KeyObject,
): Promise<string> {
  const [head, body] = idToken.split('.') as [string, string];
  const header = json(head);
  const claims = alteredClaims(json(body), fault);
  if (fault === 'alg-none') return `${encoded({ ...header, alg: 'none' })}.${encoded(claims)}.`;
  const alg = fault === 'alg-rs256' ? 'RS256' : String(header.alg);
  return new CompactSign(Buffer.from(JSON.stringify(claims)))
    .setProtectedHeader({ ...header, alg })
    .sign(key);
}

/** A token answer (any grant) as the faults leave it. */
export async function tokenAnswerWithFaults(
  answer: Record<string, unknown>,
  grantType: unknown,
  faults: Readonly<BankFaults>,
  key: KeyObject,
): Promise<Record<string, unknown>> {
  const altered = { ...answer };
  if (faults.tokenWithoutExpiresIn) delete altered.expires_in;
  if (faults.tokenType !== undefined) altered.token_type = faults.tokenType;
  if (faults.idToken && grantType === 'authorization_code' && typeof altered.id_token === 'string')
    altered.id_token = await idTokenWithFault(altered.id_token, faults.idToken, key);
  return altered;
}

/** Whether any fault alters a token answer: the hook leaves the library's answer untouched otherwise. */
export function altersTokenAnswers(faults: Readonly<BankFaults>): boolean {
  return (
    faults.tokenWithoutExpiresIn === true || faults.tokenType !== undefined || faults.idToken !== undefined
  );
}
