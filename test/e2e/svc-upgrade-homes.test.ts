import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { runningSupervisors, isAlive } from '../../src/processes/status.js';
import {
  freeBankPorts,
  freePort,
  installArgs,
  killGroup,
  runCli,
  runCliJson,
  startServe,
  waitFor,
} from '../helpers/cli.js';
import { spawnOwned } from '../helpers/processes.js';
import { engines, forEachEngine, freshDatabase, request, setTimeLimit } from '../helpers/harness.js';
import { THIS_VERSION, nextPatch, previousRelease, pullNextRelease } from '../helpers/release.js';

/*
 * `svc upgrade` finds every `svc serve` of its checkout, whatever its home (issue 45, item 1). Someone who
 * followed the guide serves `~/svc-demo`; a plain `svc upgrade` (home ~/.svc, where nothing runs) swapped the
 * checkout's dist/ under that server. Here one checkout serves home B; the upgrade of home A refuses, naming
 * B's server and `svc upgrade --home B`, and changes nothing. With a server on A as well, it refuses naming B's
 * and the commands that stop, migrate and start it again. Between `git pull` and the upgrade no command prints
 * oclif's "Mismatched version … plugin manifest" warning. Last, B's server runs in a terminal: the upgrade
 * brings it back detached, and says so, with the command that has it in a terminal again, there and in that
 * terminal.
 */

// Per engine: two installs, three serves, a handful of CLI runs, and one upgrade with its build of the next
// release (tsc, ~25 s idle; minutes on a loaded 2-core machine).
setTimeLimit(t, engines().length * 600_000);

const NEXT = nextPatch(THIS_VERSION);

