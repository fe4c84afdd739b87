import t from 'tap';
import * as client from 'openid-client';
import { fetch as undiciFetch, type Agent } from 'undici';
import type { CustomerData } from '../../src/consent-bank/customer-data.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import { forEachEngine } from '../helpers/harness.js';
import {
  ALL_ACTIONS,
  FULL_METADATA,
  consent,
  grantCall,
  grantManagementToken,
  mtlsAgent,
  register,
  startBank,
  strangerAgent,
  type BankFixture,
} from '../helpers/consent-bank.js';

/*
 * Issue 41 item 3: the simulated Chilean bank applies what a client registered and no more, and serves the
 * Open Finance files as they are written. Each test names the section it holds the bank to.
 */

const DAY = 86_400_000;
const day = (offset: number) => new Date(Date.now() + offset * DAY).toISOString().slice(0, 10);

async function read(
  fixture: BankFixture,
  agent: Agent,
  token: string | null,
  path: string,
  headers: Record<string, string> = {},
) {
  const response = await undiciFetch(`${fixture.bank.mtlsBase}${path}`, {
    dispatcher: agent,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      'x-fapi-interaction-id': crypto.randomUUID(),
      ...headers,
    },
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the files' schemas checked the shape
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

async function parRefusal(config: client.Configuration, details: unknown): Promise<string> {
  try {
    await client.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: 'https://app.example/callback',
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      grant_management_action: 'create',
      authorization_details: JSON.stringify(details),
    });
    return 'accepted';
  } catch (error) {
    return (error as { error?: string }).error ?? String(error);
  }
}

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const agent = mtlsAgent(t, fixture.ca);
  const full = await register(fixture, agent);

  t.test(
    'discovery advertises Grant Management, RAR types and every scope (Grant Management 4, RFC 9396 10)',
    async (t) => {
      const body = (await (
        await fetch(`${fixture.bank.issuer}/.well-known/openid-configuration`)
      ).json()) as Record<string, unknown>;
      t.equal(body.grant_management_endpoint, `${fixture.bank.mtlsBase}/grants`);
      t.same(body.grant_management_actions_supported, ['create', 'query', 'revoke']);
      t.same(body.authorization_details_types_supported, ['Accounts']);
      for (const scope of ['openid', 'offline_access', 'grant_management_query', 'grant_management_revoke'])
        t.ok((body.scopes_supported as string[]).includes(scope), scope);
      t.ok((body.grant_types_supported as string[]).includes('client_credentials'));
    },
  );

  t.test(
    'RFC 8705 3.4: tokens are certificate-bound only for a client registered so (default false)',
    async (t) => {
      const otherAgent = await strangerAgent(t, fixture.ca);
      const bound = (await consent(fixture, full)).tokens!;
      t.ok((await client.tokenIntrospection(full, bound.access_token)).cnf, 'registered true: cnf.x5t#S256');
      t.equal(
        (await read(fixture, otherAgent, bound.access_token, '/open-banking/accounts/v2/accounts')).status,
        401,
      );

      const { tls_client_certificate_bound_access_tokens: _bound, ...rest } = FULL_METADATA;
      const plain = await register(fixture, agent, fixture.ca.client, rest);
      const unbound = (await consent(fixture, plain)).tokens!;
      t.notOk((await client.tokenIntrospection(plain, unbound.access_token)).cnf, 'not registered: no cnf');
      t.equal(
        (await read(fixture, otherAgent, unbound.access_token, '/open-banking/accounts/v2/accounts')).status,
        200,
      );
    },
  );

  t.test(
    'RFC 9396 10.2: a RAR type the client did not register is invalid_authorization_details',
    async (t) => {
      const { authorization_details_types: _types, ...rest } = FULL_METADATA;
      const unregistered = await register(fixture, agent, fixture.ca.client, rest);
      t.equal(
        await parRefusal(unregistered, [{ type: 'Accounts', actions: ALL_ACTIONS }]),
        'invalid_authorization_details',
      );
      t.equal(
        await parRefusal(full, [{ type: 'Payments', actions: ['Pay'] }]),
        'invalid_authorization_details',
      );
      t.equal(await parRefusal(full, [{ type: 'Accounts', actions: ALL_ACTIONS }]), 'accepted');
    },
  );

  t.test(
    'Grant Management 6.1: a client_credentials token of the right scope, 401 without, 403 with the wrong one, 404 for another client',
    async (t) => {
      const tokens = (await consent(fixture, full)).tokens!;
      const grantId = String(tokens.grant_id);
      t.equal((await grantCall(fixture, agent, grantId, 'GET', null)).status, 401, 'no token');
      t.match(
        (await grantCall(fixture, agent, grantId, 'GET', null)).headers.get('www-authenticate'),
        /^Bearer/,
      );
      t.equal(
        (await grantCall(fixture, agent, grantId, 'GET', tokens.access_token)).status,
        401,
        'an authorization-code token is not one',
      );
      const queryOnly = await grantManagementToken(full, 'grant_management_query');
      t.equal(
        (await grantCall(fixture, agent, grantId, 'GET', queryOnly)).status,
        200,
        'query with grant_management_query',
      );
      const refused = await grantCall(fixture, agent, grantId, 'DELETE', queryOnly);
      t.equal(refused.status, 403, 'revoke needs grant_management_revoke');
      t.match(refused.headers.get('www-authenticate'), /insufficient_scope/);
      const revokeOnly = await grantManagementToken(full, 'grant_management_revoke');
      t.equal(
        (await grantCall(fixture, agent, grantId, 'GET', revokeOnly)).status,
        403,
        'query needs grant_management_query',
      );
      t.equal(
        (await grantCall(fixture, agent, 'no-such-grant', 'GET', queryOnly)).status,
        404,
        'unknown grant',
      );

      const someoneElse = await register(fixture, agent);
      const theirs = await grantManagementToken(someoneElse);
      t.equal(
        (await grantCall(fixture, agent, grantId, 'GET', theirs)).status,
        404,
        "another client's grant",
      );
      t.equal((await grantCall(fixture, agent, grantId, 'DELETE', theirs)).status, 404);
      t.equal(
        (await grantCall(fixture, agent, grantId, 'DELETE', revokeOnly)).status,
        204,
        'revoked by its client',
      );
    },
  );

  t.test(
    'Grant Management 6.1: no client_credentials token for a client not registered for the grant',
    async (t) => {
      const noCc = await register(fixture, agent, fixture.ca.client, {
        ...FULL_METADATA,
        grant_types: ['authorization_code', 'refresh_token'],
      });
      // oidc-provider refuses a grant type the client did not register (its word: invalid_request).
      const refusal = await grantManagementToken(noCc).then(
        () => 'issued',
        (error: { error?: string; error_description?: string }) =>
          `${error.error}: ${error.error_description}`,
      );
      t.match(refusal, /^invalid_request: requested grant type is not allowed/);
    },
  );

  t.test(
    'OIDC Core 11: a refresh token only with offline_access (prompt=consent) and the refresh_token grant',
    async (t) => {
      t.notOk(
        (await consent(fixture, full, { scope: 'openid' })).tokens!.refresh_token,
        'openid alone: none',
      );
      t.ok((await consent(fixture, full)).tokens!.refresh_token, 'offline_access with prompt=consent');
      const noRefresh = await register(fixture, agent, fixture.ca.client, {
        ...FULL_METADATA,
        grant_types: ['authorization_code', 'client_credentials'],
      });
      t.notOk(
        (await consent(fixture, noRefresh)).tokens!.refresh_token,
        'not registered for the grant: none',
      );
    },
  );

  t.test(
    'accounts 2.4.2: x-fapi-interaction-id and Authorization are required; a 400 carries an id of the bank',
    async (t) => {
      const tokens = (await consent(fixture, full)).tokens!;
      const response = await undiciFetch(`${fixture.bank.mtlsBase}/open-banking/accounts/v2/accounts`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      t.equal(response.status, 400, 'no interaction id');
      t.match(response.headers.get('x-fapi-interaction-id'), /^[0-9a-f-]{36}$/);
      t.equal(
        (await read(fixture, agent, null, '/open-banking/accounts/v2/accounts')).status,
        401,
        'no Authorization',
      );
      const echoed = await read(fixture, agent, tokens.access_token, '/open-banking/accounts/v2/accounts', {
        'x-fapi-interaction-id': 'd78fc4e5-37ca-4da3-adf2-9b082bf92280',
      });
      t.equal(echoed.headers.get('x-fapi-interaction-id'), 'd78fc4e5-37ca-4da3-adf2-9b082bf92280', 'echoed');
    },
  );

  t.test(
    'the files route and check parameters: a name the operation does not define is a 400, not an unfiltered answer',
    async (t) => {
      const tokens = (await consent(fixture, full)).tokens!;
      const readPath = (path: string) => read(fixture, agent, tokens.access_token, path);
      const accounts = await readPath('/open-banking/accounts/v2/accounts');
      const account = accounts.body.data[0].accountId;
      const cards = await readPath('/open-banking/credit-cards-accounts/v2/accounts');
      const card = cards.body.data[0].creditCardAccountId;
      const tx = `/open-banking/accounts/v2/accounts/${account}/transactions`;
      const cardTx = `/open-banking/credit-cards-accounts/v2/accounts/${card}/transactions`;
      t.equal(
        (await readPath(`${tx}?fromTransactionDate=${day(-30)}&toTransactionDate=${day(0)}`)).status,
        400,
        'card names on accounts',
      );
      t.equal(
        (await readPath(`${cardTx}?fromBookingDate=${day(-30)}&toBookingDate=${day(0)}`)).status,
        400,
        'account names on cards',
      );
      t.equal((await readPath(`${tx}?page-size=1001`)).status, 400, 'page-size above the maximum');
      t.equal(
        (await readPath(`${tx}?fromBookingDate=2026-13-01&toBookingDate=2026-12-01`)).status,
        400,
        'not a date',
      );
      t.equal((await readPath(`${tx}?fromBookingDate=${day(-3)}`)).status, 400, 'one date without the other');
      t.equal((await readPath(`/open-banking/accounts/v2/nothing`)).status, 404, 'no such operation');
      const cardWindow = await readPath(
        `${cardTx}?fromTransactionDate=${day(-60)}&toTransactionDate=${day(0)}`,
      );
      t.equal(cardWindow.status, 200, 'fromTransactionDate/toTransactionDate on cards');
      t.ok(cardWindow.body.data.length > 0);
    },
  );

  t.test(
    'accounts 2.4.2: missing dates mean today; a future toBookingDate reaches scheduled entries (LANCAMENTO_FUTURO)',
    async (t) => {
      const tokens = (await consent(fixture, full, { rut: '12.345.678-5' })).tokens!;
      const readPath = (path: string) => read(fixture, agent, tokens.access_token, path);
      const accounts = await readPath('/open-banking/accounts/v2/accounts');
      const checking = accounts.body.data.find(
        (a: { type: string }) => a.type === 'CONTA_DEPOSITO_A_VISTA',
      ).accountId;
      const tx = `/open-banking/accounts/v2/accounts/${checking}/transactions?page-size=1000`;
      const undated = await readPath(tx);
      const today = await readPath(`${tx}&fromBookingDate=${day(0)}&toBookingDate=${day(0)}`);
      t.equal(undated.status, 200);
      t.same(
        undated.body.data.map((e: { transactionId: string }) => e.transactionId),
        today.body.data.map((e: { transactionId: string }) => e.transactionId),
        'undated is today',
      );
      const ahead = await readPath(`${tx}&fromBookingDate=${day(1)}&toBookingDate=${day(40)}`);
      t.equal(ahead.status, 200);
      const scheduled = ahead.body.data.filter(
        (e: { completedAuthorisedPaymentType: string }) =>
          e.completedAuthorisedPaymentType === 'LANCAMENTO_FUTURO',
      );
      t.ok(scheduled.length > 0, 'scheduled entries in the next 40 days');
      t.equal(scheduled.length, ahead.body.data.length, 'every entry ahead is scheduled');
      const past = await readPath(`${tx}&fromBookingDate=${day(-40)}&toBookingDate=${day(-1)}`);
      t.notOk(
        past.body.data.some(
          (e: { completedAuthorisedPaymentType: string }) =>
            e.completedAuthorisedPaymentType === 'LANCAMENTO_FUTURO',
        ),
        'none in the past',
      );
    },
  );
});

