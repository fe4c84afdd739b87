import { randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import { errors } from '../../errors/api-error.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { consentProfileOf, findInstitution, type Institution } from '../institutions.js';
import { bankWordsOf, bankWordsOfError, describeBankWords } from './bank-answers.js';
import { CertificateError, certificateFacts, type CertificateFacts } from './certificates.js';
import { gatedFetch } from '../budget/bank-calls.js';
import { mtlsAgent, mtlsFetch, type ClientIdentity } from './mtls.js';
import { profileOf } from './profiles/index.js';
import { publicRegistration, type ConsentClientRow } from './registrations.js';
import type { CountryProfile } from './profile.js';
import { chooseClientAuth, generateSigningKey, type SigningKeyMaterial } from './request-signing.js';

/** Where a bank sends the end user back to (the widget's consent callback), under the API's base URL. */
export const CONSENT_CALLBACK_PATH = '/widget/consent/callback';

/*
 * `svc banks register`: discovery of the bank's authorization server, then Dynamic Client Registration
 * (RFC 7591) with the software statement the directory signed, as a `tls_client_auth` client whose
 * certificate is the one every later call presents. Checks come first and cost nothing; the network
 * comes after; the row is written by the caller only when the bank said yes.
 */

export interface RegistrationInput extends ClientIdentity {
  bankId: string;
  mode: 'live' | 'test';
  issuer: string;
  apiBase: string;
  softwareStatement: string;
  redirectUri: string;
}

const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Plain `http://` to 127.0.0.1 or localhost: the simulated bank's issuer, which is the appliance's own
 * base URL on a default install. Only the appliance's registration with its own simulated bank may use it
 * (`allowLoopbackHttp`); every call still carries the client certificate.
 */
export function isLoopbackHttp(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  } catch {
    return false;
  }
}

function httpsUrl(value: string, param: string, allowLoopbackHttp = false): URL {
  if (allowLoopbackHttp && isLoopbackHttp(value)) return new URL(value);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw errors.invalidParameter(param, `--${param} is not a URL.`);
  }
  if (url.protocol !== 'https:') throw errors.invalidParameter(param, `--${param} must be an https:// URL.`);
  if (url.username || url.password)
    throw errors.invalidParameter(param, `--${param} must not carry a user name or password.`);
  return url;
}

/**
 * What the bank's registration answer left out of what the appliance asked for (RFC 7591 §3.2.1: the answer
 * holds the metadata as registered; a bank may drop or change a value): each gap in words with its section.
 * A gap means a failure later (unbound tokens refused at the callback, PAR refused, no Grant Management
 * token), so `svc doctor` and `svc banks registrations` say it at once.
 */
export function registrationGaps(
  asked: Record<string, unknown>,
  registered: Record<string, unknown>,
): string[] {
  const why: Record<string, string> = {
    tls_client_certificate_bound_access_tokens: 'certificate-bound tokens, RFC 8705 §3.4',
    authorization_details_types: 'RAR types, RFC 9396 §10.2',
    grant_types: 'Grant Management §6.1 and the consents API need client_credentials',
    request_object_signing_alg: 'signed request objects, FAPI 1.0 Advanced §5.2.2 clause 10; register again',
  };
  const gaps: string[] = [];
  for (const [key, value] of Object.entries(asked)) {
    const got = registered[key];
    const missing = Array.isArray(value)
      ? value.filter((item) => !(Array.isArray(got) && got.includes(item)))
      : got === value
        ? []
        : [value];
    if (missing.length > 0)
      gaps.push(
        `the bank registered ${key} without ${missing.map((item) => JSON.stringify(item)).join(', ')}${why[key] ? ` (${why[key]})` : ''}`,
      );
  }
  return gaps;
}

/** The gaps of a stored registration, by its bank's country profile. */
export function gapsOfRegistration(row: ConsentClientRow, institutions?: readonly Institution[]): string[] {
  const institution = findInstitution(row.bank_id, institutions);
  if (!institution) return [];
  const asked = profileOf(consentProfileOf(institution).security).registrationMetadata;
  return registrationGaps(asked, JSON.parse(row.registration) as Record<string, unknown>);
}

