import t from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import type { ApplianceStatus } from '../../src/processes/status.js';
import { freePort, installArgs, runCli, runCliJson, startServe, withDatabase } from '../helpers/cli.js';
import { HANG_GUARD_MS, forEachEngine, freshDatabase } from '../helpers/harness.js';

interface MigrationStatusJson {
  applied: string[];
  pending: string[];
  unknown: string[];
  version: string | null;
  kinds: Record<string, 'expand' | 'contract'>;
}

forEachEngine(t, async (t, engine) => {
  const { url, home } = await freshDatabase(t, engine);
  const all = migrationNames();
  t.ok(all.length > 0, 'the code ships migrations');
  await runCliJson(t, installArgs(engine, url), { home });

  await t.test('after install nothing is pending', async (t) => {
    const status = await runCliJson<MigrationStatusJson>(t, ['migrate', '--status'], { home });
    t.equal((await runCliJson<ApplianceStatus>(t, ['status'], { home })).database.schema_state, 'current');
    t.same(status, { applied: all, pending: [], unknown: [], version: all.at(-1), kinds: {} });
    const text = await runCli(['migrate'], { home });
    t.equal(text.code, 0);
    t.match(text.stdout, /up to date/i, 'svc migrate says there is nothing to do');
  });

  await t.test('after a rollback, serve refuses to start until svc migrate runs', async (t) => {
    const rolledBack = await runCliJson<{ reverted: string[] }>(t, ['migrate', '--rollback'], { home });
    t.ok(rolledBack.reverted.length > 0, 'the rollback reverts the last batch');
    t.ok(
      rolledBack.reverted.every((name) => all.includes(name)),
      'and names only migrations this code knows',
    );

    const status = await runCliJson<MigrationStatusJson>(t, ['migrate', '--status'], { home });
    t.same(
      status.pending,
      all.filter((name) => rolledBack.reverted.includes(name)),
      'status lists them as pending',
    );
    t.same(Object.keys(status.kinds), status.pending, 'with the kind each declares');
    t.ok(Object.values(status.kinds).every((kind) => kind === 'expand' || kind === 'contract'));
    t.same(status.unknown, []);

    const port = await freePort();
    const refused = await runCli(['serve', '--port', String(port)], {
      home,
      env: { SVC_METRICS_PORT: '0' },
      timeoutMs: HANG_GUARD_MS,
    });
    t.notOk(refused.timedOut, 'serve does not hang');
    t.not(refused.code, 0, 'serve exits non-zero');
    t.match(refused.message, /pending migration/, 'it says migrations are pending');
    t.match(refused.message, /`svc migrate`/, 'and names the command to run');
    t.notMatch(refused.stdout, /api listening/, 'no API was started');

    const applied = await runCliJson<{ applied: string[] }>(t, ['migrate'], { home });
    t.same(applied.applied, status.pending, 'svc migrate applies what was pending');
    const after = await runCliJson<MigrationStatusJson>(t, ['migrate', '--status'], { home });
    t.same(after, { applied: all, pending: [], unknown: [], version: all.at(-1), kinds: {} });

    const serve = await startServe(t, { home });
    const health = await serve.request('GET', '/health');
    t.equal(health.status, 200, 'serve starts and answers');
    t.same(health.body, { status: 'ok' });
  });

  await t.test('svc status says when the database is behind this build', async (t) => {
    // As a database migrated by the previous build looks: its newest migration not recorded.
    const last = all.at(-1)!;
    const row = await withDatabase(url, async (db) =>
      db.knex('knex_migrations').where({ name: last }).first(),
    );
    await withDatabase(url, async (db) => db.knex('knex_migrations').where({ name: last }).delete());
    t.teardown(() => withDatabase(url, async (db) => db.knex('knex_migrations').insert(row)));
    const appliance = await runCliJson<ApplianceStatus>(t, ['status'], { home });
    t.match(
      appliance.database,
      { schema_state: 'behind', pending_migrations: 1, unknown_migrations: [] },
      'svc status: behind this build',
    );
    t.match(
      // ink wraps the line at the terminal's width (80 without one).
      (await runCli(['status'], { home })).stdout.replace(/\s+/g, ' '),
      '(behind this build: 1 pending; run svc migrate)',
      'and says so in words',
    );
  });

  await t.test('serve refuses a schema newer than the code', async (t) => {
    const future = '29991231000000_from_a_newer_svc';
    await withDatabase(url, async (db) => {
      await db.knex('knex_migrations').insert({ name: future, batch: 99, migration_time: new Date() });
    });
    t.teardown(() =>
      withDatabase(url, async (db) => db.knex('knex_migrations').where({ name: future }).delete()),
    );

    const status = await runCliJson<MigrationStatusJson>(t, ['migrate', '--status'], { home });
    t.same(status.unknown, [future], 'status reports the unknown migration');
    t.same(status.kinds, { [future]: 'contract' }, 'as contract: no kind is recorded for it');
    const appliance = await runCliJson<ApplianceStatus>(t, ['status'], { home });
    t.match(appliance.database, { schema_state: 'ahead', unknown_migrations: [future] }, 'svc status: ahead');
    const text = await runCli(['status'], { home });
    t.match(
      text.stdout.replace(/\s+/g, ' '),
      `(ahead of this build: it has ${future}; upgrade svc)`,
      'and says so in words',
    );
    const refused = await runCli(['serve', '--port', String(await freePort())], {
      home,
      env: { SVC_METRICS_PORT: '0' },
      timeoutMs: HANG_GUARD_MS,
    });
    t.not(refused.code, 0, 'serve exits non-zero');
    t.match(refused.message, /newer than this version of svc/, 'and says the schema is newer than the code');
  });
});
