import { hostname } from 'node:os';
import t from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import {
  appliedMigrations,
  freePort,
  installArgs,
  installedHome,
  runCli,
  serveErrors,
  startServe,
  supervisorStateOf,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { FAST_DISPATCHER_ENV, FAST_SCHEDULER_ENV } from '../helpers/crash.js';
import { HANG_GUARD_MS, engines, forEachEngine, linkBody, setTimeLimit } from '../helpers/harness.js';
import { NEWER_CONTRACT, NEWER_EXPAND, newerBuild } from '../helpers/other-build.js';
import { startReceiver } from '../helpers/receiver.js';

/**
 * Rolling upgrades (issue 32, item 2; docs/upgrade.md, "Rolling upgrades on PostgreSQL"): a newer build's
 * expand migration applies while a server of this build runs, and that server keeps its API, scheduler and
 * dispatcher working on the schema it makes; the newer build's contract migration waits until no server of
 * this build is left, and the newer build's `svc serve` starts before it.
 */

// Per engine: two builds, three svc serve processes, a sync and a delivery on each side (about 40 s idle).
setTimeLimit(t, engines().length * 240_000);

const FAST = {
  ...FAST_SCHEDULER_ENV,
  ...FAST_DISPATCHER_ENV,
  SVC_SUPERVISOR_HEARTBEAT_SECONDS: '1',
};

forEachEngine(t, async (t, engine) => {
  await t.test(
    "a newer build's expand step applies under a running server, which keeps every role; its contract step waits for that server to stop",
    async (t) => {
      const { database, home, key } = await installedHome(t, engine);
      const { url } = database;
      const receiver = await startReceiver(t);
      const old = await startServe(t, { home, env: FAST });
      const endpoint = await old.request('POST', '/v1/webhook_endpoints', {
        key,
        body: { url: receiver.url, enabled_events: ['*'] },
      });
      t.equal(endpoint.status, 200, 'a webhook endpoint to a real receiver');
      const newer = newerBuild(t, [NEWER_EXPAND, NEWER_CONTRACT]);
      const before = await appliedMigrations(url);

      // The expand step applies; the contract step is deferred, with exit 75 (try again later).
      const partial = await runCli(['migrate'], { home, root: newer });
      t.equal(partial.code, 75, 'svc migrate of the newer build exits 75: something is deferred');
      t.equal(partial.stderr.trim().split('\n').length, 1, 'with one line');
      t.match(partial.message, `Applied ${NEWER_EXPAND} (expand`, 'saying what it applied');
      t.match(partial.message, `${NEWER_CONTRACT} waits: a contract migration`, 'and what waits, and why');
      t.match(partial.message, `pid ${old.pid} on ${hostname()}`, 'naming the server: its pid and host');
      t.match(partial.message, /svc \d+\.\d+\.\d+/, 'its version');
      t.match(partial.message, /since \d{4}-\d\d-\d\dT\d\d:\d\d/, 'since when it runs');
      t.match(
        partial.message,
        /then run `svc migrate` again once the last node of that build has stopped/,
        'and what to do next',
      );
      t.same(
        await appliedMigrations(url),
        [...before, NEWER_EXPAND],
        'the expand migration, and only it, applied',
      );
      t.same(
        await withDatabase(url, (db) =>
          db.knex('migration_kinds').whereIn('name', [NEWER_EXPAND, NEWER_CONTRACT]).orderBy('name'),
        ),
        [{ name: NEWER_EXPAND, kind: 'expand' }],
        'its kind is recorded for the older build to read; nothing of the deferred one',
      );

      const json = await runCli(['migrate', '--json'], { home, root: newer });
      t.equal(json.code, 75, 'run again under the same server: exit 75 again');
      t.match(JSON.parse(json.stdout), {
        error: { code: 'server_running', applied: [], deferred: [NEWER_CONTRACT] },
      });
      t.match(JSON.parse(json.stdout).error.message, /^Nothing was applied\./);
      const install = await runCli(installArgs(engine, url), { home, root: newer });
      t.equal(install.code, 75, 'svc install of the newer build (what install.sh runs) defers it too');
      t.match(install.message, `${NEWER_CONTRACT} waits`);
      t.same(
        await appliedMigrations(url),
        [...before, NEWER_EXPAND],
        'the contract migration is still not applied',
      );

      // Three heartbeats of the old server after the expand step: it saw the schema and kept its roles.
      const beatAfter = async () =>
        withDatabase(url, async (db) =>
          Number((await db.knex('serve_instances').where({ pid: old.pid }).first())?.heartbeat_at ?? 0),
        );
      const seen = await beatAfter();
      t.ok(await waitFor(async () => ((await beatAfter()) >= seen + 3000 ? true : undefined), 30_000));
      const roles = supervisorStateOf(home, old)?.children.map((child) => [child.role, child.status]);
      t.same(
        roles,
        [
          ['api', 'running'],
          ['scheduler', 'running'],
          ['dispatcher', 'running'],
        ],
        'the old server runs its API, scheduler and dispatcher',
      );
      const status = await runCli(['status', '--json'], { home });
      t.match(
        JSON.parse(status.stdout).database,
        { schema_state: 'ahead', unknown_migrations: [NEWER_EXPAND], schema_fits_build: true },
        'svc status of the old build: ahead, by a migration it runs on',
      );
      t.match(
        // Wrapped at the 80 columns a command without a terminal gets.
        (await runCli(['status'], { home })).stdout.replace(/\s+/g, ' '),
        `it has ${NEWER_EXPAND}; expand migrations this build runs on: an upgrade is under way, finish it`,
      );
      const link = await old.request('POST', '/v1/links', { key, body: linkBody() });
      t.equal(link.status, 200, 'its API writes');
      const synced = await waitFor(
        () =>
          withDatabase(url, async (db) =>
            Number((await db.knex('links').where({ id: link.body.id }).first())?.sync_successes) >= 1
              ? true
              : undefined,
          ),
        60_000,
      );
      t.ok(synced, 'its scheduler syncs the new link');
      const delivered = await waitFor(
        async () => receiver.received.find((r) => r.event?.data?.id === link.body.id) ?? undefined,
        60_000,
      );
      t.ok(delivered, "its dispatcher delivers the link's events");
      t.same(serveErrors(old), [], 'and it logged no error');

      // The newer build's svc serve starts beside it: only its contract migration is pending.
      const upgraded = await startServe(t, { home, root: newer, env: FAST });
      t.equal((await upgraded.request('GET', '/health')).status, 200, 'the newer build serves');

      old.process.kill('SIGTERM');
      t.same(await old.exited, { code: 0, signal: null }, 'the old server stops cleanly');
      const migrated = await runCli(['migrate'], { home, root: newer });
      t.equal(migrated.code, 0, 'with no server of the old build left, the contract step applies');
      t.match(migrated.stdout, `Applied ${NEWER_CONTRACT}`);
      t.same(await appliedMigrations(url), [...before, NEWER_EXPAND, NEWER_CONTRACT]);

      const after = await upgraded.request('POST', '/v1/links', { key, body: linkBody() });
      t.equal(after.status, 200, 'the newer build writes on the contracted schema');
      t.ok(
        await waitFor(
          async () => receiver.received.find((r) => r.event?.data?.id === after.body.id) ?? undefined,
          60_000,
        ),
        'and delivers',
      );
      t.same(serveErrors(upgraded), [], 'and logged no error');

      const refused = await runCli(['serve', '--port', String(await freePort())], {
        home,
        env: { SVC_METRICS_PORT: '0' },
        timeoutMs: HANG_GUARD_MS,
      });
      t.not(refused.code, 0, 'the old build no longer starts on the contracted schema');
      t.match(refused.message, `newer than this version of svc (it has ${NEWER_CONTRACT})`);
    },
  );

  await t.test('with no server of another build, every migration applies at once', async (t) => {
    const { database, home } = await installedHome(t, engine);
    const newer = newerBuild(t, [NEWER_EXPAND, NEWER_CONTRACT]);
    const migrated = await runCli(['migrate'], { home, root: newer });
    t.equal(migrated.code, 0);
    t.same((await appliedMigrations(database.url)).slice(-3), [
      migrationNames().at(-1),
      NEWER_EXPAND,
      NEWER_CONTRACT,
    ]);
  });
});
