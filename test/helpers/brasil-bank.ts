import * as client from 'openid-client';
import type { Test } from 'tap';
import type { Agent } from 'undici';
import { systemClock } from '../../src/clock/clock.js';
import type { BankOptions } from '../../src/consent-bank/bank-profile.js';
import { startBrasilBank, type BrasilBank } from '../../src/consent-bank/brasil/brasil-bank.js';
import { issueSoftwareStatement } from '../../src/consent-bank/software-statement.js';
import { subjectDnOf, type TestCaMaterial } from '../../src/consent-bank/test-ca.js';
import { silentLogger } from '../../src/logging/logger.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import { REDIRECT_URI, atTheBank, fetchWith, standInBank } from './consent-bank.js';
import type { EngineName } from './harness.js';

/*
 * A Brazilian client written from FAPI 1.0 Advanced and openid-client alone (not the appliance's code), for
 * the simulated Open Finance Brasil bank's tests: its own PS256 key (registered as `jwks`, RFC 7591 §2),
 * request objects at PAR (FAPI 1.0 Advanced §5.2.2 clause 10), `tls_client_auth` or `private_key_jwt`, and
 * `code` with JARM or `code id_token` posted back (§5.2.2.1).
 */

/** Starts the Brazilian bank on a fresh database, its browser face on a stand-in appliance. */
export async function startBrasil(
  t: Test,
  engine: EngineName,
  options: Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'> = {},
): Promise<{ bank: BrasilBank; ca: TestCaMaterial }> {
  const { bank, ca } = await standInBank(t, engine, ({ db, ca, appUrl }) =>
    startBrasilBank({
      db,
      ca,
      clock: systemClock,
      logger: silentLogger,
      publicBaseUrl: appUrl,
      data: sandboxCustomerData(),
      port: 0,
      ...options,
    }),
  );
  return { bank, ca };
}

export interface ClientKey {
  privateKey: client.PrivateKey;
  publicJwk: client.JWK;
}

