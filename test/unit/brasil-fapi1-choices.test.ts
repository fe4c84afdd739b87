import { createPublicKey, verify, constants } from 'node:crypto';
import * as client from 'openid-client';
import t from 'tap';
import { discoveredRegistration } from '../../src/banks/consent/register.js';
import { brasil, brasilResponseShape } from '../../src/banks/consent/profiles/brasil.js';
import { chile } from '../../src/banks/consent/profiles/chile.js';
import {
  chooseClientAuth,
  generateSigningKey,
  rsaThumbprint,
  signingKeyOf,
} from '../../src/banks/consent/request-signing.js';

/*
 * The pure choices of the Brazilian path read against FAPI 1.0 Advanced (issue 41 item 6): which
 * authorization response the appliance asks for from the bank's discovery (§5.2.2 clause 2, §5.2.2.1, JARM),
 * which client authentication it registers (RFC 8705 §2.1.1 or RFC 7523 §2.2), what the registration carries
 * (RFC 7591 §2 `jwks`, `request_object_signing_alg`), and the PS256 key that signs its request objects.
 */

const metadata = (members: Partial<client.ServerMetadata>): client.ServerMetadata => ({
  issuer: 'https://bank.example',
  ...members,
});

/** What the appliance asks a Brazilian bank for, from the response types and modes its discovery lists. */
const shapeFor = (types?: string[], modes?: string[]) =>
  brasilResponseShape(
    metadata({
      ...(types && { response_types_supported: types }),
      ...(modes && { response_modes_supported: modes }),
    }),
  );

t.test(
  'FAPI 1.0 Advanced §5.2.2: JARM when offered, else code id_token by form_post, else refused',
  async (t) => {
    t.equal(
      shapeFor(['code id_token', 'code'], ['jwt', 'form_post']),
      'jarm',
      'both offered: code with JARM',
    );
    t.equal(
      shapeFor(['id_token code'], ['form_post', 'fragment']),
      'hybrid',
      'code id_token in either word order, posted back',
    );
    t.equal(
      shapeFor(['code', 'code id_token'], ['query', 'form_post']),
      'hybrid',
      'code without JARM is not FAPI 1.0 (§5.2.2 clause 2): the hybrid flow',
    );
    t.match(
      shapeFor(['code id_token']),
      { refused: /fragment/ },
      'no response_modes_supported means query and fragment (RFC 8414 §2): the callback cannot read a fragment',
    );
    t.match(shapeFor(['code'], ['query']), { refused: /neither code with JARM nor code id_token/ });
    t.match(shapeFor(), { refused: /response_types_supported: none/ });
    t.equal(chile.responseShape(metadata({})), 'query', "Chile's FAPI 2.0: a plain code with iss");
  },
);

t.test(
  'client authentication: tls_client_auth where allowed, private_key_jwt (RFC 7523 §2.2) when only it',
  async (t) => {
    const allowed = brasil.clientAuthMethods;
    t.equal(chooseClientAuth(['private_key_jwt', 'tls_client_auth'], allowed), 'tls_client_auth');
    t.equal(chooseClientAuth(['private_key_jwt', 'client_secret_basic'], allowed), 'private_key_jwt');
    t.equal(chooseClientAuth(['client_secret_basic'], allowed), null);
    t.equal(chooseClientAuth(undefined, allowed), null, 'no list means client_secret_basic (RFC 8414 §2)');
    t.equal(
      chooseClientAuth(['private_key_jwt'], chile.clientAuthMethods),
      null,
      "the CMF's draft: mTLS only",
    );
  },
);

t.test('what the registration asks for from the discovery (RFC 7591 §2)', async (t) => {
  const signing = generateSigningKey();
  const both = discoveredRegistration(
    brasil,
    metadata({
      token_endpoint_auth_methods_supported: ['tls_client_auth', 'private_key_jwt'],
      response_types_supported: ['code', 'code id_token'],
      response_modes_supported: ['jwt', 'form_post'],
    }),
    'CN=svc',
    signing,
  );
  t.same(both, {
    token_endpoint_auth_method: 'tls_client_auth',
    tls_client_auth_subject_dn: 'CN=svc',
    response_types: ['code'],
    authorization_signed_response_alg: 'PS256',
    jwks: { keys: [signing.publicJwk] },
  });
  const keyOnly = discoveredRegistration(
    brasil,
    metadata({
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      response_types_supported: ['code id_token'],
      response_modes_supported: ['form_post'],
    }),
    'CN=svc',
    signing,
  );
  t.same(keyOnly, {
    token_endpoint_auth_method: 'private_key_jwt',
    token_endpoint_auth_signing_alg: 'PS256',
    response_types: ['code id_token'],
    jwks: { keys: [signing.publicJwk] },
  });
  t.match(
    discoveredRegistration(
      brasil,
      metadata({ token_endpoint_auth_methods_supported: ['client_secret_basic'] }),
      'CN=svc',
      signing,
    ),
    /none of the client authentication methods allowed here/,
  );
  t.equal(brasil.registrationMetadata.request_object_signing_alg, 'PS256', 'FAPI 1.0 Advanced §8.6: PS256');
  t.notOk('d' in signing.publicJwk, 'only the public half is registered');
});

t.test(
  'the signing key: RFC 7638 kid, and request objects openid-client signs with it verify as PS256',
  async (t) => {
    // RFC 7638 §3.1's example key and thumbprint.
    t.equal(
      rsaThumbprint({
        kty: 'RSA',
        e: 'AQAB',
        n: '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw',
      }),
      'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs',
    );
    const signing = generateSigningKey();
    const key = await signingKeyOf(signing.privateKeyPem);
    t.equal(key.kid, signing.publicJwk.kid);
    const configuration = new client.Configuration(
      metadata({ authorization_endpoint: 'https://bank.example/auth' }),
      'client-1',
    );
    const url = await client.buildAuthorizationUrlWithJAR(
      configuration,
      { redirect_uri: 'https://app.example/cb', scope: 'openid', response_type: 'code', state: 's' },
      key,
    );
    const jws = url.searchParams.get('request')!;
    const [header, payload, signature] = jws.split('.') as [string, string, string];
    const head = JSON.parse(Buffer.from(header, 'base64url').toString());
    t.match(head, { alg: 'PS256', kid: signing.publicJwk.kid });
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    t.match(claims, { iss: 'client-1', aud: 'https://bank.example', client_id: 'client-1', state: 's' });
    for (const claim of ['exp', 'nbf', 'iat', 'jti'])
      t.ok(claims[claim], `${claim} (FAPI 1.0 Advanced §5.2.2 clause 13)`);
    t.ok(claims.exp - claims.nbf <= 3600, 'exp at most 60 minutes after nbf');
    const publicKey = createPublicKey({ key: signing.publicJwk, format: 'jwk' });
    t.ok(
      verify(
        'sha256',
        Buffer.from(`${header}.${payload}`),
        { key: publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
        Buffer.from(signature, 'base64url'),
      ),
      'the registered public key verifies the signature (RSASSA-PSS, SHA-256)',
    );
  },
);
