import t from 'tap';
import * as client from 'openid-client';
import { bankWordsOf, describeBankWords, safeWords } from '../../src/banks/consent/bank-answers.js';
import { transactionFilters, SCHEDULED_HORIZON_DAYS } from '../../src/banks/consent/consent-connector.js';
import { queryGrant, revokeGrant } from '../../src/banks/consent/grant-management.js';
import { registrationGaps } from '../../src/banks/consent/register.js';
import type { ConsentClient } from '../../src/banks/consent/profile.js';
import { brasil } from '../../src/banks/consent/profiles/brasil.js';
import { chile } from '../../src/banks/consent/profiles/chile.js';
import { profileOf } from '../../src/banks/consent/profiles/index.js';
import { offlineScope, outlivesAccessToken } from '../../src/banks/consent/profiles/trip.js';
import type { ConsentClientRow } from '../../src/banks/consent/registrations.js';

/*
 * The country profiles (src/banks/consent/profiles/) read against the standards' own texts, each test naming
 * the section it follows. The bank is a recorded fetch at the boundary: what the appliance sends is what is
 * asserted, not what a simulated bank of ours accepts.
 */

t.test('every profile registers what the standards make the client ask for', async (t) => {
  for (const profile of [chile, brasil]) {
    const metadata = profile.registrationMetadata;
    t.equal(
      metadata.tls_client_certificate_bound_access_tokens,
      true,
      `${profile.security}: RFC 8705 §3.4, bound tokens are asked for (the default is false)`,
    );
    t.ok(
      (metadata.grant_types as string[]).includes('client_credentials'),
      `${profile.security}: client_credentials is registered (Grant Management §6.1 / consents API)`,
    );
  }
  t.same(
    chile.registrationMetadata.authorization_details_types,
    ['Accounts'],
    'RFC 9396 §10.2: the RAR type the PAR sends is registered',
  );
  t.equal(profileOf('fapi2-cl'), chile);
  t.equal(profileOf('fapi1-br'), brasil);
});

t.test(
  'what the bank registered short of what was asked is named with its section (RFC 7591 §3.2.1)',
  async (t) => {
    const asked = chile.registrationMetadata;
    t.same(registrationGaps(asked, { ...asked }), [], 'all granted');
    const gaps = registrationGaps(asked, {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      tls_client_certificate_bound_access_tokens: false,
    });
    t.same(gaps, [
      'the bank registered grant_types without "client_credentials" (Grant Management §6.1 and the consents API need client_credentials)',
      'the bank registered tls_client_certificate_bound_access_tokens without true (certificate-bound tokens, RFC 8705 §3.4)',
      'the bank registered authorization_details_types without "Accounts" (RAR types, RFC 9396 §10.2)',
    ]);
  },
);

t.test('the countries differ where their rules do, and only there', async (t) => {
  t.equal(chile.zone, 'America/Santiago');
  t.equal(brasil.zone, 'America/Sao_Paulo');
  t.equal(chile.resourcesFirst, false);
  t.equal(brasil.resourcesFirst, true, 'resources 3.1.0 is read first in Brazil');
  t.equal(brasil.asksHolderIds, true);
  t.same(chile.holderIds({}, 'individual', 'Banco'), { cpf: null, cnpj: null });
});

const DAY = 86_400_000;

t.test('transaction filters use each file’s own parameter names, in the bank’s calendar days', async (t) => {
  // 2026-11-29 02:30 UTC is still the 28th in Brasília (UTC-3) and in Santiago (UTC-3 in summer).
  const now = Date.UTC(2026, 10, 29, 2, 30);
  const window = { from: now - 90 * DAY, to: now };
  const card = transactionFilters('card', window, 'America/Sao_Paulo', now);
  t.same(
    Object.keys(card).sort(),
    ['fromTransactionDate', 'toTransactionDate'],
    'credit-cards 2.3.1 /accounts/{id}/transactions: fromTransactionDate / toTransactionDate',
  );
  t.equal(card.toTransactionDate, '2026-11-28', 'the day in Brasília, not the UTC day');
  t.equal(card.fromTransactionDate, '2026-08-30');
  const account = transactionFilters('account', window, 'America/Sao_Paulo', now);
  t.same(Object.keys(account).sort(), ['fromBookingDate', 'toBookingDate'], 'accounts 2.4.2: *BookingDate');
  t.equal(
    account.toBookingDate,
    new Date(now - 3 * 3_600_000 + SCHEDULED_HORIZON_DAYS * DAY).toISOString().slice(0, 10),
    'a window ending now reaches ahead for scheduled entries (LANCAMENTO_FUTURO)',
  );
  const backfill = transactionFilters(
    'account',
    { from: now - 200 * DAY, to: now - 90 * DAY },
    'America/Santiago',
    now,
  );
  t.equal(backfill.toBookingDate, '2026-08-30', 'a backfill window ends where it ends');
});

