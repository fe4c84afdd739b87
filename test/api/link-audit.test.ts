import t from 'tap';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { atTheBank } from '../helpers/consent-bank.js';
import { signedIn } from '../helpers/console.js';
import { runCli, runCliJson } from '../helpers/cli.js';
import {
  createTenant,
  forEachEngine,
  freshDatabase,
  linkBody,
  runSyncs,
  startTestApp,
  type TestApp,
} from '../helpers/harness.js';
import { connectThroughWidget, openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * Links, consent grants and revocations are in the audit log with who and how, whichever door they came
 * through (issue 44, item 9): a link made with POST /v1/links names its key; one made through the widget
 * names its widget session, its token and the key that issued the token; a consent granted at the bank, its
 * revocation queued at a delete and the bank's answer each have their row. A deleted link's last state and
 * its revocation stay readable, in the console as with `svc links inspect`.
 */

const CALLBACK = '/widget/consent/callback';

async function auditOf(app: TestApp, targetId: string) {
  const rows = await app.db
    .knex('audit_log')
    .where({ target_id: targetId })
    .orderBy('created_at')
    .orderBy('id');
  return rows.map((row) => ({ ...row, details: row.details ? JSON.parse(row.details) : null }));
}

forEachEngine(t, async (t, engine) => {
  const database = await freshDatabase(t, engine);
  const app = await startTestApp(t, engine, { database, consentBank: true });
  const tenant = await createTenant(app);
  const org = tenant.orgId;
  const sk = tenant.keys.sk_test;
  const cliOptions = { home: database.home, env: { SVC_DATABASE_URL: database.url } };

  await t.test('a link made through the API names its key; the audit keeps no secret', async (t) => {
    const created = await app.request('POST', '/v1/links', {
      key: sk.secret,
      body: linkBody({ credentials: { rut: '12.345.678-5', password: 'sandbox' } }),
    });
    t.equal(created.status, 200);
    const [row, ...more] = await auditOf(app, created.body.id);
    t.equal(more.length, 0);
    t.match(row, {
      org_id: org,
      actor: `key:${sk.id}`,
      action: 'link.create',
      target_type: 'link',
      details: { via: 'api', login: 'credentials', bank_id: created.body.bank_id, mode: 'test' },
    });
    t.notMatch(JSON.stringify(row), /sandbox|12\.345|12345678/, 'neither the password nor the RUT');
  });

  await t.test('a link made through the widget names its session, its token and the key', async (t) => {
    const { session } = await connectThroughWidget(app, sk.secret);
    const link = await app.db
      .knex('widget_sessions')
      .whereNotNull('link_id')
      .orderBy('created_at', 'desc')
      .first();
    const [row] = await auditOf(app, link.link_id);
    t.match(row, {
      actor: `widget_session:${link.id}`,
      action: 'link.create',
      details: {
        via: 'widget',
        login: 'credentials',
        widget_token: link.widget_token_id,
        issued_by: `key:${sk.id}`,
      },
    });
    t.notMatch(JSON.stringify(row), session, 'never the session secret');
  });

  await t.test(
    'a consent through the widget: created and granted; deleted, revoked at the bank, all audited and shown',
    async (t) => {
      const token = await widgetToken(app, sk.secret);
      const opened = await openWidget(app, token);
      const session = opened.bootstrap.session as string;
      const started = await widgetApi(app, session, 'POST', 'consent', { bank_id: 'bancoabierto' });
      t.equal(started.status, 200);
      const { callback } = await atTheBank(started.body.authorization_url, `${app.url}${CALLBACK}`);
      t.equal((await fetch(callback)).status, 200);
      await runSyncs(app);
      const finished = await widgetApi(app, session, 'POST', 'finish');
      const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
        key: sk.secret,
      });
      const linkId = exchanged.body.id as string;
      t.match(linkId, /^link_/);
      const widgetSession = await app.db.knex('widget_sessions').where({ link_id: linkId }).first();
      // Rows of one transaction share their time (the test clock stands still): read them by action.
      const byAction = async (action: string) =>
        (await auditOf(app, linkId)).filter((row) => row.action === action);
      t.same((await auditOf(app, linkId)).map((row) => row.action).sort(), [
        'link.consent_granted',
        'link.create',
      ]);
      t.match(await byAction('link.create'), [
        {
          actor: `widget_session:${widgetSession.id}`,
          details: { via: 'widget', login: 'consent', issued_by: `key:${sk.id}` },
        },
      ]);
      t.match(await byAction('link.consent_granted'), [
        {
          actor: `widget_session:${widgetSession.id}`,
          details: { bank_id: 'bancoabierto', renewal: false, expires_at: /^\d{4}-/ },
        },
      ]);

      const admin = await signedIn(app, 'admin', org, 'admin@audit.cl');
      const deleted = await admin('POST', `/console/o/${org}/test/links/${linkId}/delete`, {
        confirm: 'yes',
      });
      t.equal(deleted.status, 200);
      t.match(await byAction('link.consent_revocation_queued'), [
        { actor: `console:${admin.userId}`, details: { bank_id: 'bancoabierto' } },
      ]);
      t.match(await byAction('link.delete'), [
        {
          actor: `console:${admin.userId}`,
          details: { last_state: { status: 'active', bank_id: 'bancoabierto', accounts_count: Number } },
        },
      ]);

      const support = await signedIn(app, 'support', org, 'help@audit.cl', 'es');
      const pending = await support('GET', `/console/o/${org}/test/links/${linkId}`);
      t.equal(pending.status, 200, 'the deleted link still has its page');
      t.match(pending.text, 'Esta conexión fue eliminada');
      t.match(pending.text, /Revocación en curso: intento 1 de 20/);
      t.match(pending.text, `console:${admin.userId}`);

      t.ok((await revokeDueGrants(app.services)) >= 1);
      t.match(await byAction('link.consent_revoked'), [
        { actor: 'scheduler:grant-revocations', details: { bank_id: 'bancoabierto', attempts: 1 } },
      ]);
      t.notMatch(JSON.stringify(await auditOf(app, linkId)), /grant_id|access_token|refresh_token/);

      const en = await signedIn(app, 'support', org, 'help-en@audit.cl');
      const page = await en('GET', `/console/o/${org}/test/links/${linkId}`);
      t.match(page.text, 'This link was deleted');
      t.match(page.text, /The bank confirmed the consent revoked at/);
      t.match(page.text, /<dt>Last state<\/dt><dd>Active<\/dd>|<dt>Last state<\/dt><dd>active<\/dd>/i);
      t.equal((await en('GET', `/console/o/${org}/live/links/${linkId}`)).status, 404, 'not in another mode');
      const other = await createTenant(app);
      const stranger = await signedIn(app, 'admin', other.orgId, 'admin@other.cl');
      t.equal(
        (await stranger('GET', `/console/o/${other.orgId}/test/links/${linkId}`)).status,
        404,
        "nor in another organisation's console",
      );

      const inspected = await runCliJson(t, ['links', 'inspect', linkId], cliOptions);
      t.match(inspected, {
        deleted: true,
        deleted_by: `console:${admin.userId}`,
        last_state: { status: 'active', bank_id: 'bancoabierto' },
        grant_revocation: { status: 'revoked' },
      });
      const text = await runCli(['links', 'inspect', linkId], cliOptions);
      t.match(text.stdout, /Last state/);
    },
  );

  await t.test('a deleted password link: its last state, and no consent to revoke', async (t) => {
    const created = await app.request('POST', '/v1/links', { key: sk.secret, body: linkBody() });
    await runSyncs(app);
    t.equal((await app.request('DELETE', `/v1/links/${created.body.id}`, { key: sk.secret })).status, 200);
    const support = await signedIn(app, 'support', org, 'help2@audit.cl');
    const page = await support('GET', `/console/o/${org}/test/links/${created.body.id}`);
    t.equal(page.status, 200);
    t.match(page.text, 'no consent at the bank to revoke');
    t.match(page.text, `key:${sk.id}`);
    const inspected = await runCliJson(t, ['links', 'inspect', created.body.id], cliOptions);
    t.match(inspected, { deleted: true, grant_revocation: null, last_state: { status: 'active' } });
    t.equal(
      (await support('GET', `/console/o/${org}/test/links/link_0000000000000000`)).status,
      404,
      'a link that never was is still not found',
    );
  });
});