/** Everything that can be known wrong without calling the bank, in the order a person fixes it. */
export function checkRegistrationInput(
  input: RegistrationInput,
  now: number,
  allowLoopbackHttp = false,
  institutions?: readonly Institution[],
): { subjectDn: string } {
  const institution = findInstitution(input.bankId, institutions);
  if (!institution)
    throw errors.invalidParameter(
      'bank',
      `Unknown bank '${input.bankId}'. GET /v1/institutions lists the bank codes.`,
    );
  if (institution.consentSandbox && input.mode === 'live')
    throw errors.invalidParameter(
      'mode',
      `${institution.name} is the simulated bank: it exists in test mode only.`,
    );
  httpsUrl(input.issuer, 'issuer', allowLoopbackHttp);
  httpsUrl(input.apiBase, 'api-base');
  if (!JWS.test(input.softwareStatement.trim()))
    throw errors.invalidParameter(
      'software-statement',
      'The software statement is not a signed JWT (three base64url parts separated by dots).',
    );
  const facts = checkClientCertificate(input.certificatePem, input.privateKeyPem, now);
  return { subjectDn: facts.subjectDn };
}

/**
 * The client certificate and its key, as `svc banks register` and `svc banks rotate-certificate` both check
 * them before any call: they parse, belong together, are in date, and the chain in the file holds. Errors
 * name the flag (`--cert`, `--key`) a person fixes.
 */
export function checkClientCertificate(
  certificatePem: string,
  privateKeyPem: string,
  now: number,
): CertificateFacts {
  let facts: CertificateFacts;
  try {
    facts = certificateFacts(certificatePem, privateKeyPem);
  } catch (error) {
    if (error instanceof CertificateError)
      throw errors.invalidParameter('cert', `The client certificate: ${error.message}.`);
    throw error;
  }
  if (!facts.keyMatches)
    throw errors.invalidParameter('key', 'The private key does not belong to the certificate.');
  if (facts.notAfter <= now)
    throw errors.invalidParameter(
      'cert',
      `The certificate expired on ${new Date(facts.notAfter).toISOString()}.`,
    );
  if (facts.notBefore > now)
    throw errors.invalidParameter(
      'cert',
      `The certificate is valid only from ${new Date(facts.notBefore).toISOString()}.`,
    );
  if (facts.chainProblem)
    throw errors.invalidParameter('cert', `The certificate chain: ${facts.chainProblem}.`);
  return facts;
}

/**
 * A failure at the bank in its own words (bank-answers.ts: its HTTP status, OAuth `error` and
 * `error_description`, masked and cut short; the network's code when it did not answer). A registration
 * refused is permanent until the operator changes something: the words say what the bank wants.
 */
async function bankFailure(step: string, error: unknown): Promise<Error> {
  let words = bankWordsOfError(error);
  // openid-client's non-OAuth answers carry the Response: read the body for the bank's words.
  const response = (error as { cause?: unknown }).cause as
    { status?: unknown; json?: () => Promise<unknown> } | undefined;
  if (words.error === null && typeof response?.status === 'number' && typeof response.json === 'function')
    words = bankWordsOf(response.status, await response.json().catch(() => null));
  return errors.badRequest('registration_failed', `The bank's ${step} failed: ${describeBankWords(words)}.`);
}

/**
 * What the registration asks for beyond the profile's constant metadata, from the bank's discovery: the
 * client authentication (RFC 8414 §2 `token_endpoint_auth_methods_supported`, `chooseClientAuth`), the
 * response type the callback will read (`response_types`, and `authorization_signed_response_alg` with
 * JARM), and the public signing key when the profile signs (RFC 7591 §2 `jwks`). A string says why the
 * bank cannot be used, before anything is sent to it.
 */
