import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { fetch as undiciFetch } from 'undici';

import { ApiError } from '../../src/errors/api-error.js';
import {
  rotateCertificate,
  verifyClientCertificate,
  type RotationInput,
  type RotationReport,
} from '../../src/banks/consent/registration-management.js';
import {
  findRegistration,
  openPrivateKey,
  saveRegistration,
  type ConsentClientRow,
} from '../../src/banks/consent/registrations.js';
import { tokenBinding } from '../../src/banks/consent/token-binding.js';
import { issueClientCertificate, subjectDnOf, type KeyAndCert } from '../../src/consent-bank/test-ca.js';
import { findGrantRow, openGrant } from '../../src/links/consent/grants.js';
import { appBesideBank, consentLink, mtlsAgent } from '../helpers/consent-bank.js';
import { forEachEngine, runSyncs, setTimeLimit, type TestApp } from '../helpers/harness.js';
import { makePki } from '../helpers/oidc-stub.js';

/*
 * `svc banks rotate-certificate`'s service against the simulated bank (oidc-provider with RFC 7592 on), on
 * both engines: consent links made with one certificate keep syncing after the registration moves to
 * another, under the same client id; the bank then refuses the old certificate. A certificate the bank does
 * not take is rolled back at the bank and here; a bank that refuses the read or the update changes nothing;
 * a registration without RFC 7592 management, or a bad certificate, is refused before any call.
 */
setTimeLimit(t, 240_000);

const RUTS = ['11.111.111-1', '12.345.678-5'];

