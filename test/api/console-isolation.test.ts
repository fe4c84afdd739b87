import t from 'tap';
import { signedIn } from '../helpers/console.js';
import { createTenant, forEachEngine, startTestApp, tableCounts } from '../helpers/harness.js';

/*
 * Who reaches what in the console, over real HTTP (issue 18): an admin of one organisation reaches nothing
 * of another's (404, as the API answers for another tenant's resources), support cannot change keys (403),
 * an operator reaches every organisation; a refused change leaves the database as it was.
 */

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const a = await createTenant(app);
  const b = await createTenant(app);
  const adminA = await signedIn(app, 'admin', a.orgId, 'admin@a.cl');
  const supportA = await signedIn(app, 'support', a.orgId, 'help@a.cl');
  const operator = await signedIn(app, 'operator', null, 'ops@example.com');
  const keysOf = (org: string, mode = 'test') => `/console/o/${org}/${mode}/keys`;

  await t.test("an admin reaches nothing of another organisation's", async (t) => {
    const before = await tableCounts(app.db);
    const bName: string = (await app.db.knex('organisations').where({ id: b.orgId }).first()).name;
    const bKeyEnd = b.keys.sk_test.secret.slice(-4);
    for (const [method, path, form] of [
      ['GET', `/console/o/${b.orgId}/test`, {}],
      ['GET', keysOf(b.orgId), {}],
      ['GET', `${keysOf(b.orgId)}/${b.keys.sk_test.id}`, {}],
      ['GET', `${keysOf(a.orgId)}/${b.keys.sk_test.id}`, {}],
      ['GET', `${keysOf(a.orgId)}/${a.keys.sk_live.id}`, {}],
      ['POST', keysOf(b.orgId), { type: 'secret' }],
      ['POST', `${keysOf(a.orgId)}/${b.keys.sk_test.id}/revoke`, { confirm: 'yes' }],
      ['POST', `${keysOf(a.orgId)}/${b.keys.sk_test.id}/rotate`, { grace_hours: '1' }],
      ['POST', `${keysOf(a.orgId)}/${b.keys.sk_test.id}/limits`, { group: 'read', per_minute: '5000' }],
      ['GET', '/console/orgs', {}],
      ['GET', `/console/o/${b.orgId}/test/events`, {}],
      ['GET', `/console/o/${b.orgId}/live/audit`, {}],
      ['GET', `/console/o/${b.orgId}/test/links`, {}],
      ['GET', `/console/o/${a.orgId}/staging/keys`, {}],
    ] as const) {
      const response = await adminA(method, path, form);
      t.equal(response.status, 404, `${method} ${path}`);
      t.notMatch(response.text, bName, "shows nothing of the other organisation's: its name");
      t.notMatch(response.text, `…${bKeyEnd}`, 'or its key');
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
    const other = await app.db.knex('api_keys').where({ id: b.keys.sk_test.id }).first();
    t.equal(other.revoked_at, null);
    t.equal(other.rate_limits, null);
  });

  await t.test('support reads keys and cannot change them', async (t) => {
    t.equal((await supportA('GET', keysOf(a.orgId))).status, 200);
    const before = await tableCounts(app.db);
    for (const [path, form] of [
      [keysOf(a.orgId), { type: 'secret' }],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/revoke`, { confirm: 'yes' }],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/rotate`, { grace_hours: '1' }],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/limits`, { group: 'read', per_minute: '5000' }],
    ] as const) {
      const response = await supportA('POST', path, form);
      t.equal(response.status, 403, path);
      t.match(response.text, 'Your role does not allow this.');
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
  });

  await t.test('bad input on a change is explained and changes nothing', async (t) => {
    const before = await tableCounts(app.db);
    for (const [path, form, message] of [
      [keysOf(a.orgId), { type: 'admin' }, 'Choose secret or publishable'],
      [keysOf(a.orgId), { type: 'secret', name: 'x'.repeat(101) }, 'at most 100'],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/revoke`, {}, 'Tick the box'],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/rotate`, { grace_hours: '9999' }, 'grace period'],
      [
        `${keysOf(a.orgId)}/${a.keys.sk_test.id}/limits`,
        { group: 'everything', per_minute: '5' },
        'Unknown rate-limit group',
      ],
      [
        `${keysOf(a.orgId)}/${a.keys.sk_test.id}/limits`,
        { group: 'read', per_minute: '-3' },
        'must look like',
      ],
    ] as const) {
      const response = await adminA('POST', path, form);
      t.equal(response.status, 400, `${path} ${JSON.stringify(form)}`);
      t.match(response.text, message);
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
  });

  await t.test("the keys forms explain bad input in the reader's language", async (t) => {
    const adminEs = await signedIn(app, 'admin', a.orgId, 'admin-es@a.cl', 'es');
    const before = await tableCounts(app.db);
    for (const [path, form, message] of [
      [keysOf(a.orgId), { type: 'admin' }, 'Elige secreta o publicable'],
      [keysOf(a.orgId), { type: 'secret', name: 'x'.repeat(101) }, 'a lo más 100 caracteres'],
      [`${keysOf(a.orgId)}/${a.keys.sk_test.id}/rotate`, { grace_hours: '9999' }, 'período de gracia'],
    ] as const) {
      const response = await adminEs('POST', path, form);
      t.equal(response.status, 400, path);
      t.match(response.text, message);
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');
  });

  await t.test('an operator reaches every organisation', async (t) => {
    const list = await operator('GET', '/console/orgs');
    t.equal(list.status, 200);
    t.match(list.text, a.orgId);
    t.match(list.text, b.orgId);
    for (const org of [a.orgId, b.orgId]) t.equal((await operator('GET', keysOf(org, 'live'))).status, 200);
    const issued = await operator('POST', keysOf(b.orgId), { type: 'publishable', name: 'from the console' });
    t.equal(issued.status, 200);
    t.match(issued.text, /svc_pk_test_[A-Za-z0-9]+/);
    const audit = await app.db.knex('audit_log').where({ action: 'api_key.created', org_id: b.orgId });
    t.ok(
      audit.some((row: { actor: string }) => row.actor.startsWith('console:cu_')),
      'audited with the console user',
    );
  });
});