const configurationWith = (metadata: Partial<client.ServerMetadata>) =>
  new client.Configuration(
    { issuer: 'https://bank.example', token_endpoint: 'https://bank.example/token', ...metadata },
    'client-1',
    {},
    client.TlsClientAuth(),
  );

t.test('offline_access is asked where discovery lists it (OpenID Connect Core §11)', async (t) => {
  t.same(offlineScope(configurationWith({ scopes_supported: ['openid', 'offline_access'] })), {
    scope: 'openid offline_access',
    prompt: 'consent',
  });
  t.same(offlineScope(configurationWith({ scopes_supported: ['openid'] })), { scope: 'openid' });
  t.same(offlineScope(configurationWith({})), { scope: 'openid' });
});

t.test('a grant whose tokens die with the access token is not one to link', async (t) => {
  const now = Date.UTC(2026, 10, 29);
  const year = now + 365 * DAY;
  const tokens = (extra: object) => ({ access_token: 'a', token_type: 'bearer' as const, ...extra });
  t.equal(outlivesAccessToken(tokens({ expires_in: 600, refresh_token: 'r' }), year, now), true);
  t.equal(outlivesAccessToken(tokens({ expires_in: 600 }), year, now), false, 'no refresh token, 10 minutes');
  t.equal(outlivesAccessToken(tokens({ expires_in: 400 * 86_400 }), year, now), true, 'outlives the consent');
  t.equal(outlivesAccessToken(tokens({}), year, now), true, 'no expires_in: the bank did not say it ends');
});

t.test('the bank’s own words are kept, without anything shaped like a secret', async (t) => {
  const words = bankWordsOf(400, {
    error: 'invalid_authorization_details',
    error_description:
      'type Accounts not registered for client\u202e eyJhbGciOiJQUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln',
  });
  t.equal(words.error, 'invalid_authorization_details');
  t.notMatch(words.description!, /eyJ/, 'a JWT the bank echoes is masked');
  t.notMatch(words.description!, /\u202e/, 'no bidi control');
  t.equal(
    describeBankWords(words),
    'HTTP 400 invalid_authorization_details: type Accounts not registered for client …',
  );
  t.same(bankWordsOf(422, { errors: [{ code: 'PARAMETRO_INVALIDO', title: 't', detail: 'cpf inválido' }] }), {
    status: 422,
    error: 'PARAMETRO_INVALIDO',
    description: 'cpf inválido',
  });
  t.equal(bankWordsOf(500, '<html>').error, null);
  t.equal(safeWords('x'.repeat(500)).length <= 200, true);
});

/** A bank at the boundary: records every request, answers from `route`. */
function recordingBank(route: (method: string, url: URL, headers: Headers, body: string) => Response) {
  const calls: { method: string; url: URL; headers: Headers; body: string }[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const headers = new Headers(init?.headers);
    const body = typeof init?.body === 'string' ? init.body : init?.body ? String(init.body) : '';
    calls.push({ method: init?.method ?? 'GET', url, headers, body });
    return route(init?.method ?? 'GET', url, headers, body);
  };
  const configuration = configurationWith({
    grant_management_endpoint: 'https://bank.example/grants',
  });
  configuration[client.customFetch] = fetch as client.CustomFetch;
  const bank: ConsentClient = {
    registration: { id: 'cc_1', client_id: 'client-1' } as ConsentClientRow,
    configuration,
    fetch: fetch as ConsentClient['fetch'],
    apiBase: 'https://bank.example/api',
    profile: chile,
    signingKey: null,
    responseShape: 'query',
  };
  return { bank, calls };
}

const json = (status: number, body: unknown) =>
  new Response(body === null ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json' },
  });

