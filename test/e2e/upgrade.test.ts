import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import {
  REPO_ROOT,
  appliedMigrations,
  installArgs,
  killGroup,
  runCli,
  runCliJson,
  serveErrors,
  serveLogLines,
  startServe,
  supervisorStateOf,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { engines, forEachEngine, freshDatabase, setTimeLimit, type EngineName } from '../helpers/harness.js';
import { NEWER_MIGRATION, newerBuild } from '../helpers/other-build.js';

/**
 * An upgrade never migrates under a running `svc serve` of another build (issue 28, item 12): the newer
 * build's `svc migrate` and `svc install` refuse while one runs, a server killed without stopping holds them
 * back only until its heartbeat lapses, and a server whose schema is moved ahead anyway stops its scheduler
 * and dispatcher with one line.
 */

const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;

/** A fresh database with this build installed. */
async function installed(t: Test, engine: EngineName) {
  const database = await freshDatabase(t, engine);
  await runCliJson(t, installArgs(engine, database.url), { home: database.home });
  return database;
}

/** This build installed and serving, its heartbeat every `heartbeatSeconds`; and a newer build beside it. */
async function servingBesideNewer(t: Test, engine: EngineName, heartbeatSeconds: string) {
  const { url, home } = await installed(t, engine);
  const serve = await startServe(t, { home, env: { SVC_SUPERVISOR_HEARTBEAT_SECONDS: heartbeatSeconds } });
  return { url, home, serve, newer: newerBuild(t) };
}

// Per engine: two builds, five svc serve processes and three waits for heartbeats to lapse (about 60 s idle;
// 195 s of the default 300 for both engines on a loaded machine).
setTimeLimit(t, engines().length * 240_000);

/** The migration that made serve_instances: a build from before it records no heartbeat. */
const SERVE_INSTANCES_MIGRATION = '20261127000020_serve_instances';

/** The schema as the build before `name` left it: `name` and every later migration undone, newest first. */
async function undoFrom(url: string, name: string): Promise<void> {
  const names = migrationNames();
  const later = names.slice(names.indexOf(name)).reverse();
  await withDatabase(url, async (db) => {
    for (const migration of later) {
      const module = (await import(`../../migrations/${migration}.js`)) as {
        down(knex: unknown): Promise<void>;
      };
      await module.down(db.knex);
      await db.knex('knex_migrations').where({ name: migration }).delete();
    }
  });
}

forEachEngine(t, async (t, engine) => {
  const head = migrationNames().at(-1)!;

  await t.test(
    'a newer build refuses to migrate under a running svc serve, and migrates once it stopped',
    async (t) => {
      const { url, home, serve, newer } = await servingBesideNewer(t, engine, '1');
      const before = await appliedMigrations(url);

      const refused = await runCli(['migrate'], { home, root: newer });
      t.not(refused.code, 0, 'svc migrate of the newer build exits non-zero');
      t.equal(refused.stderr.trim().split('\n').length, 1, 'with one line');
      t.match(refused.message, `pid ${serve.pid}`, 'naming the server: its pid');
      t.match(refused.message, hostname(), 'its host');
      t.match(refused.message, `svc ${VERSION}`, 'its version');
      t.match(refused.message, head, 'the last migration it knows');
      t.match(refused.message, /since \d{4}-\d\d-\d\dT\d\d:\d\d/, 'since when it runs');
      t.match(refused.message, /systemctl stop svc/, 'and how to stop it');
      t.match(refused.message, /then run `svc migrate`/, 'and what to run next');
      t.match(refused.message, /3 s/, 'and how long a dead server holds a migration back');
      t.same(await appliedMigrations(url), before, 'nothing was migrated');

      const json = await runCli(['migrate', '--json'], { home, root: newer });
      t.equal(JSON.parse(json.stdout).error.code, 'server_running', '--json says why with a stable code');

      const install = await runCli(installArgs(engine, url), { home, root: newer });
      t.not(install.code, 0, 'svc install of the newer build (what install.sh runs) refuses too');
      t.match(install.message, `pid ${serve.pid}`);
      t.same(await appliedMigrations(url), before, 'and migrates nothing');

      t.equal((await serve.request('GET', '/health')).status, 200, 'the running server was left alone');
      t.same(serveErrors(serve), [], 'and logged no error');

      serve.process.kill('SIGTERM');
      t.same(await serve.exited, { code: 0, signal: null }, 'svc serve stops cleanly');

      const migrated = await runCli(['migrate'], { home, root: newer });
      t.equal(migrated.code, 0, 'with no server running, the newer build migrates');
      t.same(await appliedMigrations(url), [...before, NEWER_MIGRATION]);

      const upgraded = await startServe(t, { home, root: newer });
      t.equal((await upgraded.request('GET', '/health')).status, 200, 'and the newer build serves');
    },
  );

  await t.test(
    'a server killed without stopping holds a migration back until its heartbeat lapses',
    async (t) => {
      const { url, home, serve, newer } = await servingBesideNewer(t, engine, '3');
      killGroup(serve.pid, 'SIGKILL');
      await serve.exited;
      const killedAt = Date.now();

      const refused = await runCli(['migrate'], { home, root: newer });
      t.not(refused.code, 0, 'just after the kill, the server still counts');
      t.match(refused.message, `pid ${serve.pid}`);
      t.match(refused.message, /9 s/, 'and the message says how long it will (3 heartbeats of 3 s)');

      const migrated = await waitFor(
        async () => {
          const result = await runCli(['migrate'], { home, root: newer });
          return result.code === 0 ? result : undefined;
        },
        30_000,
        500,
      );
      t.ok(migrated, 'once its heartbeat has lapsed, the newer build migrates');
      t.ok(Date.now() - killedAt < 20_000, 'within 9 s of its last heartbeat (and the runs of svc migrate)');
      t.ok((await appliedMigrations(url)).includes(NEWER_MIGRATION));
    },
  );

  await t.test(
    'the first upgrade: a server that records no heartbeat is seen on its host through its state file',
    async (t) => {
      // A server that renews its row only every 300 s: with serve_instances and every later migration undone,
      // the database looks as a build from before serve_instances left it, beside a running svc serve.
      const { url, home, serve, newer } = await servingBesideNewer(t, engine, '300');
      await undoFrom(url, SERVE_INSTANCES_MIGRATION);

      const refused = await runCli(['migrate'], { home, root: newer });
      t.not(refused.code, 0, 'svc migrate of the newer build refuses');
      t.match(refused.message, `pid ${serve.pid} on ${hostname()}`, 'naming the server');
      t.match(refused.message, /records no heartbeat/, 'and saying its build is unknown');
      t.match(refused.message, /systemctl stop svc/);
      t.notOk((await appliedMigrations(url)).includes(NEWER_MIGRATION), 'nothing was migrated');

      serve.process.kill('SIGTERM');
      await serve.exited;
      const migrated = await runCli(['migrate'], { home, root: newer });
      t.equal(migrated.code, 0, 'once it has stopped, the newer build migrates');
      t.same(
        (await appliedMigrations(url)).slice(-2),
        [head, NEWER_MIGRATION],
        'every migration is applied again',
      );
    },
  );

  await t.test(
    'a server whose schema is moved ahead stops its scheduler and dispatcher with one line',
    async (t) => {
      const { url, home } = await installed(t, engine);
      const serve = await startServe(t, { home, env: { SVC_SUPERVISOR_HEARTBEAT_SECONDS: '1' } });
      // What a newer build's migration leaves when it runs anyway (a second node, or by hand), with no kind
      // recorded for it in migration_kinds: it counts as contract.
      await withDatabase(url, async (db) => {
        await db.knex.schema.createTable('newer_build_probe', (table) => table.string('id', 32).primary());
        await db
          .knex('knex_migrations')
          .insert({ name: NEWER_MIGRATION, batch: 99, migration_time: new Date() });
      });

      const stopped = await waitFor(async () => {
        const state = supervisorStateOf(home, serve);
        const workers = state?.children.filter((child) => child.role !== 'api') ?? [];
        return workers.length === 2 && workers.every((child) => child.status === 'stopped')
          ? state
          : undefined;
      }, 20_000);
      t.ok(stopped, 'the scheduler and the dispatcher stop, and are not restarted');
      t.equal(
        stopped?.children.find((child) => child.role === 'api')?.status,
        'running',
        'the API keeps running',
      );
      t.equal((await serve.request('GET', '/health')).status, 200, 'and answers');

      // Two more heartbeats: the line is not repeated.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      const notices = serveLogLines(serve).filter((line) => /schema/i.test(line.msg));
      t.equal(notices.length, 1, 'one log line says so');
      t.match(notices[0]?.msg, NEWER_MIGRATION, 'naming what it does not know');
      t.match(notices[0]?.msg, /stopped its scheduler and dispatcher; its API keeps serving/);
      t.same(
        serveErrors(serve),
        notices.map((line) => line.msg),
        'and it is the only error logged: no write failed',
      );

      serve.process.kill('SIGTERM');
      t.same(await serve.exited, { code: 0, signal: null }, 'svc serve still stops cleanly');
    },
  );
});
