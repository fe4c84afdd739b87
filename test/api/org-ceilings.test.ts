import t from 'tap';
import { signedIn } from '../helpers/console.js';
import { oneLine, runCli, runCliJson } from '../helpers/cli.js';
import {
  createTenant,
  forEachEngine,
  freshDatabase,
  RAISED_CONSOLE_ACTIONS,
  startTestApp,
  tableCounts,
} from '../helpers/harness.js';

/*
 * Ceilings bind the organisation, not each key (issue 44, item 2), over real HTTP and the real CLI: an admin
 * who issues more keys gets no more requests than the ceiling; the operator caps the organisation's live
 * keys, and parallel issues cannot pass the cap; a rotation never hands on more than today's ceiling; the
 * console and `svc orgs ceilings` show both.
 */

interface CeilingsOutput {
  ceilings: Record<string, { perMinute: number; burst: number }>;
  max_live_keys: number;
  max_live_keys_set_by_operator: boolean;
  live_keys: number;
}

const secretOf = (text: string) => /<code id="secret-value">([^<]+)<\/code>/.exec(text)?.[1] ?? '';

forEachEngine(t, async (t, engine) => {
  const database = await freshDatabase(t, engine);
  // The test config's read ceiling is 100 a minute with a burst of 20; sync_write 10 with 5. The clock stands
  // still, so no bucket refills during the test.
  const app = await startTestApp(t, engine, { database, config: RAISED_CONSOLE_ACTIONS });
  const cliOptions = { home: database.home, env: { SVC_DATABASE_URL: database.url } };

  await t.test('five new keys of one organisation share one read budget, the ceiling', async (t) => {
    const tenant = await createTenant(app);
    const org = tenant.orgId;
    const admin = await signedIn(app, 'admin', org, 'admin@five.cl');
    const secrets: string[] = [];
    for (let i = 0; i < 5; i++) {
      const issued = await admin('POST', `/console/o/${org}/test/keys`, { type: 'secret', name: `k${i}` });
      t.equal(issued.status, 200);
      secrets.push(secretOf(issued.text));
    }
    let allowed = 0;
    for (const key of secrets)
      for (let i = 0; i < 20; i++) {
        const answer = await app.request('GET', '/v1/openapi.json', { key });
        if (answer.status === 200) allowed += 1;
        else {
          t.equal(answer.status, 429);
          t.match(answer.body.error.message, /this organisation in the read group/);
          t.ok(Number(answer.headers.get('retry-after')) >= 1, 'Retry-After says when');
        }
      }
    t.equal(allowed, 20, 'the five keys together got the burst of one ceiling, not five');
    const other = await createTenant(app);
    t.equal(
      (await app.request('GET', '/v1/openapi.json', { key: other.keys.sk_test.secret })).status,
      200,
      "another organisation's budget is its own",
    );
    t.equal(
      (await app.request('GET', '/v1/openapi.json', { key: tenant.keys.sk_live.secret })).status,
      200,
      'and so is the live mode of the same organisation',
    );
  });

  await t.test(
    'the operator caps live keys; parallel issues stop at the cap, nothing more written',
    async (t) => {
      const tenant = await createTenant(app);
      const org = tenant.orgId;
      const admin = await signedIn(app, 'admin', org, 'admin@cap.cl');
      const shown = await runCliJson<CeilingsOutput>(t, ['orgs', 'ceilings', org], cliOptions);
      t.equal(shown.max_live_keys, 20, 'the default cap');
      t.equal(shown.max_live_keys_set_by_operator, false);
      t.equal(shown.live_keys, 4, 'the four keys of createTenant');

      const set = await runCliJson<CeilingsOutput>(
        t,
        ['orgs', 'ceilings', org, '--max-live-keys', '6'],
        cliOptions,
      );
      t.equal(set.max_live_keys, 6);
      t.equal(set.max_live_keys_set_by_operator, true);
      const audit = await app.db
        .knex('audit_log')
        .where({ org_id: org, action: 'organisation.key_cap_changed' });
      t.match(audit, [{ actor: /^cli:/ }], 'the change is in the audit log');

      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          admin('POST', `/console/o/${org}/live/keys`, { type: 'secret', name: `p${i}` }),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      t.same(statuses, [200, 200, 409, 409, 409, 409, 409, 409], 'two more keys, then refusals');
      const refused = answers.find((answer) => answer.status === 409)!;
      t.match(refused.text, 'already holds as many live keys as the operator allows');
      const live = await app.db
        .knex('api_keys')
        .where({ org_id: org })
        .whereNull('revoked_at')
        .count({ n: '*' })
        .first();
      t.equal(Number(live!.n), 6, 'six live keys, as the cap says');

      const page = await admin('GET', `/console/o/${org}/live/keys`);
      t.match(page.text, '<dt>Live keys</dt><dd>6 of at most 6</dd>', 'the console shows the cap');
      t.match(page.text, 'keys share these limits in each mode; another key adds nothing');

      const before = await tableCounts(app.db);
      const cli = await runCli(
        ['keys', 'create', '--org', org, '--mode', 'test', '--type', 'secret'],
        cliOptions,
      );
      t.not(cli.code, 0, 'the CLI is held to the cap too');
      t.match(oneLine(cli.stderr), /holds 6 live API keys, its cap is 6/);
      t.notMatch(cli.stdout + cli.stderr, /sk_test_/, 'no key printed');
      t.same(await tableCounts(app.db), before, 'nothing was written');

      const revoked = await admin('POST', `/console/o/${org}/live/keys/${tenant.keys.sk_live.id}/revoke`, {
        confirm: 'yes',
      });
      t.equal(revoked.status, 200);
      t.equal(
        (await admin('POST', `/console/o/${org}/live/keys`, { type: 'secret' })).status,
        200,
        'a revoked key frees its place',
      );
      for (const bad of ['0', '-1', 'lots', '10001']) {
        const refusedCap = await runCli(['orgs', 'ceilings', org, '--max-live-keys', bad], cliOptions);
        t.not(refusedCap.code, 0, `--max-live-keys ${bad} is refused`);
        t.match(oneLine(refusedCap.stderr), /1 to 10000/);
      }
      const table = await runCli(['orgs', 'ceilings', org], cliOptions);
      t.match(table.stdout, /Live keys: 6 of at most 6 \(set by the operator\)/);
      const reset = await runCliJson<CeilingsOutput>(
        t,
        ['orgs', 'ceilings', org, '--max-live-keys', 'default'],
        cliOptions,
      );
      t.equal(reset.max_live_keys, 20);
      t.equal(reset.max_live_keys_set_by_operator, false);
    },
  );

  await t.test('a rotation hands on no more than the ceiling of today', async (t) => {
    const tenant = await createTenant(app);
    const org = tenant.orgId;
    const key = tenant.keys.sk_live.id;
    const admin = await signedIn(app, 'admin', org, 'admin@rotate.cl');
    await runCliJson(t, ['orgs', 'ceilings', org, '--rate-limit', 'sync_write=500:100'], cliOptions);
    const raised = await admin('POST', `/console/o/${org}/live/keys/${key}/limits`, {
      group: 'sync_write',
      per_minute: '500',
      burst: '100',
    });
    t.equal(raised.status, 200, 'the admin gives the key the raised ceiling');
    await runCliJson(t, ['orgs', 'ceilings', org, '--rate-limit', 'sync_write=100:20'], cliOptions);

    const rotated = await admin('POST', `/console/o/${org}/live/keys/${key}/rotate`, { grace_hours: '1' });
    t.equal(rotated.status, 200);
    const successor = await app.db.knex('api_keys').where({ rotated_from: key }).first();
    t.same(
      JSON.parse(successor.rate_limits),
      { sync_write: { perMinute: 100, burst: 20 } },
      'the successor has the ceiling, not 500 a minute',
    );
    const audit = await app.db
      .knex('audit_log')
      .where({ action: 'api_key.created', target_id: successor.id })
      .first();
    t.match(JSON.parse(audit.details), { limits_lowered_to_ceiling: ['sync_write'] }, 'the audit says so');

    // The CLI's rotation too, and the operator is told.
    const again = await runCli(['keys', 'rotate', successor.id, '--grace', '0'], cliOptions);
    t.equal(again.code, 0);
    const third = await app.db.knex('api_keys').where({ rotated_from: successor.id }).first();
    t.same(JSON.parse(third.rate_limits), { sync_write: { perMinute: 100, burst: 20 } });

    const sync = await app.db.transaction(async (trx) => {
      await trx('api_keys')
        .where({ id: third.id })
        .update({ rate_limits: JSON.stringify({ sync_write: { perMinute: 500, burst: 100 } }) });
      return trx('api_keys').where({ id: third.id }).first();
    });
    const cliRotation = await runCli(['keys', 'rotate', sync.id, '--grace', '0'], cliOptions);
    t.match(cliRotation.stdout, /held to the organisation's ceilings for sync_write/);
  });
});
