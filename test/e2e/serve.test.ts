import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import type { ApplianceStatus, ProcessStatus } from '../../src/processes/status.js';
import type { ChildState, SupervisorState } from '../../src/processes/status.js';
import { maskUrl } from '../../src/db/database-url.js';
import {
  CLI_ENTRY,
  REPO_ROOT,
  cliEnv,
  freeBankPorts,
  freePort,
  killGroup,
  oneLine,
  installArgs,
  isRunning,
  groupIsAlive,
  runCli,
  runCliJson,
  startServe,
  waitFor,
  withDatabase,
  within,
  type ServeProcess,
} from '../helpers/cli.js';
import { HANG_GUARD_MS, forEachEngine, freshDatabase, request } from '../helpers/harness.js';
import { spawnOwned } from '../helpers/processes.js';

/** `script` (util-linux) gives serve a pseudo-terminal. */
const hasScript = spawnSync('script', ['--version']).status === 0;

async function status(t: Test, home: string): Promise<ApplianceStatus> {
  return runCliJson<ApplianceStatus>(t, ['status'], { home });
}

/** The processes of this `svc serve`, by role. */
async function children(t: Test, home: string, serve: ServeProcess): Promise<Map<string, ProcessStatus>> {
  const current = await status(t, home);
  return new Map(
    current.processes.filter((p) => p.supervisor_pid === serve.pid).map((p) => [p.role, p] as const),
  );
}

/** The children of this `svc serve` by role, read from its state file (what `svc status` reads) without a CLI run per poll. */
function supervisedChildren(home: string, serve: ServeProcess): Map<string, ChildState> {
  try {
    const state = JSON.parse(
      readFileSync(join(home, 'run', `serve-${serve.pid}.json`), 'utf8'),
    ) as SupervisorState;
    return new Map(state.children.map((child) => [child.role, child] as const));
  } catch {
    return new Map(); // not written yet
  }
}

/** The supervisor's promise: a dead child is started again this soon after it saw it die (delays start at 250 ms). */
const RESTART_WITHIN_MS = 5000;
/** How long the test waits for a new child to answer: a slow machine starts a Node process slowly. */
const SLOW_START_MS = HANG_GUARD_MS;

/**
 * `kill -9` one child, then expect the supervisor to start a new one within 5 seconds by its own clock (from
 * the exit it recorded to the new child's start), with one restart recorded and the SIGKILL as its last exit,
 * and the API answering.
 */
async function killAndExpectRestart(t: Test, home: string, serve: ServeProcess, role: string, key: string) {
  const before = supervisedChildren(home, serve).get(role);
  t.ok(before?.pid, `the ${role} has a pid`);
  if (!before?.pid) return;
  const others = [...supervisedChildren(home, serve).values()].filter((p) => p.role !== role);

  process.kill(before.pid, 'SIGKILL');
  const after = await waitFor(async () => {
    const now = supervisedChildren(home, serve).get(role);
    return now?.pid && now.pid !== before.pid && now.status === 'running' ? now : undefined;
  }, SLOW_START_MS);
  t.ok(after, `a new ${role} is running`);
  if (!after) return;
  const restartMs = Date.parse(after.started_at!) - Date.parse(after.last_exit_at!);
  t.ok(
    restartMs >= 0 && restartMs <= RESTART_WITHIN_MS,
    `the supervisor started it ${restartMs} ms after it saw the exit`,
  );
  t.not(after.pid, before.pid, 'with a new pid');
  t.ok(isRunning(after.pid!), 'which is alive');
  t.notOk(isRunning(before.pid), 'and the killed one is gone');
  t.equal(after.restarts, before.restarts + 1, 'one restart is counted');
  t.match(after.last_exit, /SIGKILL/, 'the last exit names SIGKILL');

  const untouched = supervisedChildren(home, serve);
  for (const other of others) {
    t.equal(untouched.get(other.role)?.pid, other.pid, `the ${other.role} was left alone`);
  }
  const health = await serve.request('GET', '/health');
  t.equal(health.status, 200, 'the API answers again');
  const openapi = await serve.request('GET', '/v1/openapi.json', { key });
  t.equal(openapi.status, 200, 'and authenticates the key');
}

