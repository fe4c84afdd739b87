import t from 'tap';
import { saveRegistration } from '../../src/banks/consent/registrations.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  startTestApp,
  tableCounts,
  RAISED_LIMITS,
  type TestApp,
} from '../helpers/harness.js';

/**
 * A live consent client for `bankId` with nothing usable behind it (no key, an empty certificate): what the
 * institutions list asks is only whether one is registered.
 */
function registerPlaceholder(app: TestApp, id: string, bankId: string, clientId: string): Promise<void> {
  return app.db.transaction((trx) =>
    saveRegistration(trx, {
      id,
      bank_id: bankId,
      mode: 'live',
      issuer: 'https://bank.example',
      api_base: 'https://api.bank.example/open-banking',
      client_id: clientId,
      registration_access_token_sealed: null,
      registration_client_uri: null,
      private_key_sealed: app.services.secrets.seal('not a key', id),
      certificate_pem: '-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n',
      server_ca_pem: null,
      registration: '{}',
      registered_at: app.clock.now(),
      updated_at: app.clock.now(),
    }),
  );
}

/*
 * Consent institutions (docs/open-finance.md): the consent sandbox in test mode, a bank with a registered
 * consent client in live mode, what `GET /v1/institutions` says of each, and `POST /v1/links` refusing a
 * password for them without writing anything.
 */
forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const skLive = tenant.keys.sk_live.secret;

  t.test('test mode: the consent sandbox connects by consent, the others by credentials', async (t) => {
    const all = (await app.request('GET', '/v1/institutions', { key: sk })).body;
    const abierto = all.find((i: { id: string }) => i.id === 'bancoabierto');
    t.match(abierto, {
      name: 'Banco Abierto (simulado)',
      connection: 'consent',
      consent: {
        security_profile: 'fapi2-cl',
        data_profiles: ['ob-br-accounts-2', 'ob-br-credit-cards-2'],
        covers: ['accounts', 'balances', 'movements', 'credit_cards'],
        max_duration_months: 36,
      },
      holder_types: ['individual'],
    });
    const chile = all.find((i: { id: string }) => i.id === 'bancochile');
    t.equal(chile.connection, 'credentials');
    t.equal(chile.consent, null);
  });

  t.test('live mode: a bank connects by consent once a consent client is registered', async (t) => {
    const before = (await app.request('GET', '/v1/institutions', { key: skLive })).body;
    t.equal(before.length, 0, 'no gateway, no registration: nothing to link in live mode');
    await registerPlaceholder(app, 'cc_0123456789abcdef', 'bci', 'client-1');
    const after = (await app.request('GET', '/v1/institutions', { key: skLive })).body;
    t.same(
      after.map((i: { id: string }) => i.id),
      ['bci'],
      'the registered bank only; the consent sandbox never in live mode',
    );
    t.equal(after[0].connection, 'consent');
    t.equal(after[0].consent.security_profile, 'fapi2-cl');
    const test = (await app.request('GET', '/v1/institutions', { key: sk })).body;
    t.equal(
      test.find((i: { id: string }) => i.id === 'bci').connection,
      'credentials',
      'other mode unchanged',
    );
  });

  t.test('POST /v1/links with a password for a consent bank is a 400 naming the widget', async (t) => {
    for (const [key, bank, mode] of [
      [sk, 'bancoabierto', 'test'],
      [skLive, 'bci', 'live'],
    ] as const) {
      const counts = await tableCounts(app.db);
      const res = await app.request('POST', '/v1/links', { key, body: linkBody({ bank_id: bank }) });
      t.equal(res.status, 400, `${bank} in ${mode} mode`);
      t.equal(res.body.error.type, 'invalid_request_error');
      t.equal(res.body.error.code, 'consent_required');
      t.match(res.body.error.message, /widget/);
      t.match(res.body.error.message, /consent/);
      t.notMatch(res.body.error.message, 'sandbox', 'the password is not echoed');
      t.same(await tableCounts(app.db), counts, 'nothing written');
    }
    const ok = await app.request('POST', '/v1/links', { key: sk, body: linkBody({ bank_id: 'bci' }) });
    t.equal(ok.status, 200, 'credential links of other banks unchanged');
  });
});

/*
 * An institution the operator added (`banks.institutions`, docs/open-finance.md "Adding an institution"):
 * listed with its own profile once a consent client is registered for it, by consent only; a password for
 * it is refused without writing anything, and a widget token may preselect it.
 */
const brasilia = {
  id: 'bancobrasilia',
  name: 'Banco Brasília',
  country: 'BR' as const,
  connection: 'consent' as const,
  profile: {
    security: 'fapi1-br' as const,
    data: ['ob-br-accounts-2' as const],
    covers: ['accounts' as const, 'balances' as const, 'movements' as const],
    maxDurationMonths: 12,
  },
  products: ['movements' as const],
  holderTypes: ['individual' as const, 'business' as const],
};

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, { config: { banks: { institutions: [brasilia] } } });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const skLive = tenant.keys.sk_live.secret;
  const listed = async () =>
    ((await app.request('GET', '/v1/institutions', { key: skLive })).body as { id: string }[]).map(
      (i) => i.id,
    );

  t.test('unlisted until registered, then listed by consent with its own profile', async (t) => {
    t.notOk((await listed()).includes('bancobrasilia'), 'no consent client yet: nowhere to start a link');
    await registerPlaceholder(app, 'cc_00000000000000b1', 'bancobrasilia', 'client-br');
    const all = (await app.request('GET', '/v1/institutions', { key: skLive })).body;
    t.same(
      all.map((i: { id: string }) => i.id),
      ['bancobrasilia'],
    );
    t.match(all[0], {
      object: 'institution',
      name: 'Banco Brasília',
      country: 'BR',
      connection: 'consent',
      products: ['movements'],
      holder_types: ['individual', 'business'],
      consent: {
        security_profile: 'fapi1-br',
        data_profiles: ['ob-br-accounts-2'],
        covers: ['accounts', 'balances', 'movements'],
        max_duration_months: 12,
      },
    });
  });

  t.test('a password for it is refused, nothing written; a widget token may preselect it', async (t) => {
    const counts = await tableCounts(app.db);
    const res = await app.request('POST', '/v1/links', {
      key: skLive,
      body: linkBody({ bank_id: 'bancobrasilia' }),
    });
    t.equal(res.status, 400);
    t.equal(res.body.error.code, 'consent_required');
    t.match(res.body.error.message, /Banco Brasília connects by consent/);
    t.same(await tableCounts(app.db), counts, 'nothing written');
    const token = await app.request('POST', '/v1/widget_tokens', {
      key: skLive,
      body: { institution_id: 'bancobrasilia' },
    });
    t.equal(token.status, 200, JSON.stringify(token.body));
    t.equal(token.body.object, 'widget_token');
    const unknown = await app.request('POST', '/v1/widget_tokens', {
      key: skLive,
      body: { institution_id: 'bancoatlantida' },
    });
    t.equal(unknown.status, 400);
    t.equal(unknown.body.error.param, 'institution_id');
  });
});
