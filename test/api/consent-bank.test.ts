import t from 'tap';
import * as client from 'openid-client';
import { fetch as undiciFetch } from 'undici';
import { openFinanceValidator } from '../../src/open-finance/schemas.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import { forEachEngine } from '../helpers/harness.js';
import {
  ALL_ACTIONS,
  consent,
  fetchWith,
  grantCall,
  grantManagementToken,
  mtlsAgent,
  register,
  startBank,
} from '../helpers/consent-bank.js';

const validate = openFinanceValidator();

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const agent = mtlsAgent(t, fixture.ca);

  t.test('discovery names the FAPI 2.0 profile and the mTLS aliases', async (t) => {
    const response = await fetch(`${fixture.bank.issuer}/.well-known/openid-configuration`);
    t.equal(response.status, 200);
    const body = (await response.json()) as Record<string, unknown>;
    t.equal(body.issuer, fixture.bank.issuer);
    t.equal(body.require_pushed_authorization_requests, true);
    t.equal(body.pushed_authorization_request_endpoint, `${fixture.bank.mtlsBase}/par`);
    t.same(body.mtls_endpoint_aliases, {
      token_endpoint: `${fixture.bank.mtlsBase}/token`,
      pushed_authorization_request_endpoint: `${fixture.bank.mtlsBase}/par`,
      registration_endpoint: `${fixture.bank.mtlsBase}/reg`,
      grant_management_endpoint: `${fixture.bank.mtlsBase}/grants`,
      introspection_endpoint: `${fixture.bank.mtlsBase}/token/introspection`,
    });
    t.same(body.grant_management_actions_supported, ['create', 'query', 'revoke']);
    t.same(body.authorization_details_types_supported, ['Accounts']);
    t.equal(body.tls_client_certificate_bound_access_tokens, true);
    t.same(body.token_endpoint_auth_methods_supported, ['tls_client_auth']);
    t.same(body.code_challenge_methods_supported, ['S256']);
    t.equal(body.authorization_response_iss_parameter_supported, true);
    t.equal(body.authorization_endpoint, `${fixture.bank.issuer}/auth`);
  });

  t.test(
    "the customer's name in the ID token when the claims parameter asks for it (OpenID Connect Core §5.1, §5.5)",
    async (t) => {
      const config = await register(fixture, agent);
      const expected = sandboxCustomerData().name('11111111-1');
      const asked = await consent(fixture, config, { claims: JSON.stringify({ id_token: { name: null } }) });
      t.match(
        asked.pages[1],
        /<ul><li data-covers="name">Tu nombre, como lo tiene registrado el banco<\/li><li data-covers="accounts">/,
        'the consent page lists the name first',
      );
      t.equal(asked.tokens!.claims()?.name, expected, 'the ID token names the customer');
      const refreshed = await client.refreshTokenGrant(config, asked.tokens!.refresh_token!);
      t.equal(refreshed.claims()?.name, expected, "and so does a refresh's (§12.2)");
      const plain = await consent(fixture, config);
      t.notMatch(plain.pages[1], /data-covers="name"/, 'not asked: not listed');
      t.equal(plain.tokens!.claims()?.name, undefined, 'nor given');
      const response = await fetch(`${fixture.bank.issuer}/.well-known/openid-configuration`);
      t.equal(((await response.json()) as Record<string, unknown>).claims_parameter_supported, true);
    },
  );

  t.test('a client registers, gets consent, and reads accounts that match the schemas', async (t) => {
    const config = await register(fixture, agent);
    const result = await consent(fixture, config);
    t.match(result.pages[0], /Ingresa a tu banco/);
    t.match(result.pages[1], /Autoriza el acceso/);
    const tokens = result.tokens!;
    t.ok(tokens.access_token);
    t.ok(tokens.refresh_token, 'a refresh token');
    t.type(tokens.grant_id, 'string');
    t.same(tokens.authorization_details, [{ type: 'Accounts', actions: ALL_ACTIONS }]);
    t.ok(tokens.expires_in! <= 600);

    const get = async (path: string) => {
      const response = await client.fetchProtectedResource(
        config,
        tokens.access_token,
        new URL(`${fixture.bank.mtlsBase}${path}`),
        'GET',
        null,
        // Every call carries an interaction id (the files require the header).
        new Headers({ 'x-fapi-interaction-id': crypto.randomUUID() }),
      );
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the schemas check the shape
      return { response, body: (await response.json()) as Record<string, any> };
    };
    const list = await get('/open-banking/accounts/v2/accounts');
    t.equal(list.response.status, 200);
    t.ok(list.response.headers.get('x-fapi-interaction-id'));
    const ok = validate('accounts-2.4.2', 'ResponseAccountList');
    t.ok(ok(list.body), JSON.stringify(ok.errors));
    const accountId = list.body.data[0].accountId;
    const one = await get(`/open-banking/accounts/v2/accounts/${accountId}`);
    const identification = validate('accounts-2.4.2', 'ResponseAccountIdentification');
    t.ok(identification(one.body), JSON.stringify(identification.errors));
    const balances = await get(`/open-banking/accounts/v2/accounts/${accountId}/balances`);
    const balancesOk = validate('accounts-2.4.2', 'ResponseAccountBalances');
    t.ok(balancesOk(balances.body), JSON.stringify(balancesOk.errors));
    t.equal(balances.body.data.availableAmount.currency, 'CLP');
    // A missing date is today (accounts 2.4.2): a page of history names its window.
    const from = new Date(Date.now() - 60 * 86_400_000).toISOString().slice(0, 10);
    const to = new Date().toISOString().slice(0, 10);
    const page1 = await get(
      `/open-banking/accounts/v2/accounts/${accountId}/transactions?page-size=10&fromBookingDate=${from}&toBookingDate=${to}`,
    );
    const transactionsOk = validate('accounts-2.4.2', 'ResponseAccountTransactions');
    t.ok(transactionsOk(page1.body), JSON.stringify(transactionsOk.errors));
    t.equal(page1.body.data.length, 10);
    t.ok(page1.body.links.next, 'a next page');
    const cards = await get('/open-banking/credit-cards-accounts/v2/accounts');
    const cardsOk = validate('credit-cards-2.3.1', 'ResponseCreditCardAccountsList');
    t.ok(cardsOk(cards.body), JSON.stringify(cardsOk.errors));
    const cardId = cards.body.data[0].creditCardAccountId;
    const cardTx = await get(
      `/open-banking/credit-cards-accounts/v2/accounts/${cardId}/transactions?fromTransactionDate=${from}&toTransactionDate=${to}`,
    );
    t.ok(cardTx.body.data.length > 0, 'card entries in the window');
    const cardTxOk = validate('credit-cards-2.3.1', 'ResponseCreditCardAccountsTransactions');
    t.ok(cardTxOk(cardTx.body), JSON.stringify(cardTxOk.errors));

    // Grant Management (a client_credentials token, draft 6.1): query, revoke, and the token stops at once.
    const grantId = String(tokens.grant_id);
    const gm = await grantManagementToken(config);
    const query = await grantCall(fixture, agent, grantId, 'GET', gm);
    t.equal(query.status, 200);
    const grant = (await query.json()) as Record<string, unknown>;
    t.equal(grant.status, 'Authorised');
    t.same(grant.authorization_details, [{ type: 'Accounts', actions: ALL_ACTIONS }]);
    t.equal((await grantCall(fixture, agent, grantId, 'DELETE', gm)).status, 204);
    const after = await undiciFetch(`${fixture.bank.mtlsBase}/open-banking/accounts/v2/accounts`, {
      dispatcher: agent,
      headers: {
        authorization: `Bearer ${tokens.access_token}`,
        'x-fapi-interaction-id': crypto.randomUUID(),
      },
    });
    t.equal(after.status, 401, 'the token stopped with its grant');
    t.match(after.headers.get('www-authenticate'), /invalid_token/);
    const revoked = (await (await grantCall(fixture, agent, grantId, 'GET', gm)).json()) as Record<
      string,
      unknown
    >;
    t.equal(revoked.status, 'Revoked');
    await t.rejects(client.refreshTokenGrant(config, tokens.refresh_token!), 'the refresh token went too');
  });

  void fetchWith;
});
