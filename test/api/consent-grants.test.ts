import t from 'tap';
import { ConsentClients } from '../../src/banks/consent/client.js';
import { parseAuthorizationDetails, validUntil } from '../../src/banks/consent/authorization-details.js';
import { registerWithSimulatedBank } from '../../src/test-mode/self-registration.js';
import { gapsOfRegistration } from '../../src/banks/consent/register.js';
import {
  createConsentLink,
  findGrantRow,
  openGrant,
  saveGrantTokens,
  type NewGrant,
} from '../../src/links/consent/grants.js';
import { SecretError } from '../../src/secrets/secret-box.js';
import { consent, REDIRECT_URI, startBank } from '../helpers/consent-bank.js';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * The foundations the consent flow stands on: the appliance registers itself with the simulated bank (once:
 * a second call keeps the client), opens a client for the registration (discovery over mTLS), and keeps a
 * link's grant sealed, each secret under its own link and column.
 */
forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const app = await startTestApp(t, engine);
  const secrets = app.services.secrets;
  const tenant = await createTenant(app);
  const clients = new ConsentClients(secrets);
  t.teardown(() => clients.close());
  const self = () =>
    registerWithSimulatedBank({
      db: app.db,
      secrets,
      bank: fixture.bank,
      ca: fixture.ca,
      redirectUri: REDIRECT_URI,
      clientName: app.services.config.widget.name,
      now: Date.now(),
    });

  t.test('registers once and opens a client that reaches the bank over mTLS', async (t) => {
    const row = await self();
    t.equal(row.bank_id, 'bancoabierto');
    t.equal(row.api_base, fixture.bank.mtlsBase);
    t.equal((await self()).client_id, row.client_id, 'a second start keeps the registration');
    const opened = await clients.forBank(app.db.knex, 'bancoabierto', 'test');
    t.equal(opened?.configuration.serverMetadata().issuer, fixture.bank.issuer);
    t.equal(await clients.forBank(app.db.knex, 'bancoabierto', 'test'), opened, 'kept while unchanged');
    t.equal(await clients.forBank(app.db.knex, 'bci', 'test'), null, 'no registration, no client');

    const done = await consent(fixture, opened!.configuration, { rut: '12.345.678-5' });
    const details = parseAuthorizationDetails(done.tokens!.authorization_details)!;
    const grant: NewGrant = {
      consentClientId: row.id,
      clientId: row.client_id,
      grantId: String(done.tokens!.grant_id),
      authorizationDetails: details,
      expiresAt: validUntil(details),
      accessToken: done.tokens!.access_token,
      accessTokenExpiresAt: Date.now() + (done.tokens!.expires_in ?? 0) * 1000,
      refreshToken: done.tokens!.refresh_token ?? null,
    };
    const link = await app.db.transaction((trx) =>
      createConsentLink(
        trx,
        { orgId: tenant.orgId, mode: 'test', actor: 'test' },
        {
          bank_id: 'bancoabierto',
          holder_type: 'individual',
          consent_version: 'widget-1',
          consent_text_hash: 'a'.repeat(64),
          subject: '12345678-5',
        },
        grant,
        { secrets, syncIntervalMs: 3_600_000, consentExpiryWarningDays: 7 },
        Date.now(),
        { announce: false },
      ),
    );
    const stored = (await findGrantRow(app.db.knex, link.id))!;
    for (const secret of [grant.grantId, grant.accessToken, grant.refreshToken!])
      t.notOk(JSON.stringify(stored).includes(secret), 'no grant id or token in clear');
    t.match(openGrant(stored, secrets), {
      kind: 'grant',
      grantId: grant.grantId,
      accessToken: grant.accessToken,
      refreshToken: grant.refreshToken,
      clientId: row.client_id,
    });

    await saveGrantTokens(
      app.db.knex,
      secrets,
      link.id,
      { accessToken: 'at-2', accessTokenExpiresAt: 5, refreshToken: null },
      Date.now(),
    );
    const refreshed = openGrant((await findGrantRow(app.db.knex, link.id))!, secrets);
    t.equal(refreshed.accessToken, 'at-2');
    t.equal(
      refreshed.refreshToken,
      grant.refreshToken,
      'a refresh without a new refresh token keeps the old',
    );

    const swapped = { ...stored, access_token_sealed: stored.grant_id_sealed };
    t.throws(
      () => openGrant(swapped, secrets),
      SecretError,
      'a sealed value does not open in another column',
    );
  });

  // Last, as it replaces the registration the tests above use.
  t.test('a client an earlier build registered without what this one asks is registered again', async (t) => {
    const row = await self();
    const stored = JSON.parse(row.registration) as Record<string, unknown>;
    await app.db
      .knex('consent_clients')
      .where({ id: row.id })
      .update({
        registration: JSON.stringify({ ...stored, grant_types: ['authorization_code', 'refresh_token'] }),
      });
    const again = await self();
    t.not(
      again.client_id,
      row.client_id,
      'a client without client_credentials is replaced at the next start',
    );
    t.same(gapsOfRegistration(again), [], 'and the new one has everything asked');
  });
});
