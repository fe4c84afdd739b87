import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { buildLabel, type BuildInfo } from '../../src/processes/build-info.js';
import { runningSupervisors, isAlive } from '../../src/processes/status.js';
import { STEP_NAMES } from '../../src/upgrade/plan.js';
import {
  installArgs,
  killGroup,
  runCli,
  runCliJson,
  startServe,
  waitFor,
  withDatabase,
  type CliResult,
} from '../helpers/cli.js';
import {
  HANG_GUARD_MS,
  engines,
  forEachEngine,
  freshDatabase,
  linkBody,
  request,
  setTimeLimit,
} from '../helpers/harness.js';
import {
  BLOCKING_NAME,
  NEXT_MIGRATION,
  THIS_VERSION,
  nextPatch,
  previousRelease,
  pullNextRelease,
} from '../helpers/release.js';

/*
 * `svc upgrade` on a box as an operator has it (issue 32, item 1): this release installed from its checkout
 * and serving, with an organisation, keys and a sandbox link with movements; the next release's sources pulled
 * into the checkout (a version, a CHANGELOG section, one migration). First the new migration throws on the
 * box's data: the upgrade names the step, and the previous build serves again on the restored data without
 * the migration. Then, the data fixed, the upgrade goes through: the new version serves the same data, and
 * the CHANGELOG's new section is printed.
 */

// Per engine: one build of the next release (tsc, ~25 s idle, reused by the second run), a backup, two
// restores of serve and one restore of the database. About 90 s idle; room for a loaded 2-core machine.
setTimeLimit(t, engines().length * 420_000);

const NEXT = nextPatch(THIS_VERSION);
const UPGRADE_TIMEOUT_MS = 360_000;
const FAST = {
  SVC_SCHEDULER_CRON: '* * * * * *',
  SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
  SVC_SUPERVISOR_HEARTBEAT_SECONDS: '1',
};

/** The step lines svc upgrade printed (`✓ check  12.3 s`), in order. */
function stepLines(output: string): { mark: string; name: string; seconds: number }[] {
  return [...output.matchAll(/^([✓✗]) ([a-z:]+) {2}(?:(\d+) min )?(\d+(?:\.\d)?) s/gm)].map((match) => ({
    mark: match[1]!,
    name: match[2]!,
    seconds: Number(match[3] ?? 0) * 60 + Number(match[4]),
  }));
}

interface Listed {
  id: string;
}

