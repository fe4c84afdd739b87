import * as client from 'openid-client';
import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { brasilValidator } from '../../src/open-finance/schemas.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import { forEachEngine } from '../helpers/harness.js';
import { mtlsAgent } from '../helpers/consent-bank.js';
import { authoriseBrasil, exchangeCode, registerBrasil, startBrasil } from '../helpers/brasil-bank.js';
import { BRASIL_PERMISSIONS } from '../helpers/consent-countries.js';

/*
 * The simulated Open Finance Brasil bank over real HTTP (the browser face on a stand-in appliance, the machine
 * face on its mTLS listener), on both engines: what a Brazilian client does, step by step, with openid-client,
 * and every answer checked against the official files.
 */

const validate = brasilValidator();
const PERMISSIONS = BRASIL_PERMISSIONS;
const CPF = '52998224725';

forEachEngine(t, async (t, engine) => {
  const { bank, ca } = await startBrasil(t, engine);
  const agent = mtlsAgent(t, ca);
  // A FAPI 1.0 Advanced client (test/helpers/brasil-bank.ts): signed request objects at PAR, JARM.
  const brasil = await registerBrasil(bank, ca, agent);
  const { config } = brasil;
  const call = async (
    path: string,
    init: { method?: string; token: string; body?: unknown; headers?: Record<string, string> },
  ) => {
    const response = await undiciFetch(`${bank.mtlsBase}${path}`, {
      dispatcher: agent,
      method: init.method ?? 'GET',
      headers: {
        authorization: `Bearer ${init.token}`,
        'x-fapi-interaction-id': crypto.randomUUID(),
        ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...init.headers,
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the files' schemas check the shape
      body: (text ? JSON.parse(text) : null) as any,
    };
  };
  const ccToken = async () =>
    (await client.clientCredentialsGrant(config, { scope: 'consents' })).access_token;
  const createConsent = async (cpf = CPF, permissions = PERMISSIONS) =>
    call('/open-banking/consents/v3/consents', {
      method: 'POST',
      token: await ccToken(),
      body: {
        data: {
          loggedUser: { document: { identification: cpf, rel: 'CPF' } },
          permissions,
          expirationDateTime: new Date(Date.now() + 90 * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
        },
      },
    });
  const authorise = (
    consentId: string,
    options: { cpf?: string; decision?: 'confirm' | 'abort'; scopes?: string } = {},
  ) => authoriseBrasil(brasil, consentId, options);

  /** The OAuth error the (JARM) callback carries, as openid-client reads it after checking its signature. */
  const refusal = async (trip: { callback: URL; verifier: string; state: string }) => {
    try {
      await client.authorizationCodeGrant(config, trip.callback, {
        pkceCodeVerifier: trip.verifier,
        expectedState: trip.state,
      });
      return 'no error';
    } catch (error) {
      return error instanceof client.AuthorizationResponseError ? error.error : String(error);
    }
  };

  t.test('discovery: FAPI 1.0 with PAR, JARM, PS256 and the mTLS aliases', async (t) => {
    const response = await fetch(`${bank.issuer}/.well-known/openid-configuration`);
    const body = (await response.json()) as Record<string, unknown>;
    t.equal(body.require_pushed_authorization_requests, true);
    t.ok((body.response_modes_supported as string[]).includes('jwt'));
    t.ok((body.grant_types_supported as string[]).includes('client_credentials'));
    t.same(body.authorization_signing_alg_values_supported, ['PS256']);
    t.same(body.id_token_signing_alg_values_supported, ['PS256']);
    t.ok((body.token_endpoint_auth_methods_supported as string[]).includes('tls_client_auth'));
    t.ok((body.token_endpoint_auth_methods_supported as string[]).includes('private_key_jwt'));
    t.equal(body.tls_client_certificate_bound_access_tokens, true);
    t.equal(body.token_endpoint, `${bank.mtlsBase}/token`);
  });

  t.test(
    'a consent: created, authorised with consent:<id>, JARM, data in BRL with pagination-key, revoked',
    async (t) => {
      const created = await createConsent();
      t.equal(created.status, 201, JSON.stringify(created.body));
      t.ok(validate('consents-3.3.1', 'ResponseConsent')(created.body));
      t.equal(created.body.data.status, 'AWAITING_AUTHORISATION');
      t.match(created.body.data.consentId, /^urn:bancoabierto-br:/);
      const consentId: string = created.body.data.consentId;

      const trip = await authorise(consentId);
      t.match(trip.pages[0], /Entre no seu banco/);
      t.match(trip.pages[1], /Autorize o compartilhamento/);
      t.match(trip.pages[1], /529\.982\.247-25/);
      t.ok(trip.callback.searchParams.get('response'), 'the answer is a JARM JWT');
      t.notOk(trip.callback.searchParams.get('code'), 'no bare code in the URL');
      const tokens = await exchangeCode(brasil, trip);
      t.match(tokens.scope, new RegExp(`consent:${consentId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      t.ok(tokens.refresh_token);
      t.ok(tokens.expires_in! <= 900);

      const read = await call(`/open-banking/consents/v3/consents/${consentId}`, { token: await ccToken() });
      t.equal(read.body.data.status, 'AUTHORISED');
      t.ok(validate('consents-3.3.1', 'ResponseConsentRead')(read.body));

      const resources = await call('/open-banking/resources/v3/resources', { token: tokens.access_token });
      t.equal(resources.status, 200);
      const resourcesOk = validate('resources-3.1.0', 'ResponseResourceList');
      t.ok(resourcesOk(resources.body), JSON.stringify(resourcesOk.errors));
      t.ok(resources.body.data.some((r: { type: string }) => r.type === 'ACCOUNT'));
      t.ok(resources.body.data.some((r: { type: string }) => r.type === 'CREDIT_CARD_ACCOUNT'));

      const list = await call('/open-banking/accounts/v2/accounts', { token: tokens.access_token });
      const listOk = validate('accounts-2.4.2', 'ResponseAccountList');
      t.ok(listOk(list.body), JSON.stringify(listOk.errors));
      t.match(list.body.data[0].companyCnpj, /^\d{14}$/);
      const accountId = list.body.data[0].accountId;
      const balances = await call(`/open-banking/accounts/v2/accounts/${accountId}/balances`, {
        token: tokens.access_token,
      });
      t.ok(validate('accounts-2.4.2', 'ResponseAccountBalances')(balances.body));
      t.equal(balances.body.data.availableAmount.currency, 'BRL');
      t.match(balances.body.data.availableAmount.amount, /^-?\d+\.\d{2}$/);

      // A missing date is today (accounts 2.4.2): a page of history names its window.
      const from = new Date(Date.now() - 60 * 86_400_000).toISOString().slice(0, 10);
      const to = new Date().toISOString().slice(0, 10);
      const page1 = await call(
        `/open-banking/accounts/v2/accounts/${accountId}/transactions?page-size=5&fromBookingDate=${from}&toBookingDate=${to}`,
        { token: tokens.access_token },
      );
      const txOk = validate('accounts-2.4.2', 'ResponseAccountTransactions');
      t.ok(txOk(page1.body), JSON.stringify(txOk.errors));
      const next = new URL(page1.body.links.next);
      const key = next.searchParams.get('pagination-key');
      t.ok(key, 'the next page carries a pagination-key');
      const page2 = await call(
        `${next.pathname.slice(new URL(bank.mtlsBase).pathname.length)}${next.search}`,
        {
          token: tokens.access_token,
        },
      );
      t.equal(page2.status, 200);
      t.ok(txOk(page2.body));
      t.notSame(page2.body.data[0].transactionId, page1.body.data[0].transactionId);
      const forged = await call(
        `/open-banking/accounts/v2/accounts/${accountId}/transactions?page=2&page-size=5&fromBookingDate=${from}&toBookingDate=${to}&pagination-key=abc.${'x'.repeat(22)}`,
        { token: tokens.access_token },
      );
      t.equal(forged.status, 422, 'a pagination-key the bank did not give is refused');
      t.ok(validate('accounts-2.4.2', 'ResponseError')(forged.body));

      const cards = await call('/open-banking/credit-cards-accounts/v2/accounts', {
        token: tokens.access_token,
      });
      const cardsOk = validate('credit-cards-2.3.1', 'ResponseCreditCardAccountsList');
      t.ok(cardsOk(cards.body), JSON.stringify(cardsOk.errors));
      const cardId = cards.body.data[0].creditCardAccountId;
      const cardTx = await call(
        `/open-banking/credit-cards-accounts/v2/accounts/${cardId}/transactions?fromTransactionDate=${from}&toTransactionDate=${to}`,
        { token: tokens.access_token },
      );
      const cardTxOk = validate('credit-cards-2.3.1', 'ResponseCreditCardAccountsTransactions');
      t.ok(cardTxOk(cardTx.body), JSON.stringify(cardTxOk.errors));
      t.equal(cardTx.body.data[0].brazilianAmount.currency, 'BRL');

      // Extension: with the consent's own token, to a later end.
      const later = new Date(Date.now() + 200 * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const extended = await call(`/open-banking/consents/v3/consents/${consentId}/extends`, {
        method: 'POST',
        token: tokens.access_token,
        headers: { 'x-fapi-customer-ip-address': '127.0.0.1', 'x-customer-user-agent': 'tap' },
        body: {
          data: { expirationDateTime: later, loggedUser: { document: { identification: CPF, rel: 'CPF' } } },
        },
      });
      t.equal(extended.status, 201, JSON.stringify(extended.body));
      t.ok(validate('consents-3.3.1', 'ResponseConsentExtensions')(extended.body));
      t.equal(extended.body.data.expirationDateTime, later);
      const history = await call(`/open-banking/consents/v3/consents/${consentId}/extensions`, {
        token: tokens.access_token,
      });
      const historyOk = validate('consents-3.3.1', 'ResponseConsentReadExtensions');
      t.ok(historyOk(history.body), JSON.stringify(historyOk.errors));
      t.equal(history.body.data.length, 1);

      const deleted = await call(`/open-banking/consents/v3/consents/${consentId}`, {
        method: 'DELETE',
        token: await ccToken(),
      });
      t.equal(deleted.status, 204);
      const after = await call('/open-banking/accounts/v2/accounts', { token: tokens.access_token });
      t.equal(after.status, 401, 'the token stops with its consent');
      const gone = await call(`/open-banking/consents/v3/consents/${consentId}`, { token: await ccToken() });
      t.equal(gone.body.data.status, 'REJECTED');
      t.same(gone.body.data.rejection, { rejectedBy: 'TPP', reason: { code: 'CUSTOMER_MANUALLY_REVOKED' } });
      const again = await call(`/open-banking/consents/v3/consents/${consentId}`, {
        method: 'DELETE',
        token: await ccToken(),
      });
      t.equal(again.status, 422, 'deleting a rejected consent is 422, as the file says');
    },
  );

  t.test(
    'never authorised, deleted by the client (an abandoned trip): 204, then REJECTED by the TPP',
    async (t) => {
      // consents-3.3.1.yml, `consentsDeleteConsentsConsentId` ("Pedido de revogação do consentimento"): 204
      // `204ConsentsConsentIdDeleted`; a consent already REJECTED answers 422 (the file's info, and
      // `UnprocessableEntityDelete`'s CONSENTIMENTO_EM_STATUS_REJEITADO).
      const created = await createConsent();
      const consentId: string = created.body.data.consentId;
      const deleted = await call(`/open-banking/consents/v3/consents/${consentId}`, {
        method: 'DELETE',
        token: await ccToken(),
      });
      t.equal(deleted.status, 204);
      t.equal(deleted.body, null, 'no body');
      const read = await call(`/open-banking/consents/v3/consents/${consentId}`, { token: await ccToken() });
      const readOk = validate('consents-3.3.1', 'ResponseConsentRead');
      t.ok(readOk(read.body), JSON.stringify(readOk.errors));
      t.equal(read.body.data.status, 'REJECTED');
      t.same(read.body.data.rejection, { rejectedBy: 'TPP', reason: { code: 'CUSTOMER_MANUALLY_REJECTED' } });
      const again = await call(`/open-banking/consents/v3/consents/${consentId}`, {
        method: 'DELETE',
        token: await ccToken(),
      });
      t.equal(again.status, 422);
      const againOk = validate('consents-3.3.1', 'ResponseErrorUnprocessableEntityDelete');
      t.ok(againOk(again.body), JSON.stringify(againOk.errors));
      t.equal(again.body.errors[0].code, 'CONSENTIMENTO_EM_STATUS_REJEITADO');
    },
  );

  t.test(
    'refused at the bank: the consent is REJECTED by the user, and the callback says access_denied',
    async (t) => {
      const created = await createConsent();
      const consentId: string = created.body.data.consentId;
      const trip = await authorise(consentId, { decision: 'abort' });
      t.equal(await refusal(trip), 'access_denied');
      const read = await call(`/open-banking/consents/v3/consents/${consentId}`, { token: await ccToken() });
      t.equal(read.body.data.status, 'REJECTED');
      t.same(read.body.data.rejection, {
        rejectedBy: 'USER',
        reason: { code: 'CUSTOMER_MANUALLY_REJECTED' },
      });
    },
  );

  t.test(
    "customers 2.2.1: a person's identification, behind CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ and the scope customers",
    async (t) => {
      const IDENTIFICATION = 'CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ';
      const lone = await createConsent(CPF, [IDENTIFICATION]);
      t.equal(lone.status, 400, 'consents 3.3.1: the group "Dados Cadastrais PF" goes with RESOURCES_READ');
      const created = await createConsent(CPF, [IDENTIFICATION, ...PERMISSIONS]);
      t.equal(created.status, 201, JSON.stringify(created.body));
      t.ok(created.body.data.permissions.includes(IDENTIFICATION), 'the bank serves the permission');
      const consentId: string = created.body.data.consentId;
      const trip = await authorise(consentId, {
        scopes: 'customers accounts credit-cards-accounts resources',
      });
      t.match(
        trip.pages[1],
        /<ul><li data-group="identification">Seus dados cadastrais: nome, documentos, data de nascimento e contatos<\/li>/,
        'the consent page lists the identification first',
      );
      const tokens = await exchangeCode(brasil, trip);
      const path = '/open-banking/customers/v2/personal/identifications';
      const read = await call(path, { token: tokens.access_token });
      t.equal(read.status, 200, JSON.stringify(read.body));
      t.equal(read.headers.get('x-v'), '2.2.1');
      t.match(read.headers.get('x-fapi-interaction-id'), /^[0-9a-f-]{36}$/);
      const [record] = read.body.data;
      // PersonalIdentificationData's required members (customers 2.2.1), and the name the bank has on file.
      for (const member of [
        'updateDateTime',
        'personalId',
        'brandName',
        'civilName',
        'birthDate',
        'documents',
        'hasBrazilianNationality',
        'contacts',
        'companiesCnpj',
      ])
        t.ok(member in record, `${member} is there`);
      t.match(record, {
        civilName: sandboxCustomerData().name('11111111-1'),
        documents: { cpfNumber: CPF },
        birthDate: /^\d{4}-\d{2}-\d{2}$/,
        companiesCnpj: [/^\d{14}$/],
        contacts: { postalAddresses: [], phones: [], emails: [] },
      });
      t.ok(read.body.links.self.endsWith(path) && read.body.meta.requestDateTime, 'links and meta');
      const noId = await call(path, {
        token: tokens.access_token,
        headers: { 'x-fapi-interaction-id': 'x' },
      });
      t.equal(noId.status, 400, 'x-fapi-interaction-id must be a UUID');

      // The scope without the permission, and the permission without the scope: 403 either way.
      const plain = await createConsent(CPF, PERMISSIONS);
      const plainTrip = await authorise(plain.body.data.consentId, {
        scopes: 'customers accounts credit-cards-accounts resources',
      });
      t.notMatch(plainTrip.pages[1], /dados cadastrais/, 'a consent without it does not list it');
      const plainTokens = await exchangeCode(brasil, plainTrip);
      t.equal((await call(path, { token: plainTokens.access_token })).status, 403, 'no permission: 403');
      const unscoped = await createConsent(CPF, [IDENTIFICATION, ...PERMISSIONS]);
      const unscopedTrip = await authorise(unscoped.body.data.consentId);
      const unscopedTokens = await exchangeCode(brasil, unscopedTrip);
      t.equal((await call(path, { token: unscopedTokens.access_token })).status, 403, 'no scope: 403');
    },
  );

  t.test('signed in as another customer than the consent names: rejected', async (t) => {
    const created = await createConsent('11144477735');
    const trip = await authorise(created.body.data.consentId);
    t.equal(trip.callback.searchParams.has('response'), true);
    t.equal(await refusal(trip), 'access_denied');
    const record = await bank.consent(created.body.data.consentId);
    t.equal(record?.status, 'REJECTED');
  });

  t.test(
    'bad consent requests: the file’s shape, a CPF, whole groups, a token of the right kind',
    async (t) => {
      const token = await ccToken();
      const post = (body: unknown, bearer = token) =>
        call('/open-banking/consents/v3/consents', { method: 'POST', token: bearer, body });
      const noUser = await post({ data: { permissions: PERMISSIONS } });
      t.equal(noUser.status, 400);
      t.match(noUser.body.errors[0].detail, /loggedUser/);
      t.ok(validate('consents-3.3.1', 'ResponseError')(noUser.body));
      const badCpf = await post({
        data: {
          permissions: PERMISSIONS,
          loggedUser: { document: { identification: '12345678900', rel: 'CPF' } },
        },
      });
      t.equal(badCpf.status, 400);
      t.match(badCpf.body.errors[0].detail, /CPF/);
      const partial = await post({
        data: {
          permissions: ['ACCOUNTS_BALANCES_READ'],
          loggedUser: { document: { identification: CPF, rel: 'CPF' } },
        },
      });
      t.equal(partial.status, 400);
      const unserved = await post({
        data: {
          permissions: ['LOANS_READ', 'RESOURCES_READ'],
          loggedUser: { document: { identification: CPF, rel: 'CPF' } },
        },
      });
      t.equal(unserved.status, 422);
      const created = await createConsent();
      const trip = await authorise(created.body.data.consentId);
      const tokens = await exchangeCode(brasil, trip);
      const wrongKind = await post(
        { data: { permissions: PERMISSIONS, loggedUser: { document: { identification: CPF, rel: 'CPF' } } } },
        tokens.access_token,
      );
      t.equal(wrongKind.status, 401, 'a consent is created with a client_credentials token only');
    },
  );

  t.test('a tampered JARM answer is refused by the client', async (t) => {
    const created = await createConsent();
    const trip = await authorise(created.body.data.consentId);
    const jwt = trip.callback.searchParams.get('response')!;
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    claims.iss = 'https://evil.example';
    const forged = new URL(trip.callback);
    forged.searchParams.set(
      'response',
      `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`,
    );
    await t.rejects(
      client.authorizationCodeGrant(config, forged, {
        pkceCodeVerifier: trip.verifier,
        expectedState: trip.state,
      }),
    );
  });
});
