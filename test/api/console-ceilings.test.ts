import t, { type Test } from 'tap';
import { signedIn } from '../helpers/console.js';
import { oneLine, runCli, runCliJson } from '../helpers/cli.js';
import { createTenant, forEachEngine, freshDatabase, startTestApp, tableCounts } from '../helpers/harness.js';

/*
 * A tenant works within the operator's ceilings (issue 28, item 6), over real HTTP and the real CLI: an
 * organisation admin sets a key's limits up to the organisation's ceiling (the configured defaults until the
 * operator says otherwise) and is refused above it, with nothing written; only the operator sets ceilings,
 * from `svc orgs ceilings` or the console; and every console user's changes are rate limited, a burst sent at
 * once included.
 */

interface CeilingsOutput {
  org_id: string;
  ceilings: Record<string, { perMinute: number; burst: number }>;
  set_by_operator: string[];
  keys_above: string[];
}

forEachEngine(t, async (t, engine) => {
  const database = await freshDatabase(t, engine);
  // The console's default budget for changes: 30 a minute, 20 at once.
  const app = await startTestApp(t, engine, { database });
  const tenant = await createTenant(app);
  const org = tenant.orgId;
  const key = tenant.keys.sk_live.id;
  const admin = await signedIn(app, 'admin', org, 'admin@lender.cl');
  const support = await signedIn(app, 'support', org, 'help@lender.cl');
  const operator = await signedIn(app, 'operator', null, 'ops@example.com');
  const cliOptions = { home: database.home, env: { SVC_DATABASE_URL: database.url } };
  const ceilingsOf = (t: Test, ...args: string[]) =>
    runCliJson<CeilingsOutput>(t, ['orgs', 'ceilings', org, ...args], cliOptions);
  const setLimit = (perMinute: string, burst = '') =>
    admin('POST', `/console/o/${org}/live/keys/${key}/limits`, {
      group: 'read',
      per_minute: perMinute,
      burst,
    });
  const storedLimits = async () =>
    (await app.db.knex('api_keys').where({ id: key }).first()).rate_limits as string | null;

  await t.test(
    'an admin sets a key up to the ceiling, and is refused above it with nothing written',
    async (t) => {
      const page = await admin('GET', `/console/o/${org}/live/keys`);
      t.match(
        page.text,
        '<dt>read</dt><dd>100 a minute, burst of 20</dd>',
        'the keys page shows the ceilings',
      );
      t.notMatch(page.text, `/console/o/${org}/live/ceilings`, 'and no form to change them');

      const before = await tableCounts(app.db);
      for (const [perMinute, burst] of [
        ['100000000', ''],
        ['101', ''],
        ['100', '21'],
      ]) {
        const refused = await setLimit(perMinute!, burst);
        t.equal(refused.status, 400, `read=${perMinute}:${burst} is refused`);
        t.match(refused.text, /ceiling for read is 100 a minute with a burst of 20/);
      }
      t.same(await tableCounts(app.db), before, 'nothing was written, not even an audit row');
      t.equal(await storedLimits(), null);

      t.equal((await setLimit('100', '20')).status, 200, 'at the ceiling');
      t.same(JSON.parse((await storedLimits())!), { read: { perMinute: 100, burst: 20 } });
      t.equal((await setLimit('40')).status, 200, 'below it');
    },
  );

  await t.test(
    'the operator raises a ceiling with svc orgs ceilings; the admin may then use it',
    async (t) => {
      const shown = await ceilingsOf(t);
      t.same(shown.set_by_operator, [], 'at first every ceiling is the default');
      t.same(shown.ceilings.read, { perMinute: 100, burst: 20 });

      const raised = await ceilingsOf(t, '--rate-limit', 'read=5000', '--rate-limit', 'sync_write=60:30');
      t.same(
        raised.ceilings.read,
        { perMinute: 5000, burst: 1000 },
        'a burst left out keeps the default ratio',
      );
      t.same(raised.ceilings.sync_write, { perMinute: 60, burst: 30 });
      t.same(raised.set_by_operator.sort(), ['read', 'sync_write']);
      const audit = await app.db
        .knex('audit_log')
        .where({ action: 'organisation.rate_limit_ceilings_changed' });
      t.match(audit, [{ org_id: org, actor: /^cli:/ }], 'the change is in the audit log');

      t.equal((await setLimit('5000')).status, 200, 'the admin may use the raised ceiling');
      const above = await setLimit('5001');
      t.equal(above.status, 400);
      t.match(above.text, /ceiling for read is 5000 a minute with a burst of 1000/);
      t.same(JSON.parse((await storedLimits())!).read, { perMinute: 5000, burst: 1000 });

      const table = await runCli(['orgs', 'ceilings', org], cliOptions);
      t.equal(table.code, 0);
      t.match(table.stdout, /read\s+5000\s+1000\s+operator/);
      t.match(table.stdout, /widget_tokens\s+30\s+10\s+default/);

      for (const [args, message] of [
        [['--rate-limit', 'read=0'], /at least 1 per minute/],
        [['--rate-limit', 'reads=10'], /Unknown rate-limit group "reads"/],
        [['--rate-limit', 'read=10', '--reset'], /--reset|cannot also be provided/],
      ] as const) {
        const refused = await runCli(['orgs', 'ceilings', org, ...args], cliOptions);
        t.not(refused.code, 0, args.join(' '));
        t.match(oneLine(refused.stderr), message);
      }
      const missing = await runCli(['orgs', 'ceilings', 'org_0000000000000000'], cliOptions);
      t.not(missing.code, 0);
      t.match(oneLine(missing.stderr), /No organisation org_0000000000000000/);
      t.same(
        (await ceilingsOf(t)).ceilings.read,
        { perMinute: 5000, burst: 1000 },
        'the refusals changed nothing',
      );
    },
  );

  await t.test('only the operator sets a ceiling in the console', async (t) => {
    const path = `/console/o/${org}/live/ceilings`;
    const before = await tableCounts(app.db);
    for (const [who, user] of [
      ['admin', admin],
      ['support', support],
    ] as const) {
      const refused = await user('POST', path, { group: 'read', per_minute: '100000000' });
      t.equal(refused.status, 403, `${who} is refused`);
    }
    t.same(await tableCounts(app.db), before, 'nothing was written');

    const page = await operator('GET', `/console/o/${org}/live/keys`);
    t.match(page.text, `action="${path}"`, 'the operator has the form');
    const set = await operator('POST', path, { group: 'webhook_deliveries', per_minute: '600', burst: '50' });
    t.equal(set.status, 200);
    t.match(set.text, 'webhook_deliveries=600:50');
    t.same((await ceilingsOf(t)).ceilings.webhook_deliveries, { perMinute: 600, burst: 50 });
    t.equal((await operator('POST', path, { group: 'read', per_minute: 'lots' })).status, 400);

    const reset = await ceilingsOf(t, '--reset');
    t.same(reset.set_by_operator, [], 'reset: every ceiling is the default again');
    t.same(reset.ceilings.read, { perMinute: 100, burst: 20 });
    t.same(reset.keys_above, [key], 'the key above the lowered ceiling is named, and keeps its limits');
  });

  await t.test("a console user's changes are rate limited, a parallel burst counted in full", async (t) => {
    const keysPath = `/console/o/${org}/test/keys`;
    // Room for the 27 keys issued here, beyond the default cap of 20 live keys (org-ceilings tests the cap).
    await ceilingsOf(t, '--max-live-keys', '100');
    const fresh = await signedIn(app, 'admin', org, 'burst@lender.cl');
    const answers = await Promise.all(
      Array.from({ length: 26 }, () => fresh('POST', keysPath, { type: 'secret', name: 'burst' })),
    );
    const statuses = answers.map((answer) => answer.status);
    t.equal(statuses.filter((status) => status === 200).length, 20, 'the burst of 20 passes');
    const refused = answers.filter((answer) => answer.status === 429);
    t.equal(refused.length, 6, 'the rest are refused');
    t.match(refused[0]!.text, /too many changes in a row/);
    t.ok(Number(refused[0]!.retryAfter) >= 1, 'with Retry-After');
    const issued = await app.db.knex('api_keys').where({ org_id: org, name: 'burst' }).count({ n: '*' });
    t.equal(Number(issued[0]!.n), 20, 'exactly 20 keys were issued');

    const other = await operator('POST', keysPath, { type: 'secret', name: 'other user' });
    t.equal(other.status, 200, "another user's changes are not held back");
    t.equal((await fresh('GET', keysPath)).status, 200, 'reading is not limited');
    t.equal((await fresh('POST', keysPath, { type: 'secret' })).status, 429, 'the next change waits');
    t.equal((await fresh('POST', '/console/logout')).status, 303, 'signing out always works');
  });
});