forEachEngine(t, async (t, engine) => {
  const checkout = previousRelease(t);
  const database = await freshDatabase(t, engine);
  const { home, url } = database;
  // svc upgrade starts svc serve detached, in a group of its own: stopped when the test ends.
  t.teardown(async () => {
    const pids = runningSupervisors(home).map((state) => state.pid);
    for (const pid of pids) killGroup(pid, 'SIGTERM');
    await waitFor(async () => (pids.every((pid) => !isAlive(pid)) ? true : undefined), 15_000).catch(
      () => undefined,
    );
    for (const pid of pids) killGroup(pid, 'SIGKILL');
  });

  const installed = await runCliJson<{ organisation: { id: string }; keys: { secret: string } }>(
    t,
    installArgs(engine, url),
    { home, root: checkout },
  );
  const key = installed.keys.secret;
  // The installed build as svc status names it (this checkout's commit when it was built in a git checkout).
  const previousLabel = buildLabel(
    JSON.parse(readFileSync(join(checkout, 'dist', 'build-info.json'), 'utf8')) as BuildInfo,
  );
  const serve = await startServe(t, { home, root: checkout, env: FAST });
  const api = (method: string, path: string, body?: unknown) =>
    request(serve.url, method, path, { key, body });

  const created = await api('POST', '/v1/links', linkBody({ external_user_id: 'upgrade-1' }));
  t.equal(created.status, 200, `a sandbox link (${created.text.slice(0, 200)})`);
  const linkId = (created.body as { id: string }).id;
  t.ok(
    await waitFor(
      () =>
        withDatabase(url, async (db) => {
          const row = await db.knex('links').where({ id: linkId }).first('sync_successes');
          return row && Number(row.sync_successes) >= 1 ? true : undefined;
        }),
      HANG_GUARD_MS,
    ),
    'synced',
  );
  /** The link, its accounts and their movements, as a client reads them through the API. */
  const whatTheApiShows = async () => {
    const link = await api('GET', `/v1/links/${linkId}`);
    const accounts = await api('GET', `/v1/accounts?link_id=${linkId}`);
    const movements: Record<string, unknown> = {};
    for (const account of accounts.body as Listed[])
      movements[account.id] = (await api('GET', `/v1/accounts/${account.id}/movements?per_page=100`)).body;
    return { link: link.status, linkId: (link.body as Listed).id, accounts: accounts.body, movements };
  };
  const before = await whatTheApiShows();
  t.ok(
    Object.values(before.movements).some((list) => (list as unknown[]).length > 0),
    'with accounts and movements',
  );
  const applied = () =>
    withDatabase(url, async (db) =>
      (await db.knex('knex_migrations').select('name')).map((row: { name: string }) => row.name),
    );
  const version = async () => {
    const status = await runCliJson<{ servers: { version: string; pid: number }[] }>(t, ['status'], {
      home,
      root: checkout,
    });
    return status.servers.map((server) => server.version);
  };

  // The operator pulls the next release.
  pullNextRelease(checkout, NEXT);
  const upgrade = (): Promise<CliResult> =>
    runCli(['upgrade'], { home, root: checkout, timeoutMs: UPGRADE_TIMEOUT_MS });

  await t.test('the new migration throws: the previous build serves again, on its data', async (t) => {
    await withDatabase(url, (db) =>
      db.knex('organisations').where({ id: installed.organisation.id }).update({ name: BLOCKING_NAME }),
    );
    const failed = await upgrade();
    t.equal(failed.code, 1, 'svc upgrade exits 1');
    t.notOk(failed.timedOut);
    const steps = stepLines(failed.stdout);
    t.same(
      steps.map((step) => `${step.mark} ${step.name}`),
      [
        '✓ check',
        '✓ backup',
        '✓ stop',
        '✓ swap',
        '✗ migrate',
        '✓ rollback:stop',
        '✓ rollback:swap',
        '✓ rollback:restore',
        '✓ rollback:start',
        '✓ rollback:health',
      ],
      'each step printed as it finished, the failed one marked, then the rollback',
    );
    t.match(
      failed.stdout,
      /built the new sources into .*\.svc-upgrade\/next/,
      'the check built the new sources',
    );
    t.match(failed.message, /failed at step migrate/, 'the error names the step');
    t.match(failed.message, `is named ${BLOCKING_NAME}`, 'and why');
    t.match(failed.message, `back on ${THIS_VERSION}`, 'and that the box is back on the previous version');

    t.equal((await request(serve.url, 'GET', '/health')).status, 200, 'the previous build answers /health');
    t.same(await version(), [previousLabel], 'svc status shows one server, of the previous version');
    t.notOk((await applied()).includes(NEXT_MIGRATION), 'the new migration is not applied');
    t.same(await whatTheApiShows(), before, 'the same link, accounts and movements through the API');
    const names = await withDatabase(url, (db) => db.knex('organisations').pluck('name'));
    t.ok(names.includes(BLOCKING_NAME), 'the data is as the backup had it');
  });

  await t.test('the data fixed, svc upgrade goes through', async (t) => {
    await withDatabase(url, (db) =>
      db.knex('organisations').where({ id: installed.organisation.id }).update({ name: 'Renamed' }),
    );
    const done = await upgrade();
    t.equal(done.code, 0, `svc upgrade exits 0 (${done.message.slice(0, 400)})`);
    const steps = stepLines(done.stdout);
    t.same(
      steps.map((step) => `${step.mark} ${step.name}`),
      STEP_NAMES.map((name) => `✓ ${name}`),
      'the seven steps, each printed with its time',
    );
    t.comment(`step times: ${steps.map((step) => `${step.name} ${step.seconds} s`).join(', ')}`);
    t.match(
      done.stdout,
      /already built in .* \(same sources\): reused/,
      'the staged build of the first run was reused',
    );
    t.match(done.stdout, `applied ${NEXT_MIGRATION}`, 'the migrate step names the migration it applied');
    t.match(done.stdout, new RegExp(`Upgraded ${THIS_VERSION} → ${NEXT} in \\d+ s`), 'the summary line');
    t.match(done.stdout, `## [${NEXT}]`, 'the CHANGELOG section of the new version');
    t.match(done.stdout, 'The upgrade probe table');
    t.notMatch(done.stdout, `## [${THIS_VERSION}]`, 'and not the one of the version it came from');

    const backups = readdirSync(join(home, 'backups'));
    t.ok(
      backups.some((name) => name.includes(`${THIS_VERSION}`) && name.includes(`-to-${NEXT}-`)),
      `a backup named after both versions (${backups.join(', ')})`,
    );
    t.ok(existsSync(join(checkout, '.svc-upgrade', 'previous', 'dist')), 'the previous build is kept');

    t.equal((await request(serve.url, 'GET', '/health')).status, 200, 'the new build answers /health');
    t.same(await version(), [NEXT], 'svc status shows one server, of the new version');
    const cli = await runCli(['--version'], { home, root: checkout });
    t.match(cli.stdout, `svc ${NEXT}`, 'svc --version names the new version');
    t.ok((await applied()).includes(NEXT_MIGRATION), 'the new migration is applied');
    t.same(await whatTheApiShows(), before, 'the same link, accounts and movements through the API');

    const again = await runCliJson<{ outcome: string; steps: { name: string; seconds: number }[] }>(
      t,
      ['upgrade', '--dry-run'],
      { home, root: checkout },
    );
    t.equal(again.outcome, 'nothing_to_do', 'run again, there is nothing to do');
    t.match(again.steps, [{ name: 'check', seconds: Number }], '--json gives the steps with their times');
  });
});