forEachEngine(t, async (t, engine) => {
  // The bank runs on the real clock; the app's starts there too, so the sync windows and token lives agree.
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine);
  const { ca } = fixture;
  const context = { db: app.db, secrets: app.services.secrets, now: () => app.clock.now() };
  const rotate = (identity: KeyAndCert, patch: Partial<RotationInput> = {}) =>
    rotateCertificate(context, {
      bankId: 'bancoabierto',
      mode: 'test',
      certificatePem: identity.cert,
      privateKeyPem: identity.key,
      ...patch,
    });
  const stored = async () => (await findRegistration(app.db.knex, 'bancoabierto', 'test'))!;
  const tokenOf = (row: ConsentClientRow) =>
    app.services.secrets.open(row.registration_access_token_sealed!, row.id);
  /** RFC 7592 §2.1 read, as a test looks at what the bank holds. */
  const atTheBank = async (t: Test, row: ConsentClientRow, identity: KeyAndCert) => {
    const response = await undiciFetch(row.registration_client_uri!, {
      headers: { authorization: `Bearer ${tokenOf(row)}`, accept: 'application/json' },
      dispatcher: mtlsAgent(t, ca, identity),
    });
    t.equal(response.status, 200, 'the bank reads the client with the stored registration access token');
    return (await response.json()) as Record<string, unknown>;
  };

  // Two consent links made, and synced, with the CA's client certificate.
  const links: string[] = [];
  for (const rut of RUTS)
    links.push((await consentLink(fixture, app, registration, tenant.orgId, rut)).linkId);
  t.equal(await runSyncs(app), 2, 'both links synced before any rotation');
  for (const id of links) t.equal((await linkRow(app, id)).last_error_code, null);
  /** A minute on, a full sync of both links again: both run, and neither ends in an error. */
  const syncAgain = async (t: Test, said: string) => {
    app.clock.advance(60_000);
    await enqueueFullSyncs(app, links);
    t.equal(await runSyncs(app), 2);
    for (const id of links) t.equal((await linkRow(app, id)).last_error_code, null, said);
  };

  t.test(
    'refused before any call: a bad certificate or key, the same certificate, no RFC 7592',
    async (t) => {
      const before = await stored();
      const calls = fixture.bank.calls();
      const other = await issueClientCertificate(ca, 'CN=someone else, O=svc sandbox, C=CL', Date.now());
      const expired = await issueClientCertificate(
        ca,
        'CN=svc appliance, O=svc sandbox, C=CL',
        Date.now() - 3 * 365 * 86_400_000,
      );
      const refused = async (identity: KeyAndCert, param: string, message: RegExp) => {
        const error = await rotate(identity).then(
          () => null,
          (e: unknown) => e,
        );
        t.type(error, ApiError, String(message));
        t.match(error, { param, message });
        t.notMatch((error as Error).message, /PRIVATE KEY/, 'no key in the message');
      };
      await refused({ cert: other.cert, key: ca.client.key }, 'key', /does not belong to the certificate/);
      await refused({ cert: other.cert, key: 'garbage' }, 'cert', /private key does not parse/);
      await refused({ cert: 'garbage', key: other.key }, 'cert', /no PEM certificate/);
      await refused(expired, 'cert', /expired on/);
      await refused(
        { cert: other.cert + ca.client.cert, key: other.key },
        'cert',
        /chain: certificate 1 of 2 is not signed by the next/,
      );
      await refused(ca.client, 'cert', /already holds/);
      const notThere = await rotateCertificate(context, {
        bankId: 'bci',
        mode: 'live',
        certificatePem: other.cert,
        privateKeyPem: other.key,
      }).catch((e: unknown) => e);
      t.match(notThere, { code: 'resource_missing', message: /not registered with bci in live mode/ });

      // A bank that gave no registration_client_uri (RFC 7591 lets it): refused, naming RFC 7592 and the way out.
      await app.db.knex('consent_clients').where({ id: before.id }).update({ registration_client_uri: null });
      const unmanaged = await rotate(other).catch((e: unknown) => e);
      t.match(unmanaged, {
        code: 'registration_not_manageable',
        message:
          /does not offer client management \(RFC 7592\).*registration_client_uri.*svc banks register bancoabierto --mode test/,
      });
      await app.db
        .knex('consent_clients')
        .where({ id: before.id })
        .update({ registration_client_uri: before.registration_client_uri });

      t.same(await stored(), before, 'the registration is as it was');
      t.same(fixture.bank.calls(), calls, 'and the bank was not called');
    },
  );

  t.test(
    'RFC 7592 §2.1: a registration access token the bank does not know: refused, nothing changes',
    async (t) => {
      const before = await stored();
      await app.db
        .knex('consent_clients')
        .where({ id: before.id })
        .update({
          registration_access_token_sealed: app.services.secrets.seal('not-the-bank-s-token', before.id),
        });
      const changed = await stored();
      const next = await issueClientCertificate(ca, 'CN=svc appliance 2, O=svc sandbox, C=CL', Date.now());
      const report = await rotate(next);
      t.equal(report.outcome, 'refused');
      t.same(
        report.steps.map((s) => [s.step, s.outcome]),
        [
          ['check', 'ok'],
          ['read', 'failed'],
        ],
      );
      t.match(
        report.steps[1]!.detail,
        /RFC 7592 §2\.1 read refused: HTTP 401 invalid_token.*nothing changed/,
      );
      t.notMatch(JSON.stringify(report), /not-the-bank-s-token/, 'the token is not in the report');
      t.same(await stored(), changed, 'the registration is as it was');
      await app.db
        .knex('consent_clients')
        .where({ id: before.id })
        .update({ registration_access_token_sealed: before.registration_access_token_sealed });
    },
  );

  t.test(
    'RFC 7592 §2.1 read, §2.2 update: a new certificate under the same client id; links made before keep syncing, the old certificate is refused',
    async (t) => {
      const before = await stored();
      const oldToken = tokenOf(before);
      const next = await issueClientCertificate(ca, 'CN=svc appliance 2027, O=svc sandbox, C=CL', Date.now());
      const grantsBefore = await Promise.all(links.map((id) => grantOf(app, id)));
      app.clock.advance(1_000);
      const rotatedAt = app.clock.now();

      const report = await rotate(next);
      t.equal(report.outcome, 'rotated', JSON.stringify(report.steps));
      t.same(
        report.steps.map((s) => [s.step, s.outcome]),
        ['check', 'read', 'update', 'store', 'verify'].map((s) => [s, 'ok']),
      );
      t.match(report, {
        client_id: registration.client_id,
        registration_id: registration.id,
        previous_subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance',
        subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2027',
      });
      t.match(report.steps.find((s) => s.step === 'update')!.detail, /new registration access token/);
      noSecretsIn(t, report, [oldToken, tokenOf(await stored()), next.key, ca.client.key]);

      const after = await stored();
      t.equal(after.id, before.id, 'the same row');
      t.equal(after.client_id, before.client_id, 'the same client id');
      t.equal(after.certificate_pem, next.cert, 'the new certificate');
      t.equal(openPrivateKey(after, app.services.secrets), next.key, 'and its key, sealed');
      t.not(tokenOf(after), oldToken, 'the rotated registration access token is kept (RFC 7592 §2.2)');
      t.ok(Number(after.updated_at) > Number(before.updated_at), 'updated_at moved: clients reopen');
      t.equal(JSON.parse(after.registration).tls_client_auth_subject_dn, subjectDnOf(next.cert));
      t.notOk('registration_access_token' in JSON.parse(after.registration), 'no token in clear');

      const held = await atTheBank(t, after, next);
      t.equal(held.client_id, before.client_id);
      t.equal(held.tls_client_auth_subject_dn, subjectDnOf(next.cert), 'the bank now expects the new DN');
      const oldAtBank = await verifyClientCertificate(after, {
        certificatePem: ca.client.cert,
        privateKeyPem: ca.client.key,
      });
      t.match(oldAtBank, {
        ok: false,
        detail: /token endpoint did not take this certificate: HTTP 401 invalid_client/,
      });
      t.match(await verifyClientCertificate(after, { certificatePem: next.cert, privateKeyPem: next.key }), {
        ok: true,
      });

      // The links made with the old certificate: their access tokens are bound to it (cnf.x5t#S256), so the
      // bank answers 401; the connector refreshes (RFC 8705 §4: a confidential client's refresh token is not
      // bound) and the sync goes on with a token bound to the new certificate.
      app.clock.advance(60_000);
      await enqueueFullSyncs(app, links);
      t.equal(await runSyncs(app), 2);
      const consentClient = (await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test'))!;
      t.equal(consentClient.registration.certificate_pem, next.cert, 'the process reopened its client');
      for (const [i, id] of links.entries()) {
        const link = await linkRow(app, id);
        t.equal(link.last_error_code, null, `${RUTS[i]} synced after the rotation`);
        t.equal(link.status, 'active');
        t.ok(Number(link.last_synced_at) >= rotatedAt, 'just now');
        const accounts = await app.db.knex('accounts').where({ link_id: id });
        t.ok(accounts.length >= 2, 'its accounts');
        for (const account of accounts)
          t.ok(Number(account.refreshed_at) >= rotatedAt, `${account.name} refreshed after the rotation`);
        const [count] = await app.db.knex('movements').where({ link_id: id }).count({ n: '*' });
        t.ok(Number(count?.n) > 0, 'its movements');
        const grant = await grantOf(app, id);
        t.not(
          grant.accessToken,
          grantsBefore[i]!.accessToken,
          'a new access token, after a 401 and a refresh',
        );
        t.equal(
          await tokenBinding(consentClient, grant.accessToken),
          'bound',
          'bound to the new certificate',
        );
      }

      // The rotated token works for the next rotation: a second one, back to a certificate of the first DN.
      const third = await issueClientCertificate(ca, 'CN=svc appliance, O=svc sandbox, C=CL', Date.now());
      const again = await rotate(third);
      t.equal(again.outcome, 'rotated', JSON.stringify(again.steps));
      t.equal((await stored()).client_id, before.client_id);
      await syncAgain(t, 'and they sync again');
    },
  );

  t.test(
    'RFC 7592 §2.2 rollback: a certificate the bank does not trust is put back to the old subject DN, and the old certificate kept',
    async (t) => {
      const before = await stored();
      const current = { cert: before.certificate_pem, key: openPrivateKey(before, app.services.secrets) };
      const elsewhere = await (await makePki()).issue('svc appliance elsewhere');
      const report = await rotate({ cert: elsewhere.certPem, key: elsewhere.keyPem });
      t.equal(report.outcome, 'rolled_back', JSON.stringify(report.steps));
      t.same(
        report.steps.map((s) => [s.step, s.outcome]),
        [
          ['check', 'ok'],
          ['read', 'ok'],
          ['update', 'ok'],
          ['store', 'ok'],
          ['verify', 'failed'],
          ['rollback', 'ok'],
          ['restore', 'ok'],
        ],
      );
      t.match(
        report.steps.find((s) => s.step === 'verify')!.detail,
        /token endpoint did not answer over mTLS with this certificate .*does not take it in the TLS handshake/,
      );
      t.match(report, { subject_dn: report.previous_subject_dn, client_id: before.client_id });
      noSecretsIn(t, report, [tokenOf(before), tokenOf(await stored()), elsewhere.keyPem, current.key]);

      const after = await stored();
      t.equal(after.certificate_pem, before.certificate_pem, 'the old certificate is kept');
      t.equal(openPrivateKey(after, app.services.secrets), current.key);
      t.equal(after.client_id, before.client_id);
      t.not(tokenOf(after), tokenOf(before), 'with the last registration access token the bank issued');
      const held = await atTheBank(t, after, current);
      t.equal(
        held.tls_client_auth_subject_dn,
        subjectDnOf(current.cert),
        'the bank expects the old DN again',
      );
      t.match(
        await verifyClientCertificate(after, { certificatePem: current.cert, privateKeyPem: current.key }),
        {
          ok: true,
        },
      );

      await syncAgain(t, 'links still sync');
    },
  );

  t.test(
    'RFC 7592 §2.2: a bank that refuses the update: nothing changes; what was sent follows §2.2',
    async (t) => {
      const bank = await refusingBank(t, ca);
      const id = 'cc_refusingbank01';
      const row: ConsentClientRow = {
        id,
        bank_id: 'bci',
        mode: 'live',
        issuer: bank.origin,
        api_base: `${bank.origin}/open-banking`,
        client_id: 'client-at-bci',
        registration_access_token_sealed: app.services.secrets.seal(bank.token, id),
        registration_client_uri: `${bank.origin}/reg/client-at-bci`,
        private_key_sealed: app.services.secrets.seal(ca.client.key, id),
        certificate_pem: ca.client.cert,
        server_ca_pem: ca.caCert,
        registration: JSON.stringify({ client_id: 'client-at-bci' }),
        registered_at: app.clock.now(),
        updated_at: app.clock.now(),
      };
      await app.db.transaction((trx) => saveRegistration(trx, row));
      const before = await findRegistration(app.db.knex, 'bci', 'live');
      const next = await issueClientCertificate(ca, 'CN=svc appliance 2027, O=svc sandbox, C=CL', Date.now());
      const report = await rotateCertificate(context, {
        bankId: 'bci',
        mode: 'live',
        certificatePem: next.cert,
        privateKeyPem: next.key,
      });
      t.equal(report.outcome, 'refused');
      t.same(
        report.steps.map((s) => [s.step, s.outcome]),
        [
          ['check', 'ok'],
          ['read', 'ok'],
          ['update', 'failed'],
        ],
      );
      t.match(
        report.steps[2]!.detail,
        /RFC 7592 §2\.2 update refused: HTTP 400 invalid_client_metadata: this bank keeps its subject DNs; nothing changed/,
      );
      t.same(await findRegistration(app.db.knex, 'bci', 'live'), before, 'the registration is as it was');
      t.equal(bank.puts.length, 1);
      t.same(
        bank.puts[0],
        {
          client_id: 'client-at-bci',
          token_endpoint_auth_method: 'tls_client_auth',
          tls_client_auth_subject_dn: subjectDnOf(next.cert),
          redirect_uris: ['https://appliance.example/widget/consent/callback'],
          grant_types: ['authorization_code', 'refresh_token'],
          software_statement: 'eyJhbGciOiJQUzI1NiJ9.e30.c2ln',
          x_bank_extension: { kept: true },
        },
        'the metadata as read, the new DN, client_id; no registration_access_token, registration_client_uri, client_secret_expires_at, client_id_issued_at (nor client_secret)',
      );
      t.equal(bank.presented[0], subjectDnOf(ca.client.cert), 'over mTLS with the current certificate');
      await app.db.knex('consent_clients').where({ id }).delete();
    },
  );
});

