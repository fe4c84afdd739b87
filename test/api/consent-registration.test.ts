import t from 'tap';
import type { Test } from 'tap';
import { ApiError } from '../../src/errors/api-error.js';
import { registerWithBank, type RegistrationInput } from '../../src/banks/consent/register.js';
import {
  listRegistrations,
  openPrivateKey,
  saveRegistration,
  viewOf,
} from '../../src/banks/consent/registrations.js';
import { certificateFacts } from '../../src/banks/consent/certificates.js';
import { institutionsOf } from '../../src/banks/institutions.js';
import { forEachEngine, startTestApp, tableCounts } from '../helpers/harness.js';
import { startOidcStub } from '../helpers/oidc-stub.js';
import { ANDINO } from '../helpers/operator-institution.js';

/*
 * `svc banks register`'s service: discovery and Dynamic Client Registration over mutual TLS against an
 * oidc-provider started here, then the row on both engines, its secrets sealed. Bad input is refused
 * before any call; a refusal at the bank writes nothing.
 */
forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const bank = await startOidcStub(t);
  const client = await bank.pki.issue('svc-appliance');
  const input = async (patch: Partial<RegistrationInput> = {}): Promise<RegistrationInput> => ({
    bankId: 'bci',
    mode: 'test',
    issuer: bank.issuer,
    apiBase: `${bank.issuer}/open-banking`,
    softwareStatement: await bank.softwareStatement(),
    redirectUri: 'https://appliance.example/widget/consent/callback',
    certificatePem: client.certPem,
    privateKeyPem: client.keyPem,
    serverCaPem: bank.pki.caPem,
    ...patch,
  });
  const now = () => app.clock.now();
  const refused = async (
    t: Test,
    patch: Partial<RegistrationInput>,
    param: RegExp | null,
    message: RegExp,
  ) => {
    const counts = await tableCounts(app.db);
    const seen = bank.presented.length;
    try {
      await registerWithBank(await input(patch), app.services.secrets, Date.now());
      t.fail('registered');
    } catch (error) {
      t.type(error, ApiError);
      if (param) t.match((error as ApiError & { param?: string }).param, param);
      t.match((error as Error).message, message);
      t.notMatch((error as Error).message, /PRIVATE KEY|eyJ/, 'no key, no statement in the message');
    }
    t.same(await tableCounts(app.db), counts, 'nothing written');
    if (param) t.equal(bank.presented.length, seen, 'refused before calling the bank');
  };

  t.test('registers over mTLS with the software statement and stores the client, sealed', async (t) => {
    const row = await registerWithBank(await input(), app.services.secrets, Date.now());
    t.ok(bank.presented.includes('svc-appliance'), 'the client certificate was presented');
    t.match(row, { bank_id: 'bci', mode: 'test', issuer: bank.issuer, certificate_pem: client.certPem });
    t.ok(row.client_id.length > 0);
    const registration = JSON.parse(row.registration);
    t.equal(registration.token_endpoint_auth_method, 'tls_client_auth');
    t.equal(registration.tls_client_auth_subject_dn, certificateFacts(client.certPem, null).subjectDn);
    t.notOk('registration_access_token' in registration, 'the token is not kept in clear');
    // What the bank registered is what the appliance asked for; a bank keeps RFC 8705's default (false) else.
    t.equal(
      registration.tls_client_certificate_bound_access_tokens,
      true,
      'RFC 8705 §3.4: certificate-bound tokens asked for at registration',
    );
    t.ok(
      registration.grant_types.includes('client_credentials'),
      'client_credentials registered (Grant Management §6.1 takes such a token)',
    );
    t.notMatch(row.private_key_sealed, /PRIVATE KEY/);
    await app.db.transaction((trx) =>
      saveRegistration(trx, { ...row, registered_at: now(), updated_at: now() }),
    );
    const [stored] = await listRegistrations(app.db.reader);
    t.equal(openPrivateKey(stored!, app.services.secrets), client.keyPem);
    const view = viewOf(stored!);
    t.notMatch(JSON.stringify(view), /PRIVATE|sealed|v1\./, 'the listing carries no secret, sealed or not');
    t.equal(view.manageable, row.registration_access_token_sealed !== null);

    // Registering again replaces the client for that bank and mode.
    const again = await registerWithBank(await input(), app.services.secrets, Date.now());
    await app.db.transaction((trx) => saveRegistration(trx, again));
    const rows = await listRegistrations(app.db.reader);
    t.equal(rows.length, 1);
    t.equal(rows[0]!.client_id, again.client_id);
    t.not(again.client_id, row.client_id);
  });

  t.test('refused before any call: bad input', async (t) => {
    const other = await bank.pki.issue('someone-else');
    const expired = await bank.pki.issue('old', {
      notBefore: new Date(Date.now() - 10 * 86_400_000),
      notAfter: new Date(Date.now() - 86_400_000),
    });
    await refused(t, { bankId: 'nope' }, /bank/, /Unknown bank/);
    await refused(t, { bankId: 'bancoabierto', mode: 'live' }, /mode/, /test mode only/);
    await refused(t, { issuer: 'http://127.0.0.1:1' }, /issuer/, /https/);
    await refused(t, { apiBase: 'not a url' }, /api-base/, /not a URL/);
    await refused(t, { softwareStatement: 'hello' }, /software-statement/, /signed JWT/);
    await refused(t, { privateKeyPem: other.keyPem }, /key/, /does not belong/);
    await refused(t, { privateKeyPem: 'garbage' }, /cert/, /private key does not parse/);
    await refused(t, { certificatePem: 'garbage' }, /cert/, /no PEM certificate/);
    await refused(t, { certificatePem: expired.certPem, privateKeyPem: expired.keyPem }, /cert/, /expired/);
  });

  t.test('refused by the bank: nothing stored, a clear reason', async (t) => {
    await refused(
      t,
      { softwareStatement: await bank.softwareStatement({}, true) },
      null,
      /registration failed.*software_statement/,
    );
    await refused(t, { issuer: `${bank.issuer}/elsewhere` }, null, /discovery failed/);
    await refused(t, { serverCaPem: null }, null, /discovery failed/);
  });

  t.test('an institution the operator added registers like a built-in bank', async (t) => {
    const institutions = institutionsOf({ banks: { institutions: [ANDINO] } });
    await refused(t, { bankId: 'bancoandino' }, /bank/, /Unknown bank 'bancoandino'/);
    const row = await registerWithBank(
      await input({ bankId: 'bancoandino', mode: 'live' }),
      app.services.secrets,
      Date.now(),
      {
        institutions,
      },
    );
    t.match(row, { bank_id: 'bancoandino', mode: 'live', issuer: bank.issuer });
  });
});
