import t, { type Test } from 'tap';
import { createPublicKey, type JsonWebKey } from 'node:crypto';
import { compactVerify, type JSONWebKeySet } from 'jose';
import type { IdTokenFault } from '../../src/consent-bank/faults.js';
import { conformanceFixture } from '../helpers/consent-conformance.js';
import { forEachEngine, setTimeLimit } from '../helpers/harness.js';

/*
 * The ID token's modules of the FAPI 2.0 Security Profile (Final) relying-party test plan (the rest are in
 * consent-conformance.test.ts; docs/open-finance.md, "Client conformance"). The Chilean flow asks for
 * `openid`, so the token answer carries an ID token, which OpenID Connect Core 3.1.3.7 has the client check.
 * The bank alters the ID token it issued (one claim, or its algorithm) and signs it again with its own key:
 * the appliance must drop the tokens and make no link (the widget: `consent_invalid`), or, for a valid
 * variation, make the link as usual.
 */
setTimeLimit(t, 300_000);

type Outcome = 'refuse' | 'accept';
const MODULES: [string, IdTokenFault, string, Outcome][] = [
  ['FAPI2SPFinalClientTestInvalidIss', 'invalid-iss', 'iss is not the bank', 'refuse'],
  ['FAPI2SPFinalClientTestInvalidMissingIss', 'no-iss', 'no iss', 'refuse'],
  ['FAPI2SPFinalClientTestInvalidAud', 'invalid-aud', 'aud is not the appliance', 'refuse'],
  ['FAPI2SPFinalClientTestInvalidMissingAud', 'no-aud', 'no aud', 'refuse'],
  [
    'FAPI2SPFinalClientTestInvalidSecondaryAud',
    'untrusted-second-aud',
    'aud also names an untrusted client, with no azp',
    'refuse',
  ],
  ['FAPI2SPFinalClientTestValidAudAsArray', 'aud-array', 'aud is an array of the appliance alone', 'accept'],
  ['FAPI2SPFinalClientTestInvalidNullAlg', 'alg-none', 'alg: none, unsigned', 'refuse'],
  [
    'FAPI2SPFinalClientTestInvalidAlternateAlg',
    'alg-rs256',
    'signed with RS256, not the PS256 discovery names',
    'refuse',
  ],
  ['FAPI2SPFinalClientTestInvalidExpiredExp', 'expired-exp', 'exp six minutes past', 'refuse'],
  ['FAPI2SPFinalClientTestInvalidMissingExp', 'no-exp', 'no exp', 'refuse'],
  ['FAPI2SPFinalClientTestInvalidNonce', 'invalid-nonce', 'a nonce the appliance never sent', 'refuse'],
];

const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
const headerOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;

forEachEngine(t, async (t, engine) => {
  const fx = await conformanceFixture(t, engine);
  const { bank } = fx;
  const faults = bank.faults;
  t.afterEach(async () => {
    faults.reset();
    await fx.rediscover();
  });
  // The bank's published key, as a key of no algorithm of its own: the RS256 module signs with it too.
  const [published] = ((await (await fetch(`${bank.issuer}/jwks`)).json()) as JSONWebKeySet).keys;
  const bankKey = createPublicKey({ key: published as JsonWebKey, format: 'jwk' });
  /** The ID token the appliance received with the code's tokens. */
  const idTokenOf = () => {
    const answer = fx.tokenAnswers().find((a) => typeof a.id_token === 'string');
    return String(answer?.id_token);
  };

  /** What the fault did to the ID token, read from what the appliance received. */
  const checkAltered = async (t: Test, fault: IdTokenFault, idToken: string, clientId: string) => {
    const claims = claimsOf(idToken);
    const header = headerOf(idToken);
    if (fault === 'alg-none') {
      t.equal(header.alg, 'none', 'the bank sent an unsigned ID token');
      t.equal(idToken.split('.')[2], '', 'with no signature');
      return;
    }
    const verified = await compactVerify(idToken, bankKey, { algorithms: ['PS256', 'RS256'] });
    t.equal(
      verified.protectedHeader.alg,
      fault === 'alg-rs256' ? 'RS256' : 'PS256',
      "signed with the bank's own key: only what the module names is wrong",
    );
    const expected: Partial<Record<IdTokenFault, () => void>> = {
      'invalid-iss': () => t.equal(claims.iss, `${bank.issuer}1`),
      'no-iss': () => t.notOk('iss' in claims),
      'invalid-aud': () => t.equal(claims.aud, `${clientId}1`),
      'no-aud': () => t.notOk('aud' in claims),
      'untrusted-second-aud': () => t.same(claims.aud, [clientId, `${clientId}1`]),
      'aud-array': () => t.same(claims.aud, [clientId]),
      'expired-exp': () => t.ok(Number(claims.exp) < Date.now() / 1000 - 300, 'exp is past'),
      'no-exp': () => t.notOk('exp' in claims),
      'invalid-nonce': () => t.equal(claims.nonce, '1'),
    };
    expected[fault]?.();
  };

  for (const [module, fault, what, outcome] of MODULES)
    t.test(
      `${module}: the ID token's ${what}; ${outcome === 'refuse' ? 'the tokens are dropped, no link' : 'the link is made and syncs'}`,
      async (t) => {
        faults.setFaults({ idToken: fault });
        const made = await fx.trip();
        const clientId = (await fx.bankClient()).registration.client_id;
        await checkAltered(t, fault, idTokenOf(), clientId);
        if (outcome === 'refuse') await fx.refused(t, made, { problem: 'consent_invalid', exchanged: true });
        else await fx.linked(t, made);
      },
    );

  t.test(
    'FAPI2SPFinalClientTestInvalidMissingNonce: skipped as the module skips it: the appliance sends no nonce',
    async (t) => {
      faults.setFaults({ idToken: 'no-nonce' });
      const made = await fx.trip();
      t.notOk(fx.pushed()[0]!.has('nonce'), 'the pushed request has no nonce (PKCE guards the trip)');
      t.notOk('nonce' in claimsOf(idTokenOf()), 'so the ID token has none to remove');
      // What the module would then see: the happy path.
      await fx.linked(t, made);
    },
  );
});