export function discoveredRegistration(
  profile: Pick<CountryProfile, 'clientAuthMethods' | 'responseShape' | 'signsRequests'>,
  metadata: client.ServerMetadata,
  subjectDn: string,
  signing: Pick<SigningKeyMaterial, 'publicJwk'> | null,
): Record<string, unknown> | string {
  const auth = chooseClientAuth(metadata.token_endpoint_auth_methods_supported, profile.clientAuthMethods);
  if (auth === null)
    return `the bank's discovery lists none of the client authentication methods allowed here (${profile.clientAuthMethods.join(', ')}; it lists ${(metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic']).join(', ').slice(0, 120)})`;
  const shape = profile.responseShape(metadata);
  if (typeof shape !== 'string') return shape.refused;
  if (profile.signsRequests && !signing) return 'the profile signs its requests, and no signing key was made';
  return {
    token_endpoint_auth_method: auth,
    ...(auth === 'tls_client_auth' ? { tls_client_auth_subject_dn: subjectDn } : {}),
    // RFC 7523 §2.2 and OpenID Connect Registration §2: the assertion's algorithm, PS256 (FAPI 1.0 §8.6).
    ...(auth === 'private_key_jwt' ? { token_endpoint_auth_signing_alg: 'PS256' } : {}),
    response_types: [shape === 'hybrid' ? 'code id_token' : 'code'],
    ...(shape === 'jarm' ? { authorization_signed_response_alg: 'PS256' } : {}),
    ...(signing ? { jwks: { keys: [signing.publicJwk] } } : {}),
  };
}

/**
 * Registers with the bank and returns the row to store, its secrets sealed. `dcr` is openid-client's
 * `dynamicClientRegistration` (a test may watch it); nothing is written here.
 */
export async function registerWithBank(
  input: RegistrationInput,
  secrets: SecretBox,
  now: number,
  options: {
    timeoutMs?: number;
    allowLoopbackHttp?: boolean;
    /** The banks one may register with: `institutionsOf(config)` (the built-in banks when left out). */
    institutions?: readonly Institution[];
  } = {},
): Promise<ConsentClientRow> {
  const { subjectDn } = checkRegistrationInput(input, now, options.allowLoopbackHttp, options.institutions);
  const agent = mtlsAgent(input, options.timeoutMs);
  try {
    const fetchWithCertificate = gatedFetch(mtlsFetch(agent));
    const execute = {
      [client.customFetch]: fetchWithCertificate,
      timeout: Math.ceil((options.timeoutMs ?? 10_000) / 1000),
      ...(options.allowLoopbackHttp && isLoopbackHttp(input.issuer)
        ? { execute: [client.allowInsecureRequests] }
        : {}),
    };
    const server = new URL(input.issuer);
    let metadata: client.ServerMetadata;
    try {
      metadata = (
        await client.discovery(server, 'discovery-only', undefined, client.None(), execute)
      ).serverMetadata();
    } catch (error) {
      throw await bankFailure('discovery', error);
    }
    if (!metadata.registration_endpoint && !metadata.mtls_endpoint_aliases?.registration_endpoint)
      throw errors.badRequest(
        'registration_failed',
        `The bank's discovery document names no registration endpoint.`,
      );
    const profile = profileOf(
      consentProfileOf(findInstitution(input.bankId, options.institutions)!).security,
    );
    const signing = profile.signsRequests ? generateSigningKey() : null;
    const chosen = discoveredRegistration(profile, metadata, subjectDn, signing);
    if (typeof chosen === 'string')
      throw errors.badRequest('registration_failed', `The bank cannot be used: ${chosen}.`);
    let registered: client.Configuration;
    try {
      registered = await client.dynamicClientRegistration(
        server,
        {
          software_statement: input.softwareStatement.trim(),
          use_mtls_endpoint_aliases: true,
          ...profile.registrationMetadata,
          ...chosen,
          redirect_uris: [input.redirectUri],
        },
        client.TlsClientAuth(),
        execute,
      );
    } catch (error) {
      throw await bankFailure('registration', error);
    }
    const answer = registered.clientMetadata() as Record<string, unknown>;
    const id = `cc_${randomBytes(8).toString('hex')}`;
    const token =
      typeof answer.registration_access_token === 'string' ? answer.registration_access_token : null;
    return {
      id,
      bank_id: input.bankId,
      mode: input.mode,
      issuer: metadata.issuer,
      api_base: input.apiBase,
      client_id: String(answer.client_id),
      registration_access_token_sealed: token === null ? null : secrets.seal(token, id),
      registration_client_uri:
        typeof answer.registration_client_uri === 'string' ? answer.registration_client_uri : null,
      private_key_sealed: secrets.seal(input.privateKeyPem, id),
      signing_key_sealed: signing ? secrets.seal(signing.privateKeyPem, id) : null,
      certificate_pem: input.certificatePem,
      server_ca_pem: input.serverCaPem,
      registration: JSON.stringify(publicRegistration(answer)),
      registered_at: now,
      updated_at: now,
    };
  } finally {
    await agent.close();
  }
}