/** A PS256 (RSA-PSS, SHA-256, 2048 bits) key with a `kid`, as a FAPI 1.0 client keeps one. */
export async function clientKey(kid = `k-${crypto.randomUUID()}`): Promise<ClientKey> {
  const pair = await crypto.subtle.generateKey(
    { name: 'RSA-PSS', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
    true,
    ['sign', 'verify'],
  );
  const jwk = await crypto.subtle.exportKey('jwk', pair.publicKey);
  return {
    privateKey: { key: pair.privateKey, kid },
    publicJwk: { kty: jwk.kty!, n: jwk.n!, e: jwk.e!, kid, use: 'sig', alg: 'PS256' },
  };
}

export interface BrasilClient {
  config: client.Configuration;
  key: ClientKey;
  hybrid: boolean;
}

/** Registers with the bank (RFC 7591) as Brazil's profile has a client do, and configures openid-client. */
export async function registerBrasil(
  bank: BrasilBank,
  ca: TestCaMaterial,
  agent: Agent,
  options: { auth?: 'tls_client_auth' | 'private_key_jwt'; hybrid?: boolean; key?: ClientKey } = {},
): Promise<BrasilClient> {
  const key = options.key ?? (await clientKey());
  const auth = options.auth ?? 'tls_client_auth';
  const statement = await issueSoftwareStatement(ca.directoryKey, {
    clientName: 'svc appliance',
    redirectUris: [REDIRECT_URI],
    subjectDn: subjectDnOf(ca.client.cert),
    now: Math.floor(Date.now() / 1000),
  });
  const clientAuth =
    auth === 'private_key_jwt' ? client.PrivateKeyJwt(key.privateKey) : client.TlsClientAuth();
  const config = await client.dynamicClientRegistration(
    new URL(bank.issuer),
    {
      redirect_uris: [REDIRECT_URI],
      software_statement: statement,
      token_endpoint_auth_method: auth,
      ...(auth === 'tls_client_auth'
        ? { tls_client_auth_subject_dn: subjectDnOf(ca.client.cert) }
        : { token_endpoint_auth_signing_alg: 'PS256' }),
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      response_types: [options.hybrid ? 'code id_token' : 'code'],
      ...(options.hybrid ? {} : { authorization_signed_response_alg: 'PS256' }),
      id_token_signed_response_alg: 'PS256',
      request_object_signing_alg: 'PS256',
      jwks: { keys: [key.publicJwk] },
      tls_client_certificate_bound_access_tokens: true,
      use_mtls_endpoint_aliases: true,
    },
    clientAuth,
    { execute: [client.allowInsecureRequests], [client.customFetch]: fetchWith(agent) },
  );
  config[client.customFetch] = fetchWith(agent);
  if (options.hybrid) {
    client.useCodeIdTokenResponseType(config);
    client.enableDetachedSignatureResponseChecks(config);
  } else client.useJwtResponseMode(config);
  return { config, key, hybrid: options.hybrid === true };
}

export interface BrasilTrip {
  /** The callback as openid-client reads it: JARM in the query, `code id_token` in the fragment. */
  callback: URL;
  /** A form-posted answer's fields (hybrid), else null. */
  posted: URLSearchParams | null;
  verifier: string;
  state: string;
  nonce: string;
  pages: string[];
}

/**
 * The trip's code exchanged at the token endpoint as the client does: the PKCE verifier sent (RFC 7636 §4.5),
 * the state and the nonce checked; at `callback` when a test hands in another (a swapped code).
 */
export function exchangeCode(
  brasil: Pick<BrasilClient, 'config'>,
  trip: Pick<BrasilTrip, 'callback' | 'verifier' | 'state' | 'nonce'>,
  callback: URL = trip.callback,
): ReturnType<typeof client.authorizationCodeGrant> {
  return client.authorizationCodeGrant(brasil.config, callback, {
    pkceCodeVerifier: trip.verifier,
    expectedState: trip.state,
    expectedNonce: trip.nonce,
  });
}

/** The hidden fields of the bank's form_post page (OAuth 2.0 Form Post Response Mode §2). */
export function formPostFields(page: string): URLSearchParams {
  const fields = new URLSearchParams();
  for (const match of page.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\s*\/?>/g))
    fields.set(match[1]!, match[2]!.replace(/&amp;/g, '&').replace(/&quot;/g, '"'));
  return fields;
}

/**
 * PAR with a signed request object (FAPI 1.0 Advanced §5.2.2 clause 10, RFC 9126 §3), sign-in with a CPF and
 * the decision; the answer as the browser would carry it to the client.
 */
export async function authoriseBrasil(
  brasil: BrasilClient,
  consentId: string,
  options: { cpf?: string; decision?: 'confirm' | 'abort'; scopes?: string } = {},
): Promise<BrasilTrip> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const signed = await client.buildAuthorizationUrlWithJAR(
    brasil.config,
    {
      redirect_uri: REDIRECT_URI,
      scope: `openid consent:${consentId} ${options.scopes ?? 'accounts credit-cards-accounts resources'}`,
      ...(brasil.hybrid
        ? { response_type: 'code id_token', response_mode: 'form_post' }
        : { response_type: 'code', response_mode: 'jwt' }),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    },
    brasil.key.privateKey,
  );
  const url = await client.buildAuthorizationUrlWithPAR(brasil.config, signed.searchParams);
  const done = await atTheBank(url.href, REDIRECT_URI, {
    cpf: options.cpf ?? '529.982.247-25',
    language: 'pt',
    decision: options.decision,
  });
  const pages = done.pages;
  if (!brasil.hybrid)
    return { callback: new URL(done.callback), posted: null, verifier, state, nonce, pages };
  const page = await done.answer.text();
  pages.push(page);
  const posted = formPostFields(page);
  const callback = new URL(REDIRECT_URI);
  callback.hash = posted.toString();
  return { callback, posted, verifier, state, nonce, pages };
}