forEachEngine(t, async (t, engine) => {
  const { url, home } = await freshDatabase(t, engine);
  const installed = await runCliJson(t, installArgs(engine, url), { home });
  const secretKey: string = installed.keys.secret;

  await t.test('a full serve: API, status, kill -9 recovery and graceful stop', async (t) => {
    const serve = await startServe(t, { home });

    await t.test('the API answers with the printed test secret key', async (t) => {
      const health = await serve.request('GET', '/health');
      t.equal(health.status, 200);
      t.same(health.body, { status: 'ok' });
      const openapi = await serve.request('GET', '/v1/openapi.json', { key: secretKey });
      t.equal(openapi.status, 200, 'GET /v1/openapi.json with the secret key is 200');
      t.match(openapi.body, { openapi: /^3\.1/, info: { version: '1.0.0' } });
      const anonymous = await serve.request('GET', '/v1/openapi.json');
      t.equal(anonymous.status, 401, 'and 401 without a key');
      const publishable = await serve.request('GET', '/v1/openapi.json', { key: installed.keys.publishable });
      t.equal(publishable.status, 403, 'and 403 with the publishable key');
      // The bank starts after the API is ready (it takes a second of its own), its pages on an origin of
      // their own: the mTLS port + 2 on loopback (issue 44, item 7).
      const pages = `http://127.0.0.1:${serve.consentBankPort + 2}`;
      const bank = await waitFor(async () => {
        const answer = await fetch(`${pages}/sandbox/consent-bank/.well-known/openid-configuration`).catch(
          () => null,
        );
        return answer?.status === 200 ? { status: 200, body: await answer.json() } : undefined;
      }, SLOW_START_MS).then((answer) => answer ?? { status: 404, body: null });
      t.equal(
        bank.status,
        200,
        'the simulated consent bank answers on its own origin (svc install made its CA)',
      );
      t.equal(
        (await serve.request('GET', '/sandbox/consent-bank/.well-known/openid-configuration')).status,
        404,
        "and never on the API's and console's",
      );
      t.match(
        bank.body,
        {
          issuer: `${pages}/sandbox/consent-bank`,
          mtls_endpoint_aliases: {
            token_endpoint: /^https:\/\/127\.0\.0\.1:\d+\/sandbox\/consent-bank\/token$/,
          },
        },
        'its machine face on its own loopback port',
      );
    });

    await t.test('no line of the start reads like an error (issue 45, item 7)', async (t) => {
      // Both simulated banks registered the appliance (their discovery and JWKS read through the API).
      const registered = await waitFor(
        () =>
          withDatabase(url, async (db) => {
            const rows = await db.knex('consent_clients').count({ n: '*' }).first();
            return Number(rows?.n ?? 0) >= 2 ? true : undefined;
          }),
        SLOW_START_MS,
      );
      t.ok(registered, 'the appliance registered with both simulated banks');
      // The children's lines reach the supervisor's stdout a moment after they are written.
      await sleep(2_000);
      const entries = serve
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { level: number; msg: string; route?: string; status?: number });
      t.same(
        entries
          .filter((entry) => entry.route === 'unmatched' && entry.status! < 400)
          .map((entry) => `${entry.status} ${entry.msg}`),
        [],
        'no request answered at the start is logged as unmatched (`GET unmatched 200`)',
      );
      t.same(
        entries.filter((entry) => entry.level >= 40).map((entry) => entry.msg),
        [],
        'and nothing at warn or above',
      );
      // The banks register the appliance on their own origin (issue 44, item 7): none of it reaches the API.
      t.same(
        entries
          .filter((entry) => entry.route?.startsWith('/sandbox/consent-bank'))
          .map((entry) => entry.route),
        [],
        "the banks' pages are not served on the API's origin",
      );
    });

    await t.test('svc status --json shows the processes, the database and the queues', async (t) => {
      const current = await status(t, home);
      const mine = current.processes.filter((p) => p.supervisor_pid === serve.pid);
      t.same(mine.map((p) => p.role).sort(), ['api', 'dispatcher', 'scheduler'], 'three roles are listed');
      for (const proc of mine) {
        t.match(
          proc,
          {
            pid: Number,
            status: 'running',
            uptime_seconds: Number,
            started_at: String,
            restarts: 0,
            last_exit: null,
            last_exit_at: null,
          },
          `the ${proc.role} is running`,
        );
        t.ok(proc.uptime_seconds! >= 0, `the ${proc.role} reports its uptime`);
        t.ok(isRunning(proc.pid!), `the ${proc.role} pid is a live process`);
        t.not(proc.pid, serve.pid, `the ${proc.role} is a child, not the supervisor`);
      }
      t.equal(new Set(mine.map((p) => p.pid)).size, 3, 'each role is its own process');
      t.match(current.database, {
        engine,
        reachable: true,
        schema_version: migrationNames().at(-1),
        pending_migrations: 0,
        size_bytes: Number,
      });
      t.ok(current.database.size_bytes! > 0, 'the database size is reported');
      t.equal(current.database.schema_state, 'current', "the schema is the build's");
      const build = JSON.parse(readFileSync(join(REPO_ROOT, 'dist', 'build-info.json'), 'utf8')) as {
        version: string;
        commit: string | null;
      };
      const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
      t.match(current.build, { version: pkg.version, commit: build.commit }, "this CLI's version and commit");
      const running = current.servers.filter((server) => server.pid === serve.pid);
      t.equal(running.length, 1, 'the running server, as the database knows it');
      t.match(running[0], {
        version: new RegExp(`^${pkg.version.replace(/\./g, '\\.')}(\\+${build.commit ?? ''})?`),
        roles: 'api,scheduler,dispatcher',
        same_build: true,
      });
      const text = await runCli(['status'], { home });
      t.match(
        text.stdout,
        new RegExp(`^Build svc ${pkg.version.replace(/\./g, '\\.')} \\(commit `),
        'the first line names the build',
      );
      t.match(
        text.stdout,
        new RegExp(`pid ${serve.pid}: svc ${pkg.version.replace(/\./g, '\\.')}`),
        'and the running server',
      );
      t.same(current.queues, {
        sync_jobs_queued: 0,
        sync_jobs_running: 0,
        webhook_deliveries_pending: 0,
        grant_revocations_pending: 0,
        grant_revocations_failed: 0,
      });
    });

    await t.test('kill -9 of the scheduler is repaired by a restart', (t) =>
      killAndExpectRestart(t, home, serve, 'scheduler', secretKey),
    );

    await t.test('kill -9 of the api is repaired by a restart', (t) =>
      killAndExpectRestart(t, home, serve, 'api', secretKey),
    );

    await t.test('SIGTERM stops serve with exit 0 and no child left', async (t) => {
      const pids = [...(await children(t, home, serve)).values()].map((p) => p.pid!);
      t.equal(pids.length, 3);
      process.kill(serve.pid, 'SIGTERM');
      const exit = await within(serve.exited, SLOW_START_MS);
      t.same(exit, { code: 0, signal: null }, 'svc serve exits 0');
      for (const pid of pids) t.notOk(isRunning(pid), `child ${pid} is gone`);
      t.notOk(groupIsAlive(serve.pid), 'no process of the serve process group is left');
      const after = await status(t, home);
      t.same(
        after.processes.filter((p) => p.supervisor_pid === serve.pid),
        [],
        'svc status no longer lists its processes',
      );
      const health = await fetch(`${serve.url}/health`).catch(() => null);
      t.equal(health, null, 'nothing listens on the API port');
    });
  });

  await t.test('kill -9 of svc serve does not leave its children running', async (t) => {
    const serve = await startServe(t, { home });
    const pids = [...(await children(t, home, serve)).values()].map((p) => p.pid!);
    t.equal(pids.length, 3, 'three children run');
    const killedAt = Date.now();
    process.kill(serve.pid, 'SIGKILL');
    await serve.exited;
    // Each child drains and exits when it loses its supervisor; the wait leaves room for a slow machine.
    const gone = await waitFor(async () => (pids.some(isRunning) ? undefined : true), SLOW_START_MS);
    t.ok(gone, `every child stops by itself (${Date.now() - killedAt} ms)`);
    t.notOk(groupIsAlive(serve.pid), 'no process of the serve process group is left');
    const current = await status(t, home);
    t.same(
      current.processes.filter((p) => p.supervisor_pid === serve.pid),
      [],
      'svc status does not list the dead supervisor',
    );
    const next = await startServe(t, { home, port: serve.port });
    t.equal((await next.request('GET', '/health')).status, 200, 'a new svc serve can take the same port');
  });

  await t.test(
    '--roles api: only the api, metrics off on a taken port, a second serve refused, JSON lines',
    async (t) => {
      // One serve for four checks: each start costs seconds on a loaded machine.
      const metricsPort = await freePort();
      const squatter = createServer();
      await new Promise<void>((resolve) => squatter.listen(metricsPort, '127.0.0.1', resolve));
      t.teardown(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
      // Another serve (or anything) holding the simulated bank's port: the API serves on without the bank.
      const bankPort = await freeBankPorts();
      const bankSquatter = createServer();
      await new Promise<void>((resolve) => bankSquatter.listen(bankPort, '127.0.0.1', resolve));
      t.teardown(() => new Promise<void>((resolve) => bankSquatter.close(() => resolve())));
      const serve = await startServe(t, {
        home,
        args: ['--roles', 'api'],
        env: { SVC_METRICS_PORT: String(metricsPort), SVC_SANDBOX_CONSENT_BANK_PORT: String(bankPort) },
      });

      await t.test('it starts only the api, which serves', async (t) => {
        // The API may answer before its "ready" reaches the supervisor and its state file (a loaded CI run
        // read `starting` here): wait for the file, as an operator's second `svc status` would.
        await waitFor(
          async () => supervisedChildren(home, serve).get('api')?.status === 'running' || undefined,
          SLOW_START_MS,
        );
        const mine = await children(t, home, serve);
        t.same([...mine.keys()], ['api'], 'svc status lists only the api');
        t.equal(mine.get('api')?.status, 'running');
        const openapi = await serve.request('GET', '/v1/openapi.json', { key: secretKey });
        t.equal(openapi.status, 200, 'and it serves the API');
      });

      await t.test(
        'a taken metrics port turns metrics off; the API serves on, never restarted',
        async (t) => {
          const said = await waitFor(
            async () =>
              serve
                .stdout()
                .split('\n')
                .find((line) => line.includes('metrics off')),
            SLOW_START_MS,
          );
          t.match(
            JSON.parse(said ?? '{}'),
            {
              msg: new RegExp(
                `metrics off: cannot listen on 127\\.0\\.0\\.1:${metricsPort} \\(EADDRINUSE\\)`,
              ),
            },
            'the log says why metrics are off',
          );
          const api = supervisedChildren(home, serve).get('api');
          t.match(api, { status: 'running', restarts: 0 }, 'the api was never restarted');
        },
      );

      await t.test('a taken simulated bank port turns the bank off; the API serves on', async (t) => {
        const said = await waitFor(
          async () =>
            serve
              .stdout()
              .split('\n')
              .find((line) => line.includes('simulated consent bank off')),
          SLOW_START_MS,
        );
        t.match(
          JSON.parse(said ?? '{}'),
          {
            msg: new RegExp(
              `simulated consent bank off: cannot listen on 127\\.0\\.0\\.1:${bankPort} \\(EADDRINUSE\\).*SVC_SANDBOX_CONSENT_BANK_PORT`,
            ),
          },
          'the log says why the bank is off and what to set',
        );
        const discovery = await serve.request(
          'GET',
          '/sandbox/consent-bank/.well-known/openid-configuration',
        );
        t.equal(discovery.status, 404, 'its pages are not served');
        t.match(supervisedChildren(home, serve).get('api'), { status: 'running', restarts: 0 });
      });

      await t.test('a second svc serve of the same home on the same port names the first', async (t) => {
        const second = await runCli(['serve', '--port', String(serve.port)], {
          home,
          env: { SVC_METRICS_PORT: '0' },
          timeoutMs: HANG_GUARD_MS,
        });
        t.equal(second.code, 69, 'the second serve exits 69');
        t.match(second.message, new RegExp(`Port ${serve.port} is already in use`), 'naming the port');
        t.match(
          second.message,
          new RegExp(`svc serve \\(pid ${serve.pid}\\) already runs from this data directory`),
          'and the svc serve that holds it',
        );
        t.equal((await serve.request('GET', '/health')).status, 200, 'the first serves on');
      });

      await t.test('without a terminal, serve prints JSON lines only (for journald)', async (t) => {
        process.kill(serve.pid, 'SIGTERM');
        await within(serve.exited, SLOW_START_MS);
        const lines = serve.stdout().split('\n').filter(Boolean);
        t.ok(lines.length > 0, 'it logged');
        t.same(
          lines.filter((line) => !line.startsWith('{')),
          [],
          'and every line is JSON',
        );
      });
    },
  );

  await t.test('an unknown role is refused', async (t) => {
    const port = await freePort();
    const refused = await runCli(['serve', '--port', String(port), '--roles', 'api,mailer'], {
      home,
      env: { SVC_METRICS_PORT: '0' },
      timeoutMs: 20_000,
    });
    t.notOk(refused.timedOut, 'serve does not hang');
    t.not(refused.code, 0, 'serve exits non-zero');
    t.match(refused.message, /--roles/, 'the message names the flag');
    t.match(refused.message, /api, scheduler, dispatcher/, 'lists the roles there are');
    t.match(refused.message, /mailer/, 'and quotes what was given');
    t.notOk(refused.leftProcesses, 'no process is left behind');
    t.equal(await fetch(`http://127.0.0.1:${port}/health`).catch(() => null), null, 'no API was started');
  });

  await t.test('a taken API port is refused at once, naming the port and how to change it', async (t) => {
    const port = await freePort();
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => squatter.close(() => resolve())));

    const refused = await runCli(['serve', '--port', String(port)], {
      home,
      env: { SVC_METRICS_PORT: '0' },
      timeoutMs: HANG_GUARD_MS,
    });
    t.notOk(refused.timedOut, 'serve does not hang');
    t.equal(refused.code, 69, 'serve exits 69 (EX_UNAVAILABLE)');
    t.equal(refused.stderr.trimEnd().split('\n').length, 1, 'in one line');
    t.match(
      refused.message,
      new RegExp(`Error: Port ${port} is already in use on 127\\.0\\.0\\.1 \\(EADDRINUSE\\)`),
      'the one message names the port',
    );
    t.match(refused.message, /--port/, 'and the flag');
    t.match(refused.message, /api\.port in config\.json \(SVC_API_PORT\)/, 'and the setting');
    t.notMatch(refused.message, /crashed|restart/, 'no child was started to find out');
    t.equal(refused.stdout, '', 'and no child logged anything');
    t.notOk(refused.leftProcesses, 'no process is left behind');
  });

  /**
   * `svc serve ARGS` on a pseudo-terminal of 100 columns and 24 rows, as a person's shell runs it (`script`,
   * util-linux); `screen` is what the terminal received so far.
   */
  const onTerminal = (t: Test, args: string, env: Record<string, string> = {}) => {
    const tty = spawnOwned(
      'script',
      ['-qec', `stty cols 100 rows 24; ${process.execPath} ${CLI_ENTRY} serve ${args}`, '/dev/null'],
      {
        cwd: REPO_ROOT,
        env: cliEnv(home, { SVC_METRICS_PORT: '0', ...env }),
        stdio: ['ignore', 'pipe', 'pipe'],
      },
      t,
    );
    const output = { screen: '' };
    tty.stdout!.on('data', (chunk: Buffer) => (output.screen += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => tty.once('exit', (code) => resolve(code)));
    // script starts serve in a session of its own, out of the group the harness kills: kill it by the pid
    // its state file names.
    t.teardown(() => {
      for (const name of readdirSync(join(home, 'run'))) {
        const pid = /^serve-(\d+)\.json$/.exec(name)?.[1];
        if (pid) killGroup(Number(pid), 'SIGKILL');
      }
    });
    const lines = () => output.screen.split(/\r?\n/);
    const stop = async () => {
      const servePid = (await status(t, home)).processes.find((p) => p.status === 'running')?.supervisor_pid;
      t.ok(servePid, 'svc status names the supervisor');
      if (servePid) process.kill(servePid, 'SIGTERM');
      t.equal(await within(exited, SLOW_START_MS), 0, 'SIGTERM stops it with exit 0');
    };
    return { lines, stop };
  };

  await t.test(
    'on a terminal, serve says in one line where it listens, its roles, data and database, then logs readable lines',
    { skip: hasScript ? false : 'needs `script` (util-linux) for a pseudo-terminal' },
    async (t) => {
      const port = await freePort();
      const bankPort = await freeBankPorts();
      const serve = onTerminal(t, `--port ${port}`, { SVC_SANDBOX_CONSENT_BANK_PORT: String(bankPort) });
      const line = await waitFor(
        async () => serve.lines().find((text) => text.startsWith('svc serve: ')),
        SLOW_START_MS,
      );
      const database = engine === 'sqlite' ? `sqlite ${join(home, 'svc.db')}` : maskUrl(url);
      t.equal(
        line,
        `svc serve: API on http://127.0.0.1:${port}, console http://127.0.0.1:${port}/console, simulated consent bank https://127.0.0.1:${bankPort}; roles api, scheduler, dispatcher; data ${home}; database ${database}. Ctrl-C stops it.`,
        'one line says it all',
      );
      const door = await fetch(`http://127.0.0.1:${port}/`, { redirect: 'manual' });
      t.equal(door.status, 303, '/ is a door');
      t.equal(door.headers.get('location'), '/console', 'to the console');
      if (engine === 'postgres') t.notMatch(line ?? '', /:[^@/]*@/, 'with no password');
      t.equal((await request(`http://127.0.0.1:${port}`, 'GET', '/health')).status, 200, 'and it is true');
      // Lines reach the terminal within a second (logging/logger.ts batches them).
      const health = await waitFor(
        async () =>
          serve
            .lines()
            .find((text) => / INFO {2}api {2}GET \/health 200 [\d.]+ ms request_id=req_/.test(text)),
        SLOW_START_MS,
      );
      t.match(health, /^\d\d:\d\d:\d\d\.\d{3} INFO {2}api {2}GET \/health 200/, 'a request reads as one');
      const upToHealth = serve.lines().slice(0, serve.lines().indexOf(health!) + 1);
      t.ok(
        upToHealth.some((text) => /^\d\d:\d\d:\d\d\.\d{3} INFO {2}api {2}api listening url=http/.test(text)),
        'each process says it started, in words',
      );
      t.same(
        upToHealth.filter((text) => text.startsWith('{')),
        [],
        'no JSON on a terminal',
      );
      // What `svc install` printed just before (its one-time keys) must still be on a 24-row screen.
      const rows = upToHealth.reduce((sum, text) => sum + Math.max(1, Math.ceil(text.length / 100)), 0);
      t.ok(rows <= 12, `serve took ${rows} of the terminal's 24 rows to start and answer a request`);
      await serve.stop();
      t.equal(
        serve.lines().filter((text) => text.startsWith('svc serve: ')).length,
        1,
        'the line is printed once',
      );
    },
  );

  await t.test(
    'on a terminal, serve --json logs JSON lines',
    { skip: hasScript ? false : 'needs `script` (util-linux) for a pseudo-terminal' },
    async (t) => {
      const port = await freePort();
      const serve = onTerminal(t, `--port ${port} --json`, {
        SVC_SANDBOX_CONSENT_BANK_PORT: String(await freeBankPorts()),
      });
      const listening = await waitFor(
        async () => serve.lines().find((text) => text.includes('"msg":"api listening"')),
        SLOW_START_MS,
      );
      t.match(JSON.parse(listening!), { level: 30, role: 'api', msg: 'api listening' }, 'a JSON line');
      t.same(
        serve.lines().filter((text) => text.trim() !== '' && !text.startsWith('{')),
        [],
        'nothing but JSON lines, not even the one-line summary',
      );
      await serve.stop();
    },
  );

  await t.test(
    'an api whose port is taken while it restarts crash-loops, and serve gives up with the reason',
    async (t) => {
      // A fresh start checks the port first (above); a port taken by another program while the api
      // restarts is what the crash-loop report is for. The first restart waits 3 s: room to take the port.
      const serve = await startServe(t, {
        home,
        env: {
          SVC_SUPERVISOR_RESTART_DELAYS_MS: '[3000, 50]',
          SVC_SUPERVISOR_CRASH_LOOP_RESTARTS: '3',
          SVC_METRICS_PORT: '0',
        },
      });
      const api = supervisedChildren(home, serve).get('api');
      t.ok(api?.pid, 'the api runs');
      if (!api?.pid) return;
      process.kill(api.pid, 'SIGKILL');
      const squatter = createServer();
      t.teardown(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
      const taken = await waitFor(
        () =>
          new Promise<true | undefined>((resolve) => {
            squatter.once('error', () => resolve(undefined));
            squatter.listen(serve.port, '127.0.0.1', () => resolve(true));
          }),
        2500,
        20,
      );
      t.ok(taken, 'the port is taken while the api waits to restart');

      const exit = await within(serve.exited, 120_000);
      t.ok(exit, 'serve gives up by itself');
      t.not(exit?.code, 0, 'and exits non-zero');
      const message = oneLine(serve.stderr());
      t.match(message, /api crashed 3 times within 60s/, 'stderr names the api and how often it crashed');
      t.match(message, /EADDRINUSE/, 'and the last error');
      t.notOk(groupIsAlive(serve.pid), 'the scheduler and dispatcher were stopped too');
    },
  );
});
