import t from 'tap';
import * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import { openFinanceValidator } from '../../src/open-finance/schemas.js';
import { forEachEngine } from '../helpers/harness.js';
import {
  consent,
  mtlsAgent,
  register,
  startBank,
  strangerAgent,
  type BankFixture,
} from '../helpers/consent-bank.js';

/* Each fault of issue 30, item 7: the simulated bank does it when asked (and the sandbox users carry some). */

const validate = openFinanceValidator();
const ACCOUNTS = '/open-banking/accounts/v2/accounts';

async function call(fixture: BankFixture, agent: Agent, token: string, path = ACCOUNTS) {
  const started = Date.now();
  const response = await undiciFetch(`${fixture.bank.mtlsBase}${path}`, {
    dispatcher: agent,
    // The files require an interaction id on every call.
    headers: { authorization: `Bearer ${token}`, 'x-fapi-interaction-id': crypto.randomUUID() },
  });
  return { response, body: (await response.json()) as Record<string, unknown>, ms: Date.now() - started };
}

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const agent = mtlsAgent(t, fixture.ca);
  const config = await register(fixture, agent);
  t.beforeEach(() => fixture.faults.reset());
  /** The status the bank answers a read of the accounts with `token`, over `through`'s certificate. */
  const statusOf = async (through: Agent, token: string) =>
    (await call(fixture, through, token)).response.status;

  t.test('refuse the consent: access_denied whatever the user clicks (33.333.333-3)', async (t) => {
    const result = await consent(fixture, config, { rut: '33.333.333-3' });
    t.equal(result.callback.searchParams.get('error'), 'access_denied');
    t.notOk(result.callback.searchParams.has('code'));
  });

  t.test('the user refuses: access_denied', async (t) => {
    const result = await consent(fixture, config, { decision: 'abort', language: 'en' });
    t.match(result.pages[1], /Allow access to your data/);
    t.equal(result.callback.searchParams.get('error'), 'access_denied');
  });

  t.test('an early-expiring request_uri is refused at the authorization', async (t) => {
    fixture.faults.setFaults({ requestUriTtlSeconds: 0 });
    const url = await client.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: 'https://app.example/callback',
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      grant_management_action: 'create',
      authorization_details: JSON.stringify([{ type: 'Accounts', actions: ['ReadAccounts'] }]),
    });
    const response = await fetch(url, { redirect: 'manual' });
    t.equal(response.status, 400, 'the bank’s error page');
    t.match(await response.text(), /ya no está vigente/);
  });

  t.test('a replayed code: refused normally, accepted under the fault (99.999.999-9)', async (t) => {
    const normal = await consent(fixture, config, { exchange: false });
    const checks = { pkceCodeVerifier: normal.verifier, expectedState: normal.state };
    await client.authorizationCodeGrant(config, normal.callback, checks);
    await t.rejects(
      client.authorizationCodeGrant(config, normal.callback, checks),
      'the second exchange is refused',
    );

    const replay = await consent(fixture, config, { rut: '99.999.999-9', exchange: false });
    const again = { pkceCodeVerifier: replay.verifier, expectedState: replay.state };
    const first = await client.authorizationCodeGrant(config, replay.callback, again);
    const second = await client.authorizationCodeGrant(config, replay.callback, again);
    t.not(first.access_token, second.access_token, 'two token sets from one code');
  });

  t.test('unbound tokens: another certificate of the CA may use them (88.888.888-8)', async (t) => {
    const otherAgent = await strangerAgent(t, fixture.ca);
    const bound = (await consent(fixture, config)).tokens!;
    t.equal(await statusOf(otherAgent, bound.access_token), 401, 'bound: refused');
    const unbound = (await consent(fixture, config, { rut: '88.888.888-8' })).tokens!;
    t.equal(await statusOf(otherAgent, unbound.access_token), 200, 'unbound: accepted');
  });

  t.test('401, 403, 429 and 529 on demand, with Retry-After where due', async (t) => {
    const tokens = (await consent(fixture, config)).tokens!;
    for (const status of [401, 403, 429, 529] as const) {
      fixture.faults.setFaults({ resourceStatus: status });
      const { response } = await call(fixture, agent, tokens.access_token);
      t.equal(response.status, status);
      t.ok(response.headers.get('x-fapi-interaction-id'));
      if (status === 429) t.equal(response.headers.get('retry-after'), '30');
      if (status === 529) t.equal(response.headers.get('retry-after'), '2');
      if (status === 401) t.match(response.headers.get('www-authenticate'), /invalid_token/);
    }
    const limited = (await consent(fixture, config, { rut: '44.444.444-4' })).tokens!;
    fixture.faults.reset();
    t.equal(await statusOf(agent, limited.access_token), 429, 'the sandbox user’s own');
  });

  t.test('slower than 4 s', async (t) => {
    const tokens = (await consent(fixture, config)).tokens!;
    fixture.faults.setFaults({ delayMs: 4_200 });
    const { response, ms } = await call(fixture, agent, tokens.access_token);
    t.equal(response.status, 200);
    t.ok(ms >= 4_000, `answered after ${ms} ms`);
  });

  t.test('data that breaks the schema fails validation (77.777.777-7)', async (t) => {
    const good = (await consent(fixture, config)).tokens!;
    const listOk = validate('accounts-2.4.2', 'ResponseAccountList');
    t.ok(listOk((await call(fixture, agent, good.access_token)).body), 'the normal answer passes');
    const broken = (await consent(fixture, config, { rut: '77.777.777-7' })).tokens!;
    t.notOk(listOk((await call(fixture, agent, broken.access_token)).body), 'the broken answer fails');
  });

  t.test('a server certificate from another CA is refused by a client that trusts ours', async (t) => {
    fixture.faults.setFaults({ foreignServerCertificate: true });
    const fresh = new Agent({
      connect: { ca: fixture.ca.caCert, cert: fixture.ca.client.cert, key: fixture.ca.client.key },
    });
    t.teardown(() => fresh.close());
    await t.rejects(undiciFetch(`${fixture.bank.mtlsBase}/par`, { dispatcher: fresh }));
    fixture.faults.reset();
    const healed = new Agent({
      connect: { ca: fixture.ca.caCert, cert: fixture.ca.client.cert, key: fixture.ca.client.key },
    });
    t.teardown(() => healed.close());
    const again = await undiciFetch(`${fixture.bank.mtlsBase}/grants/none`, { dispatcher: healed });
    // Grant Management answers 401 without a client_credentials token (draft 6.1): an HTTP answer all the same.
    t.equal(again.status, 401, 'the bank’s own certificate again: the handshake passes');
  });

  t.test('registration is refused without a valid software statement', async (t) => {
    const response = await undiciFetch(`${fixture.bank.mtlsBase}/reg`, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['https://app.example/callback'],
        token_endpoint_auth_method: 'tls_client_auth',
        tls_client_auth_subject_dn: 'CN=svc appliance, O=svc sandbox, C=CL',
      }),
    });
    t.equal(response.status, 400);
    t.match(await response.json(), { error: 'invalid_software_statement' });
  });
});