async function linkRow(app: TestApp, id: string) {
  return app.db.knex('links').where({ id }).first();
}

async function grantOf(app: TestApp, linkId: string) {
  return openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);
}

async function enqueueFullSyncs(app: TestApp, linkIds: string[]): Promise<void> {
  const { enqueueSync } = await import('../../src/jobs/jobs.js');
  await app.db.transaction(async (trx) => {
    for (const id of linkIds) {
      const row = await trx('links').where({ id }).first();
      await enqueueSync(trx, { link: row, refreshType: 'full', now: app.clock.now() });
    }
  });
}

function noSecretsIn(t: Test, report: RotationReport, secrets: string[]): void {
  const text = JSON.stringify(report);
  t.notMatch(text, /PRIVATE KEY|v1\.mk_/, 'no key, nothing sealed in the report');
  for (const secret of secrets) t.notOk(text.includes(secret.trim()), 'no secret in the report');
}

/**
 * A bank that reads its client (RFC 7592 §2.1) and refuses every update (§2.2), over mTLS with the test CA;
 * it keeps what each update sent, and the subject DN of the certificate each call presented.
 */
async function refusingBank(
  t: Test,
  ca: { caCert: string; server: KeyAndCert },
): Promise<{ origin: string; token: string; puts: unknown[]; presented: string[] }> {
  const token = 'registration-access-token-of-bci';
  const puts: unknown[] = [];
  const presented: string[] = [];
  let origin = '';
  const server: Server = createServer(
    {
      key: ca.server.key,
      cert: ca.server.cert,
      ca: [ca.caCert],
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const peer = (req.socket as import('node:tls').TLSSocket).getPeerX509Certificate();
        if (peer) presented.push(subjectDnOf(peer.toString()));
        const answer = (status: number, json: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(json));
        };
        if (req.headers.authorization !== `Bearer ${token}`) return answer(401, { error: 'invalid_token' });
        if (req.url !== '/reg/client-at-bci') return answer(404, { error: 'not_found' });
        if (req.method === 'GET')
          return answer(200, {
            client_id: 'client-at-bci',
            client_id_issued_at: 1_700_000_000,
            client_secret: 'a secret a tls_client_auth client should not have',
            client_secret_expires_at: 0,
            registration_access_token: token,
            registration_client_uri: `${origin}/reg/client-at-bci`,
            token_endpoint_auth_method: 'tls_client_auth',
            tls_client_auth_subject_dn: presented[0],
            redirect_uris: ['https://appliance.example/widget/consent/callback'],
            grant_types: ['authorization_code', 'refresh_token'],
            software_statement: 'eyJhbGciOiJQUzI1NiJ9.e30.c2ln',
            x_bank_extension: { kept: true },
          });
        if (req.method === 'PUT') {
          puts.push(JSON.parse(body));
          return answer(400, {
            error: 'invalid_client_metadata',
            error_description: 'this bank keeps its subject DNs',
          });
        }
        return answer(405, { error: 'invalid_request' });
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { origin, token, puts, presented };
}
