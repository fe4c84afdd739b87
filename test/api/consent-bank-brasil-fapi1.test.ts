import * as client from 'openid-client';
import type { Test } from 'tap';
import t from 'tap';
import { fetch as undiciFetch, type Agent } from 'undici';
import type { BankOptions } from '../../src/consent-bank/bank-profile.js';
import { REDIRECT_URI, fetchWith, mtlsAgent } from '../helpers/consent-bank.js';
import {
  authoriseBrasil,
  clientKey,
  exchangeCode,
  registerBrasil,
  startBrasil,
  type BrasilClient,
} from '../helpers/brasil-bank.js';
import { forEachEngine } from '../helpers/harness.js';
import type { BrasilBank } from '../../src/consent-bank/brasil/brasil-bank.js';

/*
 * The simulated Open Finance Brasil bank holds a client to FAPI 1.0 Advanced as Brazil's security profile
 * reads it, on both engines, over real HTTP and mTLS: a signed request object at PAR (§5.2.2 clause 10, with
 * `exp`, `nbf`, `aud`, `iss`, `jti`), `private_key_jwt` (RFC 7523 §2.2) or `tls_client_auth` as registered, and
 * the response types its configuration offers: `code id_token` (§5.2.2.1, posted back with form_post, the ID
 * token a detached signature) and `code` with JARM.
 */

const CPF = '52998224725';

async function consentOf(bank: BrasilBank, agent: Agent, brasil: BrasilClient): Promise<string> {
  const token = (await client.clientCredentialsGrant(brasil.config, { scope: 'consents' })).access_token;
  const response = await undiciFetch(`${bank.mtlsBase}/open-banking/consents/v3/consents`, {
    dispatcher: agent,
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'x-fapi-interaction-id': crypto.randomUUID(),
    },
    body: JSON.stringify({
      data: {
        loggedUser: { document: { identification: CPF, rel: 'CPF' } },
        permissions: [
          'ACCOUNTS_READ',
          'ACCOUNTS_BALANCES_READ',
          'ACCOUNTS_TRANSACTIONS_READ',
          'RESOURCES_READ',
        ],
      },
    }),
  });
  const body = (await response.json()) as { data: { consentId: string } };
  return body.data.consentId;
}

/** The OAuth error of a refused call, as openid-client reads the bank's answer. */
async function refusedWith(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'accepted';
  } catch (error) {
    if (error instanceof client.ResponseBodyError || error instanceof client.AuthorizationResponseError)
      return `${error.error}: ${error.error_description ?? ''}`;
    // openid-client's ClientError wraps oauth4webapi's, whose message names the claim that failed.
    const cause = (error as { cause?: { message?: unknown } }).cause;
    return `${(error as Error).message}${typeof cause?.message === 'string' ? ` (${cause.message})` : ''}`;
  }
}

async function bankWith(
  t: Test,
  engine: Parameters<typeof startBrasil>[1],
  options: Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'> = {},
) {
  const { bank, ca } = await startBrasil(t, engine, options);
  return { bank, ca, agent: mtlsAgent(t, ca) };
}

const parameters = async (consentId: string, verifier: string) => ({
  redirect_uri: REDIRECT_URI,
  scope: `openid consent:${consentId} accounts resources`,
  response_type: 'code',
  response_mode: 'jwt',
  code_challenge: await client.calculatePKCECodeChallenge(verifier),
  code_challenge_method: 'S256',
  state: client.randomState(),
  nonce: client.randomNonce(),
});