t.test('the bank checks its own answers against the files: one that breaks them is a 500', async (t) => {
  const sandbox = sandboxCustomerData();
  const broken: CustomerData = {
    ...sandbox,
    // An id the file's pattern refuses.
    accounts: (customer, now) => sandbox.accounts(customer, now).map((a) => ({ ...a, id: `-${a.id} !` })),
  };
  const fixture = await startBank(t, 'sqlite', { data: broken });
  const agent = mtlsAgent(t, fixture.ca);
  const config = await register(fixture, agent);
  const tokens = (await consent(fixture, config)).tokens!;
  const answer = await read(fixture, agent, tokens.access_token, '/open-banking/accounts/v2/accounts');
  t.equal(answer.status, 500);
  t.match(answer.body.errors[0].detail, /accounts-2\.4\.2/);
});

t.test('refresh tokens as configured: never, and always (without offline_access)', async (t) => {
  for (const policy of ['never', 'always'] as const) {
    const fixture = await startBank(t, 'sqlite', { refreshTokens: policy });
    const agent = mtlsAgent(t, fixture.ca);
    const config = await register(fixture, agent);
    const asked = (await consent(fixture, config)).tokens!;
    const plain = (await consent(fixture, config, { scope: 'openid' })).tokens!;
    if (policy === 'never') {
      t.notOk(asked.refresh_token, 'never: not even with offline_access');
    } else {
      t.ok(plain.refresh_token, 'always: even without offline_access');
    }
  }
});

t.test(
  'the banks name themselves as the appliance lists them (the banks state their names; nothing imported)',
  async (t) => {
    const { findInstitution } = await import('../../src/banks/institutions.js');
    const { CHILE_BANK_NAME } = await import('../../src/consent-bank/pages.js');
    const { BRASIL_BANK_NAME } = await import('../../src/consent-bank/brasil/pages.js');
    t.equal(CHILE_BANK_NAME, findInstitution('bancoabierto')!.name);
    t.equal(BRASIL_BANK_NAME, findInstitution('bancoabierto-br')!.name);
  },
);
