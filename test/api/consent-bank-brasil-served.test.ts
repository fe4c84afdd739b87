import t from 'tap';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * The Brazilian simulated bank as the API serves it: beside the Chilean one, its pages on the banks' own
 * origin (never the API's, issue 44) under /sandbox/consent-bank-br, the appliance registered with it per Brazil's profile, and
 * `GET /v1/institutions` naming its profile.
 */
forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, { consentBank: true });

  t.test('served, registered as a fapi1-br client, listed with its profile', async (t) => {
    const brasil = app.consentBank?.brasil;
    t.ok(brasil, 'the Brazilian bank runs beside the Chilean one');
    t.equal(brasil!.issuer, `${app.consentBank!.pagesUrl}/sandbox/consent-bank-br`);
    const discovery = await fetch(`${brasil!.issuer}/.well-known/openid-configuration`);
    t.equal(discovery.status, 200, "its discovery is on the banks' own origin");
    t.equal(
      (await fetch(`${app.url}/sandbox/consent-bank-br/.well-known/openid-configuration`)).status,
      404,
      "not on the API's",
    );
    const metadata = (await discovery.json()) as Record<string, unknown>;
    t.equal(metadata.issuer, brasil!.issuer);
    t.ok((metadata.response_modes_supported as string[]).includes('jwt'), 'JARM');

    const held = await app.services.consentClients.forBank(app.db.knex, 'bancoabierto-br', 'test');
    t.ok(held, 'the appliance registered with it');
    t.match(JSON.parse(held!.registration.registration), {
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      authorization_signed_response_alg: 'PS256',
      token_endpoint_auth_method: 'tls_client_auth',
    });
    t.not(
      held!.registration.client_id,
      (await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test'))?.registration
        .client_id,
      'a client of its own, not the Chilean bank’s',
    );

    const tenant = await createTenant(app);
    const institutions = await app.request('GET', '/v1/institutions', { key: tenant.keys.sk_test.secret });
    t.match(
      institutions.body.find((i: { id: string }) => i.id === 'bancoabierto-br'),
      {
        country: 'BR',
        connection: 'consent',
        consent: {
          security_profile: 'fapi1-br',
          data_profiles: [
            'ob-br-consents-3',
            'ob-br-resources-3',
            'ob-br-accounts-2',
            'ob-br-credit-cards-2',
          ],
          max_duration_months: 12,
        },
      },
    );
    t.match(
      institutions.body.find((i: { id: string }) => i.id === 'bancoabierto'),
      {
        consent: { security_profile: 'fapi2-cl' },
      },
    );
  });
});