forEachEngine(t, async (t, engine) => {
  t.test('FAPI 1.0 Advanced §5.2.2 clause 10: the PAR must carry a signed request object', async (t) => {
    const { bank, ca, agent } = await bankWith(t, engine);
    const brasil = await registerBrasil(bank, ca, agent);
    const discovery = (await (
      await fetch(`${bank.issuer}/.well-known/openid-configuration`)
    ).json()) as Record<string, unknown>;
    t.equal(discovery.require_signed_request_object, true, 'discovery says so (RFC 9101 §10.5)');
    t.same(discovery.request_object_signing_alg_values_supported, ['PS256']);
    const consentId = await consentOf(bank, agent, brasil);
    const verifier = client.randomPKCECodeVerifier();

    const plain = await refusedWith(
      client.buildAuthorizationUrlWithPAR(brasil.config, await parameters(consentId, verifier)),
    );
    t.match(plain, /^invalid_request: Request Object must be used/, 'parameters in the clear are refused');

    const otherKey = await clientKey(brasil.key.publicJwk.kid as string);
    const forged = await client.buildAuthorizationUrlWithJAR(
      brasil.config,
      await parameters(consentId, verifier),
      otherKey.privateKey,
    );
    t.match(
      await refusedWith(client.buildAuthorizationUrlWithPAR(brasil.config, forged.searchParams)),
      /^invalid_request_object/,
      'a request object signed with a key the client did not register is refused',
    );

    for (const claim of ['jti', 'exp', 'nbf', 'aud'] as const) {
      const without = await client.buildAuthorizationUrlWithJAR(
        brasil.config,
        await parameters(consentId, verifier),
        brasil.key.privateKey,
        { [client.modifyAssertion]: (_header, payload) => void delete payload[claim] },
      );
      t.match(
        await refusedWith(client.buildAuthorizationUrlWithPAR(brasil.config, without.searchParams)),
        /^invalid_request_object/,
        `a request object without ${claim} is refused (FAPI 1.0 Advanced §5.2.2 clause 13, RFC 9101 §4)`,
      );
    }
    const longLived = await client.buildAuthorizationUrlWithJAR(
      brasil.config,
      await parameters(consentId, verifier),
      brasil.key.privateKey,
      {
        [client.modifyAssertion]: (_header, payload) => {
          payload.exp = Number(payload.nbf) + 3601;
        },
      },
    );
    t.match(
      await refusedWith(client.buildAuthorizationUrlWithPAR(brasil.config, longLived.searchParams)),
      /^invalid_request_object: Request Object 'exp' claim too far/,
      'exp more than 60 minutes after nbf is refused (§5.2.2 clause 13)',
    );

    const trip = await authoriseBrasil(brasil, consentId);
    const tokens = await exchangeCode(brasil, trip);
    t.ok(tokens.access_token, 'a signed request object at PAR goes through');
  });

  t.test(
    'RFC 7523 §2.2: a client registered for private_key_jwt authenticates with a signed assertion',
    async (t) => {
      const { bank, ca, agent } = await bankWith(t, engine);
      const brasil = await registerBrasil(bank, ca, agent, { auth: 'private_key_jwt' });
      t.equal(brasil.config.clientMetadata().token_endpoint_auth_method, 'private_key_jwt');
      const tokens = await client.clientCredentialsGrant(brasil.config, { scope: 'consents' });
      t.ok(tokens.access_token, 'client_credentials with a PS256 client assertion');
      const consentId = await consentOf(bank, agent, brasil);
      const trip = await authoriseBrasil(brasil, consentId);
      const granted = await exchangeCode(brasil, trip);
      t.ok(granted.refresh_token, 'the code exchange with the assertion');

      // The same client without its assertion: the certificate alone does not authenticate it.
      const mtlsOnly = new client.Configuration(
        brasil.config.serverMetadata(),
        brasil.config.clientMetadata().client_id,
        { use_mtls_endpoint_aliases: true },
        client.TlsClientAuth(),
      );
      mtlsOnly[client.customFetch] = fetchWith(agent);
      client.allowInsecureRequests(mtlsOnly);
      t.match(
        await refusedWith(client.clientCredentialsGrant(mtlsOnly, { scope: 'consents' })),
        /^invalid_client/,
        'tls_client_auth is refused for a private_key_jwt client',
      );
    },
  );

  t.test('a bank that offers only private_key_jwt refuses a tls_client_auth registration', async (t) => {
    const { bank, ca, agent } = await bankWith(t, engine, { clientAuthMethods: ['private_key_jwt'] });
    const discovery = (await (
      await fetch(`${bank.issuer}/.well-known/openid-configuration`)
    ).json()) as Record<string, unknown>;
    t.same(discovery.token_endpoint_auth_methods_supported, ['private_key_jwt']);
    t.match(await refusedWith(registerBrasil(bank, ca, agent)), /invalid_client_metadata/);
  });

  t.test(
    'FAPI 1.0 Advanced §5.2.2.1: a bank of code id_token only answers by form_post with a detached signature',
    async (t) => {
      const { bank, ca, agent } = await bankWith(t, engine, { authorizationResponses: 'code id_token' });
      const discovery = (await (
        await fetch(`${bank.issuer}/.well-known/openid-configuration`)
      ).json()) as Record<string, string[]>;
      t.same(discovery.response_types_supported, ['code id_token'], 'no plain code');
      t.notOk(discovery.response_modes_supported!.includes('jwt'), 'no JARM');
      t.ok(discovery.response_modes_supported!.includes('form_post'));
      t.match(await refusedWith(registerBrasil(bank, ca, agent)), /invalid_client_metadata|invalid_redirect/);

      const brasil = await registerBrasil(bank, ca, agent, { hybrid: true });
      const trip = await authoriseBrasil(brasil, await consentOf(bank, agent, brasil));
      t.ok(trip.posted?.get('code'), 'the code is posted back');
      t.ok(trip.posted?.get('id_token'), 'with the ID token');
      const claims = JSON.parse(
        Buffer.from(trip.posted!.get('id_token')!.split('.')[1]!, 'base64url').toString(),
      );
      t.ok(claims.c_hash, 'c_hash covers the code');
      t.ok(claims.s_hash, 's_hash covers the state');
      t.equal(claims.nonce, trip.nonce);
      const tokens = await exchangeCode(brasil, trip);
      t.ok(
        tokens.access_token,
        'the detached signature checks (c_hash, s_hash, nonce) and the code is exchanged',
      );

      const again = await authoriseBrasil(brasil, await consentOf(bank, agent, brasil));
      const swapped = new URL(again.callback);
      const fields = new URLSearchParams(again.callback.hash.slice(1));
      fields.set('code', trip.posted!.get('code')!);
      swapped.hash = fields.toString();
      t.match(
        await refusedWith(exchangeCode(brasil, again, swapped)),
        /"c_hash" \(code hash\) claim value/,
        'a code the ID token does not cover is refused (c_hash)',
      );
    },
  );

  t.test('a bank of JARM only offers no code id_token', async (t) => {
    const { bank } = await bankWith(t, engine, { authorizationResponses: 'jarm' });
    const discovery = (await (
      await fetch(`${bank.issuer}/.well-known/openid-configuration`)
    ).json()) as Record<string, string[]>;
    t.same(discovery.response_types_supported, ['code']);
    t.ok(discovery.response_modes_supported!.includes('jwt'));
  });
});