t.test('Grant Management calls carry a client_credentials token of the draft’s scope (§6.1)', async (t) => {
  let issued = 0;
  const { bank, calls } = recordingBank((method, url, headers, body) => {
    if (url.pathname === '/token') {
      issued += 1;
      const scope = new URLSearchParams(body).get('scope');
      return json(200, { access_token: `tok-${scope}-${issued}`, token_type: 'Bearer', expires_in: 300 });
    }
    const scope = method === 'DELETE' ? 'grant_management_revoke' : 'grant_management_query';
    if (!headers.get('authorization')?.startsWith(`Bearer tok-${scope}-`)) return json(401, null);
    if (url.pathname === '/grants/gone') return json(404, null);
    return method === 'DELETE' ? new Response(null, { status: 204 }) : json(200, { scopes: [] });
  });
  t.same(await queryGrant(bank, 'g1'), { kind: 'authorised' });
  t.same(await queryGrant(bank, 'g2'), { kind: 'authorised' });
  t.equal(issued, 1, 'the query token is kept until near its expiry, not asked per call');
  t.same(await revokeGrant(bank, 'g1', Date.now()), { kind: 'revoked' });
  t.equal(issued, 2, 'revoking takes a token of its own scope');
  const tokenCalls = calls.filter((c) => c.url.pathname === '/token');
  t.same(
    tokenCalls.map((c) => Object.fromEntries(new URLSearchParams(c.body))),
    [
      { scope: 'grant_management_query', grant_type: 'client_credentials', client_id: 'client-1' },
      { scope: 'grant_management_revoke', grant_type: 'client_credentials', client_id: 'client-1' },
    ],
  );
  t.same(
    await queryGrant(bank, 'gone'),
    { kind: 'ended', status: 'not found' },
    '§6.4: 404, whatever the body',
  );
  t.same(await revokeGrant(bank, 'gone', Date.now()), { kind: 'gone' }, 'a revoke answered 404 is done');
});

t.test('a Grant Management token the bank no longer honours is dropped and asked again once', async (t) => {
  let issued = 0;
  let honoured = '';
  const { bank } = recordingBank((method, url) => {
    if (url.pathname === '/token') {
      issued += 1;
      return json(200, { access_token: `tok-${issued}`, token_type: 'Bearer', expires_in: 300 });
    }
    return honoured === '' ? json(401, { error: 'invalid_token' }) : json(200, {});
  });
  const refused = await queryGrant(bank, 'g1');
  t.equal(issued, 2, 'a 401 drops the token and asks for one new one, no more');
  t.match(refused, { kind: 'unknown', reason: /HTTP 401 invalid_token/ }, "the bank's words are kept");
  honoured = 'yes';
  t.same(await queryGrant(bank, 'g1'), { kind: 'authorised' });
});

t.test('Brazil: a token answer without scope still names the trip’s consent (RFC 6749 §5.1)', async (t) => {
  const { bank } = recordingBank((method, url) => {
    if (url.pathname === '/token')
      return json(200, { access_token: 'cc', token_type: 'Bearer', expires_in: 300 });
    return json(200, {
      data: {
        consentId: 'urn:bank:c1',
        status: 'AUTHORISED',
        permissions: ['ACCOUNTS_READ', 'RESOURCES_READ'],
        expirationDateTime: '2027-11-28T00:00:00Z',
        statusUpdateDateTime: '2026-11-28T00:00:00Z',
        creationDateTime: '2026-11-28T00:00:00Z',
      },
    });
  });
  const tokens = {
    access_token: 'a',
    token_type: 'bearer' as const,
    claims: () => ({
      sub: 'opaque-1',
      iss: 'x',
      aud: 'y',
      iat: 0,
      exp: 0,
      acr: 'urn:brasil:openbanking:loa2',
    }),
  } as unknown as client.TokenEndpointResponse & client.TokenEndpointResponseHelpers;
  const granted = await brasil.granted(bank, tokens, [{ type: 'Accounts', identifier: 'urn:bank:c1' }]);
  t.match(granted, { ok: true, grantId: 'urn:bank:c1' });
  const other = await brasil.granted(
    bank,
    { ...tokens, scope: 'openid consent:urn:bank:other' } as typeof tokens,
    [{ type: 'Accounts', identifier: 'urn:bank:c1' }],
  );
  t.match(
    other,
    { ok: false, grantId: 'urn:bank:c1' },
    'another consent: the trip’s own is the one to revoke',
  );
});
