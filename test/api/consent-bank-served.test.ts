import { createServer } from 'node:net';
import { pino } from 'pino';
import t from 'tap';
import { findRegistration } from '../../src/banks/consent/registrations.js';
import { serveAndRegister } from '../../src/test-mode/serve-consent-banks.js';
import { testCaDirectory } from '../../src/consent-bank/test-ca.js';
import {
  createTenant,
  forEachEngine,
  freshDatabase,
  setTimeLimit,
  startTestApp,
} from '../helpers/harness.js';

/*
 * The API process serves the simulated consent bank (test mode needs no setup): its browser face on an
 * origin of its own (issue 44, item 7: never the console's), its mTLS face on its own port, the appliance
 * registered with it at start and kept across a restart; a taken port or a missing test CA leaves the API
 * serving without it, with one warning.
 */
setTimeLimit(t, 180_000);

const DISCOVERY = '/sandbox/consent-bank/.well-known/openid-configuration';

forEachEngine(t, async (t, engine) => {
  await t.test('a served appliance answers as the bank and is registered with it', async (t) => {
    const database = await freshDatabase(t, engine);
    const app = await startTestApp(t, engine, { database, consentBank: true });
    const bank = app.consentBank!;
    t.ok(bank, 'the app serves the bank');

    t.equal((await fetch(`${app.url}${DISCOVERY}`)).status, 404, "nothing of the bank on the API's origin");
    for (const path of [
      '/sandbox/consent-bank/auth',
      '/sandbox/consent-bank-br/.well-known/openid-configuration',
    ])
      t.equal((await fetch(`${app.url}${path}`)).status, 404, `${path}: not on the console's origin`);
    const pages = new URL(bank.pagesUrl);
    t.equal(pages.hostname, '127.0.0.1', 'its pages listen on loopback');
    t.not(pages.origin, new URL(app.url).origin, 'on an origin of their own');
    const discovery = await fetch(`${bank.pagesUrl}${DISCOVERY}`);
    t.equal(discovery.status, 200, "discovery answers on the bank's own origin");
    const document = (await discovery.json()) as Record<string, unknown>;
    t.equal(
      document.issuer,
      `${bank.pagesUrl}/sandbox/consent-bank`,
      "the issuer is under the bank's origin",
    );
    t.match(
      document.mtls_endpoint_aliases,
      {
        token_endpoint: `${bank.mtlsBase}/token`,
        pushed_authorization_request_endpoint: `${bank.mtlsBase}/par`,
      },
      'the machine endpoints are on the mTLS listener',
    );
    t.match(bank.mtlsBase, /^https:\/\/127\.0\.0\.1:\d+\/sandbox\/consent-bank$/, 'on loopback');

    const held = await findRegistration(app.db.knex, 'bancoabierto', 'test');
    t.ok(held, 'a consent_clients row for bancoabierto in test mode');
    t.match(held, {
      issuer: bank.issuer,
      api_base: bank.mtlsBase,
      client_id: String,
    });
    t.match(
      JSON.parse(held!.registration),
      { redirect_uris: [`${app.url}/widget/consent/callback`] },
      "the redirect URI is the widget's consent callback",
    );
    const opened = await app.services.consentClients.forBank(app.db.knex, 'bancoabierto', 'test');
    t.equal(opened?.registration.client_id, held!.client_id, 'the registration opens (key, certificate)');

    const tenant = await createTenant(app);
    const institutions = await app.request('GET', '/v1/institutions', { key: tenant.keys.sk_test.secret });
    t.match(
      institutions.body.find((i: { id: string }) => i.id === 'bancoabierto'),
      { connection: 'consent', consent: { security_profile: 'fapi2-cl' } },
      'GET /v1/institutions in test mode lists bancoabierto connecting by consent',
    );
    const nonsense = await fetch(`${app.url}/sandbox/consent-bank/token`);
    t.equal(nonsense.status, 404, 'the machine face is not on the API address');

    await t.test('a restart on the same addresses keeps the client', async (t) => {
      const apiPort = Number(new URL(app.url).port);
      const bankPort = Number(new URL(bank.mtlsBase).port);
      const pagesPort = Number(new URL(bank.pagesUrl).port);
      await app.server.close(1000);
      await bank.close();
      const again = await startTestApp(t, engine, {
        database,
        config: { api: { port: apiPort } },
        consentBank: { port: bankPort, pagesPort },
      });
      t.equal(again.consentBank?.mtlsBase, bank.mtlsBase, 'the bank is back where it was');
      const after = await findRegistration(again.db.knex, 'bancoabierto', 'test');
      t.equal(after?.id, held!.id, 'the same registration');
      t.equal(after?.client_id, held!.client_id, 'the same client id');
      t.equal(after?.updated_at, held!.updated_at, 'not registered again');
      const discovery = await fetch(`${again.consentBank!.pagesUrl}${DISCOVERY}`);
      t.equal(discovery.status, 200, 'and the bank answers');
    });
  });

  await t.test('no test CA: one warning naming svc install, nothing served or registered', async (t) => {
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const app = await startTestApp(t, engine);
    const bank = await serveAndRegister({
      ...app.services,
      logger,
      config: app.config,
      publicBaseUrl: app.url,
      port: 0,
    });
    t.equal(bank, null, 'no bank');
    t.match(
      lines,
      [
        {
          level: 40,
          msg: `simulated consent bank off: no test CA in ${testCaDirectory(app.config.home)}; run \`svc install\` (it makes one and keeps everything else)`,
        },
      ],
      'one warning',
    );
    t.equal(lines.length, 1, 'and nothing else');
    t.equal(await findRegistration(app.db.knex, 'bancoabierto', 'test'), undefined, 'nothing registered');
  });

  await t.test('a taken port: the API serves without the bank and says why', async (t) => {
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
    const port = (squatter.address() as { port: number }).port;
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const app = await startTestApp(t, engine, { consentBank: { port }, logger });
    t.equal(app.consentBank, null, 'no bank');
    t.equal((await app.request('GET', '/health')).status, 200, 'the API serves');
    t.match(
      lines.find((line) => line.msg.includes('simulated consent bank off')),
      {
        level: 40,
        msg: new RegExp(
          `cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\).*sandbox\\.consentBank\\.port \\(SVC_SANDBOX_CONSENT_BANK_PORT\\)`,
        ),
      },
      'one warning names the address and the setting',
    );
    const discovery = await fetch(`${app.url}${DISCOVERY}`);
    t.equal(discovery.status, 404, 'the bank is not served');
    t.equal(await findRegistration(app.db.knex, 'bancoabierto', 'test'), undefined, 'nothing registered');
  });
});
