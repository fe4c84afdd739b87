import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadConfig } from '../../src/config/load-config.js';
import { openDatabase } from '../../src/db/database.js';
import { findRegistration, saveRegistration } from '../../src/banks/consent/registrations.js';
import { registerWithSimulatedBank } from '../../src/test-mode/self-registration.js';
import { issueClientCertificate, type KeyAndCert } from '../../src/consent-bank/test-ca.js';
import { loadSecretBox } from '../../src/secrets/master-key-file.js';
import { REDIRECT_URI, startBank } from '../helpers/consent-bank.js';
import { freePort, installedHome, runCli } from '../helpers/cli.js';
import { forEachEngine, setTimeLimit } from '../helpers/harness.js';
import { makePki } from '../helpers/oidc-stub.js';
import { chile } from '../../src/banks/consent/profiles/chile.js';

/*
 * `svc banks rotate-certificate` as an operator runs it (docs/open-finance.md, "Rotating the client
 * certificate"): each step and its outcome in a table, or `--json`; a rotation that was rolled back exits
 * non-zero with its steps in the error; no secret printed; `svc banks registrations` shows the certificate's
 * end. Against the simulated bank with RFC 7592 (the service's own test covers the links' syncing).
 */
setTimeLimit(t, 180_000);

forEachEngine(t, async (t, engine) => {
  const { home, database } = await installedHome(t, engine);
  const fixture = await startBank(t, engine);
  const config = loadConfig({ home, env: {} });
  const secrets = loadSecretBox(config);
  const db = openDatabase({ url: database.url });
  t.teardown(() => db.close());
  const registration = await registerWithSimulatedBank({
    db,
    secrets,
    bank: fixture.bank,
    ca: fixture.ca,
    redirectUri: REDIRECT_URI,
    clientName: config.widget.name,
    now: Date.now(),
  });
  const files = (name: string, identity: KeyAndCert) => {
    writeFileSync(join(home, `${name}.pem`), identity.cert);
    writeFileSync(join(home, `${name}.key`), identity.key, { mode: 0o600 });
    return ['--cert', join(home, `${name}.pem`), '--key', join(home, `${name}.key`)];
  };
  const rotate = (args: string[]) =>
    runCli(['banks', 'rotate-certificate', 'bancoabierto', '--mode', 'test', ...args], { home });
  /** Whatever was printed must not hold the registration access token nor a key. */
  const noSecrets = async (t: Test, printed: string, keys: string[]) => {
    const row = (await findRegistration(db.knex, 'bancoabierto', 'test'))!;
    t.notOk(
      printed.includes(secrets.open(row.registration_access_token_sealed!, row.id)),
      'no token printed',
    );
    t.notMatch(printed, /PRIVATE KEY|v1\.mk_/, 'no key, nothing sealed printed');
    for (const key of keys) t.notOk(printed.includes(key.trim()), 'no key printed');
  };

  t.test('a person sees each step and its outcome, then what now holds', async (t) => {
    const next = await issueClientCertificate(
      fixture.ca,
      'CN=svc appliance 2027, O=svc sandbox, C=CL',
      Date.now(),
    );
    const result = await rotate(files('next', next));
    t.equal(result.code, 0, result.stderr);
    const lines = result.stdout.trim().split('\n');
    t.match(lines[0], /^STEP\s+OUTCOME\s+DETAIL$/);
    t.same(
      lines.slice(1, 6).map((line) => line.split(/\s+/).slice(0, 2)),
      ['check', 'read', 'update', 'store', 'verify'].map((step) => [step, 'ok']),
    );
    t.match(
      result.stdout,
      /update\s+ok\s+RFC 7592 §2\.2: the bank now expects C=CL,O=svc sandbox,CN=svc appliance 2027/,
    );
    const until = new Date(new X509Certificate(next.cert).validTo).toISOString().slice(0, 10);
    t.match(
      lines[6],
      `Rotated: bancoabierto (test mode) client ${registration.client_id} now uses C=CL,O=svc sandbox,CN=svc appliance 2027, valid until ${until}; every consent stays.`,
    );
    await noSecrets(t, result.stdout + result.stderr, [next.key, fixture.ca.client.key]);

    const listed = await runCli(['banks', 'registrations'], { home });
    t.match(listed.stdout, /CERTIFICATE ENDS/);
    t.match(listed.stdout, new Date(new X509Certificate(next.cert).validTo).toISOString());
  });

  t.test('--json: the report; a rolled-back rotation is an error that carries it', async (t) => {
    const third = await issueClientCertificate(
      fixture.ca,
      'CN=svc appliance 2028, O=svc sandbox, C=CL',
      Date.now(),
    );
    const ok = await rotate([...files('third', third), '--json']);
    t.equal(ok.code, 0, ok.stderr);
    const report = JSON.parse(ok.stdout);
    t.match(report, {
      bank_id: 'bancoabierto',
      mode: 'test',
      client_id: registration.client_id,
      registration_id: registration.id,
      outcome: 'rotated',
      subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2028',
      previous_subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2027',
      certificate_expires_at: Date.parse(new X509Certificate(third.cert).validTo),
    });
    t.equal(report.steps.length, 5);
    const listed = JSON.parse((await runCli(['banks', 'registrations', '--json'], { home })).stdout);
    t.match(listed, [
      {
        bank_id: 'bancoabierto',
        client_id: registration.client_id,
        certificate_subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2028',
        certificate_expires_at: Date.parse(new X509Certificate(third.cert).validTo),
      },
    ]);

    const elsewhere = await (await makePki()).issue('svc appliance elsewhere');
    const failed = await rotate([
      ...files('elsewhere', { cert: elsewhere.certPem, key: elsewhere.keyPem }),
      '--json',
    ]);
    t.equal(failed.code, 1);
    const { error } = JSON.parse(failed.stdout);
    t.match(error, {
      code: 'rotation_rolled_back',
      message: /The new certificate does not work at bancoabierto \(test mode\): the change was undone/,
      report: { outcome: 'rolled_back', subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2028' },
    });
    t.same(
      error.report.steps.map((s: { step: string; outcome: string }) => `${s.step} ${s.outcome}`),
      ['check ok', 'read ok', 'update ok', 'store ok', 'verify failed', 'rollback ok', 'restore ok'],
    );
    await noSecrets(t, failed.stdout + failed.stderr, [elsewhere.keyPem, third.key]);
    const row = (await findRegistration(db.knex, 'bancoabierto', 'test'))!;
    t.equal(row.certificate_pem, third.cert, 'the certificate that works is kept');

    // The same, for a person: the steps, then the error line; exit 1.
    const human = await rotate(files('elsewhere', { cert: elsewhere.certPem, key: elsewhere.keyPem }));
    t.equal(human.code, 1);
    t.match(
      human.stdout,
      /rollback\s+ok\s+RFC 7592 §2\.2: the bank expects C=CL,O=svc sandbox,CN=svc appliance 2028 again/,
    );
    t.match(
      human.message,
      /Error: The new certificate does not work at bancoabierto \(test mode\): the change was undone/,
    );
  });

  t.test('refused before any call: a key of another certificate, and no RFC 7592 at the bank', async (t) => {
    const other = await issueClientCertificate(fixture.ca, 'CN=other, O=svc sandbox, C=CL', Date.now());
    const wrongKey = await rotate([
      ...files('other', { cert: other.cert, key: fixture.ca.client.key }),
      '--json',
    ]);
    t.equal(wrongKey.code, 1);
    t.match(JSON.parse(wrongKey.stdout), {
      error: { code: 'parameter_invalid', message: 'The private key does not belong to the certificate.' },
    });
    await db
      .knex('consent_clients')
      .where({ id: registration.id })
      .update({ registration_access_token_sealed: null });
    const unmanaged = await rotate(files('other', other));
    t.equal(unmanaged.code, 1);
    t.match(
      unmanaged.message,
      /registration_not_manageable: bancoabierto \(test mode\) does not offer client management \(RFC 7592\)/,
    );
  });

  t.test(
    'svc doctor: a registration whose certificate ends within 30 days warns, and an ended one fails, each with the exact rotate-certificate command',
    async (t) => {
      const ports = { SVC_API_PORT: String(await freePort()), SVC_METRICS_PORT: String(await freePort()) };
      const DAY = 86_400_000;
      const doctorSays = async (notAfterFromNow: number) => {
        // issueClientCertificate's certificates last two years from a day before `now`.
        const ending = await issueClientCertificate(
          fixture.ca,
          'CN=svc appliance, O=Appliance SpA, C=CL',
          Date.now() + notAfterFromNow - 2 * 365 * DAY,
        );
        const id = 'cc_doctorbci00001';
        await db.transaction((trx) =>
          saveRegistration(trx, {
            id,
            bank_id: 'bci',
            mode: 'live',
            // The simulated bank's discovery answers there, so the check gets past the bank to the dates.
            issuer: fixture.bank.issuer,
            api_base: fixture.bank.mtlsBase,
            client_id: 'client-at-bci',
            registration_access_token_sealed: secrets.seal('a token', id),
            registration_client_uri: `${fixture.bank.mtlsBase}/reg/client-at-bci`,
            private_key_sealed: secrets.seal(ending.key, id),
            certificate_pem: ending.cert,
            server_ca_pem: fixture.ca.caCert,
            // What a bank that registered everything the appliance asks stores (RFC 7591 §3.2.1).
            registration: JSON.stringify({
              ...chile.registrationMetadata,
              token_endpoint_auth_method: 'tls_client_auth',
            }),
            registered_at: Date.now(),
            updated_at: Date.now(),
          }),
        );
        const result = await runCli(['doctor', '--json'], { home, env: ports, timeoutMs: 60_000 });
        const report = JSON.parse(result.stdout) as {
          checks: { check: string; status: string; detail: string; fix: string | null }[];
        };
        return report.checks.find((c) => c.check === 'consent client bci (live)')!;
      };
      const command = 'svc banks rotate-certificate bci --mode live --cert NEW_CERT.pem --key NEW_KEY.pem';
      const soon = await doctorSays(10 * DAY);
      t.match(soon, { status: 'warn', detail: /its certificate ends on .*, in (9|10) days/ });
      t.ok(soon.fix?.endsWith(command), soon.fix ?? 'no fix');
      const ended = await doctorSays(-DAY);
      t.match(ended, { status: 'fail', detail: /its certificate expired on/ });
      t.ok(ended.fix?.endsWith(command), ended.fix ?? 'no fix');
      await db.knex('consent_clients').where({ bank_id: 'bci' }).delete();
    },
  );
});