forEachEngine(t, async (t, engine) => {
  const checkout = previousRelease(t);
  const a = await freshDatabase(t, engine);
  const b = await freshDatabase(t, engine);
  for (const target of [a, b])
    await runCliJson(t, installArgs(engine, target.url), { home: target.home, root: checkout });
  const serveB = await startServe(t, { home: b.home, root: checkout });
  // svc upgrade starts svc serve detached, in a group of its own: stopped when the test ends.
  t.teardown(async () => {
    const pids = [a.home, b.home].flatMap((home) => runningSupervisors(home).map((state) => state.pid));
    for (const pid of pids) killGroup(pid, 'SIGTERM');
    await waitFor(async () => (pids.every((pid) => !isAlive(pid)) ? true : undefined), 15_000);
    for (const pid of pids) killGroup(pid, 'SIGKILL');
  });
  const installedBuild = () =>
    (JSON.parse(readFileSync(join(checkout, 'dist', 'build-info.json'), 'utf8')) as { version: string })
      .version;

  pullNextRelease(checkout, NEXT);

  await t.test("between git pull and the upgrade, no command prints oclif's manifest warning", async (t) => {
    const status = await runCli(['status'], { home: b.home, root: checkout });
    t.equal(status.code, 0, 'svc status runs');
    t.notMatch(status.stderr, /Mismatched version|manifest/, 'and prints no manifest warning');
    const version = await runCli(['--help'], { home: b.home, root: checkout });
    t.notMatch(version.stderr, /Mismatched version/, 'nor does --help');
  });

  await t.test('svc upgrade of a home where nothing runs names the home that serves', async (t) => {
    const refused = await runCli(['upgrade'], { home: a.home, root: checkout, timeoutMs: 120_000 });
    t.equal(refused.code, 1, 'svc upgrade exits 1');
    t.match(refused.message, `pid ${serveB.pid} of ${b.home}`, "it names the other home's server");
    t.match(
      refused.message,
      `No svc serve runs from ${a.home}`,
      'says nothing runs from the home it was given',
    );
    t.match(refused.message, `Upgrade the one that serves: svc upgrade --home ${b.home}`, 'and the command');
    t.equal(installedBuild(), THIS_VERSION, 'dist/ is not swapped');
    t.notOk(existsSync(join(checkout, '.svc-upgrade', 'next', 'dist')), 'nothing was built');
    t.equal((await request(serveB.url, 'GET', '/health')).status, 200, "the other home's server serves on");
    const json = await runCli(['upgrade', '--json'], { home: a.home, root: checkout, timeoutMs: 120_000 });
    t.match(
      JSON.parse(json.stdout),
      { outcome: 'failed', failure: { step: 'check' }, error: { message: /svc upgrade --home / } },
      '--json says the same',
    );
  });

  await t.test(
    'with a server on each home, it names the other and how to stop, migrate and restart it',
    async (t) => {
      const serveA = await startServe(t, { home: a.home, root: checkout });
      const refused = await runCli(['upgrade'], { home: a.home, root: checkout, timeoutMs: 120_000 });
      t.equal(refused.code, 1, 'svc upgrade exits 1');
      t.match(refused.message, `pid ${serveB.pid} of ${b.home}`, "it names the other home's server");
      t.notMatch(refused.message, `pid ${serveA.pid}`, "and not this home's");
      t.match(refused.message, `kill -TERM ${serveB.pid}`, 'how to stop it');
      t.match(refused.message, `svc upgrade --home ${a.home} again`, 'to upgrade this home then');
      t.match(refused.message, `svc migrate --home ${b.home}`, 'to migrate the other');
      t.match(
        refused.message,
        new RegExp(`cd ${checkout}\\S* && .*SVC_HOME=${b.home} .*bin/run\\.js serve --port ${serveB.port}`),
        'and to start it again as it ran',
      );
      t.equal(installedBuild(), THIS_VERSION, 'dist/ is not swapped');
      for (const serve of [serveA, serveB])
        t.equal((await request(serve.url, 'GET', '/health')).status, 200, `pid ${serve.pid} serves on`);
      for (const serve of [serveA, serveB]) {
        serve.process.kill('SIGTERM');
        await serve.exited;
      }
    },
  );

  await t.test(
    'a server started in a terminal comes back detached, and both say how to have it there again',
    async (t) => {
      // `svc serve` in a terminal, as a person runs it: script(1) gives it a pseudo-terminal, whose screen is
      // script's output.
      const port = await freePort();
      const bankPort = await freeBankPorts();
      let screen = '';
      const terminal = spawnOwned(
        'script',
        [
          '-qfec',
          // The shell keeps the terminal once svc serve has stopped, as a person's shell does.
          `${process.execPath} ${join(checkout, 'bin', 'run.js')} serve --port ${port}; echo; sleep 120`,
          '/dev/null',
        ],
        {
          cwd: checkout,
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            HOME: process.env.HOME ?? '/root',
            TERM: 'xterm',
            SVC_HOME: b.home,
            SVC_SANDBOX_CONSENT_BANK_PORT: String(bankPort),
            SVC_METRICS_PORT: String(await freePort()),
            SVC_SUPERVISOR_SHUTDOWN_TIMEOUT_SECONDS: '5',
          },
          stdio: ['pipe', 'pipe', 'pipe'],
        },
        t,
      );
      terminal.stdout!.on('data', (chunk: Buffer) => (screen += chunk.toString()));
      const url = `http://127.0.0.1:${port}`;
      const up = await waitFor(
        async () =>
          (await request(url, 'GET', '/health').catch(() => null))?.status === 200 ? true : undefined,
        120_000,
      );
      t.ok(up, 'svc serve answers, in its terminal');
      const [before] = runningSupervisors(b.home);
      t.ok(before, 'its supervisor is recorded');
      // The supervisor prints its start line once every child is up, a moment after the API answers.
      await waitFor(async () => (screen.includes('Ctrl-C stops it') ? true : undefined), 20_000).catch(
        () => undefined,
      );
      t.match(screen, 'Ctrl-C stops it', 'the terminal shows its start line');

      const done = await runCli(['upgrade'], { home: b.home, root: checkout, timeoutMs: 480_000 });
      t.equal(done.code, 0, `svc upgrade --home B exits 0 (${done.message.slice(0, 400)})`);
      const [after] = runningSupervisors(b.home);
      t.ok(after && after.pid !== before!.pid, 'a new supervisor serves B');
      t.equal((await request(url, 'GET', '/health')).status, 200, 'on the same port');
      t.equal(installedBuild(), NEXT, 'of the new build');
      const note =
        /Note: svc serve pid (\d+) ran in the terminal (\/dev\/[\w/]+); .* as pid (\d+) .*To run it in a terminal again: kill -TERM (\d+); then, once it has exited: (cd .*)$/m.exec(
          done.stdout,
        );
      t.ok(note, `svc upgrade says the server came back detached (${done.stdout.slice(-600)})`);
      t.equal(Number(note?.[1]), before!.pid, 'naming the one that ran in the terminal');
      t.equal(Number(note?.[3]), after!.pid, 'its new pid');
      t.equal(Number(note?.[4]), after!.pid, 'which to stop');
      t.match(
        note?.[5],
        new RegExp(`SVC_HOME=${b.home} .*bin/run\\.js serve --port ${port}$`),
        'and the command that runs it as before',
      );
      const told = await waitFor(
        async () => (screen.includes('svc upgrade: svc serve pid') ? true : undefined),
        10_000,
      );
      t.ok(told, 'the terminal it ran in says the same');
    },
  );
});
