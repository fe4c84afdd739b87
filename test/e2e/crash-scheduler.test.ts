import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { ManualClock } from '../../src/clock/clock.js';
import type { Connector } from '../../src/banks/connector.js';
import { startBankGateway } from '../../src/banks/gateway/gateway.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';
import type { Database } from '../../src/db/database.js';
import { formatRut, rutCheckDigit } from '../../src/rut/rut.js';
import {
  HANG_GUARD_MS,
  RAISED_LIMITS,
  createTenant,
  forEachEngine,
  freshDatabase,
  linkBody,
  runSyncs,
  schedulerTick,
  startTestApp,
} from '../helpers/harness.js';
import {
  installArgs,
  mapLimit,
  runCliJson,
  startServe,
  useBankGateway,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { startWorkers, type WorkerProcess } from '../helpers/serve-roles.js';
import {
  CRASH_SERVE_ENV,
  FAST_SCHEDULER_ENV,
  RAISED_LIMITS_ENV,
  timeLimitForRounds,
  crashRounds,
  nextChildPid,
  randomBetween,
  storeProblems,
} from '../helpers/crash.js';

const ROUNDS = crashRounds(4);
/** Kills while the first syncs (queued by link creation) run, then while the scheduled ones run. */
const ROUNDS_PER_PHASE = [Math.ceil(ROUNDS / 2), Math.floor(ROUNDS / 2)] as const;
/** Enough links that a phase's kills never run out of syncs to interrupt (at most four finish per kill). */
const LINKS = 4 * ROUNDS_PER_PHASE[0] + 4;
/** Per bank call: a sync (login, accounts, 3 to 5 accounts' movements) takes 0.5 to 0.7 s. */
const BANK_LATENCY_MS = 100;
const SYNC_MS = 700;
const GATEWAY_SECRET = 'crash-gateway-secret-0123456789ab';
const DAY = 86_400_000;
/**
 * The appliance's clock during each phase. The sandbox books nothing between 23:00 and 24:00 UTC (every
 * movement, card posting and reversal it generates falls earlier in the day), so within that hour its data
 * does not change: a sync at any moment of a phase sees what the control run sees at its start.
 */
const FIRST_SYNC_AT = Date.UTC(2026, 5, 14, 23, 2);
const SECOND_SYNC_AT = FIRST_SYNC_AT + DAY;
const QUIET_MS = 55 * 60_000;
// A round took 4 s on an idle machine (and the links' first syncs 6 s more).
timeLimitForRounds(t, ROUNDS, 40_000, 180_000);

/** A RUT per link, so that the links have different profiles (accounts, currencies, histories). */
const RUTS = Array.from({ length: LINKS }, (_, i) => {
  const body = String(11_000_000 + i * 104_729);
  return formatRut(`${body}-${rutCheckDigit(body)}`);
});

/**
 * The sandbox behind a real HTTP gateway, slowed to a second per sync, telling the test when a sync reaches
 * the bank and when the bank has answered movements: the moments the kills aim at.
 */
function observedBank() {
  const sandbox = createSandboxConnector();
  const waiters: { kind: 'login' | 'movements'; resolve: () => void }[] = [];
  const signal = (kind: 'login' | 'movements') => {
    for (const waiter of waiters.filter((w) => w.kind === kind)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  };
  const connector: Connector = {
    async login(request) {
      signal('login');
      await sleep(BANK_LATENCY_MS);
      return sandbox.login(request);
    },
    submitMfa: (request, challenge, code) => sandbox.submitMfa(request, challenge, code),
    async listAccounts(session, now) {
      await sleep(BANK_LATENCY_MS);
      return sandbox.listAccounts(session, now);
    },
    async listMovements(session, account, window, now) {
      await sleep(BANK_LATENCY_MS);
      const movements = await sandbox.listMovements(session, account, window, now);
      signal('movements');
      return movements;
    },
  };
  /** Resolves true at the next call of `kind`, or false after `timeoutMs`. */
  const next = (kind: 'login' | 'movements', timeoutMs: number) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        resolve(false);
      }, timeoutMs);
      const waiter = {
        kind,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      waiters.push(waiter);
    });
  return { connector, next };
}

/** `external_user_id` (the RUT) and account ref → movements stored and the account's status. */
async function movementsByAccount(db: Database): Promise<Record<string, string>> {
  const rows: { rut: string; ref: string; status: string; n: number | string }[] = await db
    .knex('accounts')
    .join('links', 'links.id', 'accounts.link_id')
    .leftJoin('movements', 'movements.account_id', 'accounts.id')
    .groupBy('links.external_user_id', 'accounts.bank_account_ref', 'accounts.status')
    .select({ rut: 'links.external_user_id', ref: 'accounts.bank_account_ref', status: 'accounts.status' })
    .count({ n: 'movements.id' });
  return Object.fromEntries(rows.map((row) => [`${row.rut} ${row.ref}`, `${row.status}: ${Number(row.n)}`]));
}

/** The same links synced once at each phase's time, in-process with no kill: what a clean run stores. */
async function controlRun(t: Test, engine: 'sqlite' | 'postgres'): Promise<Record<string, string>> {
  const app = await startTestApp(t, engine, { clock: new ManualClock(FIRST_SYNC_AT) });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  for (const rut of RUTS) {
    const created = await app.request('POST', '/v1/links', {
      key: tenant.keys.sk_test.secret,
      body: linkBody({ external_user_id: rut, credentials: { rut, password: 'sandbox' } }),
    });
    if (created.status !== 200) throw new Error(`control link: ${created.text}`);
  }
  await runSyncs(app);
  app.clock.set(SECOND_SYNC_AT);
  await schedulerTick(app);
  return movementsByAccount(app.db);
}

/** What the sandbox bank holds for every RUT at `at`: refs of every account's movements. */
async function bankSnapshot(at: number): Promise<string[]> {
  const sandbox = createSandboxConnector();
  const snapshot: string[] = [];
  for (const rut of RUTS) {
    const login = await sandbox.login({
      bankId: 'bancochile',
      holderType: 'individual',
      credentials: { rut, password: 'sandbox', rutEmpresa: null },
      now: at,
      interactive: false,
      history: { attempts: 1, successes: 1 },
    });
    if (login.kind !== 'session') throw new Error('the sandbox asked for MFA');
    for (const account of await sandbox.listAccounts(login.session, at)) {
      const movements = await sandbox.listMovements(
        login.session,
        account,
        { from: at - 90 * DAY, to: at + 1 },
        at,
      );
      snapshot.push(
        `${rut} ${account.ref}: ${movements.map((m) => `${m.ref}${m.pending ? '~' : ''}`).join(',')}`,
      );
    }
  }
  return snapshot;
}

/**
 * `svc serve --roles scheduler` with many live-mode links due (their syncs go through a real bank gateway
 * that takes about a second per sync), `kill -9`ed over and over: at a random moment of a sync, or just
 * after the bank answered, while the sync's results are being written. First while the syncs queued by
 * link creation run, then, a day later on the appliance's clock, while the scheduled syncs its cron
 * enqueued run. After each phase every link has synced exactly once more (no job lost, none run twice,
 * none left running), and at the end each account holds exactly the movements a clean run stores.
 */
forEachEngine(t, async (t, engine) => {
  const began = Date.now();
  for (const at of [FIRST_SYNC_AT, SECOND_SYNC_AT]) {
    t.same(
      await bankSnapshot(at + QUIET_MS),
      await bankSnapshot(at),
      `the sandbox books nothing in the hour from ${new Date(at).toISOString()} (every sync of a phase sees the same data)`,
    );
  }
  const expected = await controlRun(t, engine);

  const database = await freshDatabase(t, engine);
  const home = database.home;
  await runCliJson(t, installArgs(engine, database.url), { home });
  const liveKey = (
    await runCliJson<{ secret: string }>(t, ['keys', 'create', '--mode', 'live', '--type', 'secret'], {
      home,
    })
  ).secret;
  const bank = observedBank();
  const gateway = await startBankGateway({
    host: '127.0.0.1',
    port: 0,
    secret: GATEWAY_SECRET,
    connector: bank.connector,
  });
  t.teardown(() => gateway.close());
  useBankGateway(home, { url: gateway.url, secret: GATEWAY_SECRET });

  const clockAt = (at: number) => ({ SVC_CLOCK_OFFSET_MS: String(at - Date.now()) });
  const firstClock = clockAt(FIRST_SYNC_AT);
  const api = await startServe(t, {
    home,
    args: ['--roles', 'api'],
    env: { ...RAISED_LIMITS_ENV, ...firstClock },
  });
  await mapLimit(RUTS, 4, async (rut) => {
    const created = await api.request('POST', '/v1/links', {
      key: liveKey,
      body: linkBody({ external_user_id: rut, credentials: { rut, password: 'sandbox' } }),
    });
    if (created.status !== 200) throw new Error(`link for ${rut}: ${created.text}`);
  });
  api.process.kill('SIGTERM');
  await api.exited;

  const killDuringSyncs = async (t: Test, scheduler: WorkerProcess, rounds: number) => {
    let last: number | null = null;
    let killed = 0;
    for (let round = 0; round < rounds; round++) {
      const pid = await nextChildPid(home, scheduler.pid, 'scheduler', last);
      if (!(await bank.next('login', HANG_GUARD_MS))) break; // no sync reached the bank: out of work
      if (round % 2 === 0) await sleep(randomBetween(0, SYNC_MS));
      else if (await bank.next('movements', 5_000)) await sleep(randomBetween(0, 30));
      process.kill(pid, 'SIGKILL');
      killed += 1;
      last = pid;
    }
    t.equal(killed, rounds, `${killed} kill -9s of the scheduler, each during a sync`);
    return Date.now();
  };

  /** Waits until every link has `successes` syncs and no job is left queued or running. */
  const settled = (successes: number) =>
    waitFor(
      () =>
        withDatabase(database.url, async (db) => {
          const behind = await db.knex('links').where('sync_successes', '<', successes).count({ n: '*' });
          const open = await db.knex('jobs').whereIn('status', ['queued', 'running']).count({ n: '*' });
          return Number(behind[0]!.n) === 0 && Number(open[0]!.n) === 0 ? true : undefined;
        }),
      90_000,
      250,
    );

  const phase = async (t: Test, successes: number, rounds: number, clock: Record<string, string>) => {
    const scheduler = await startWorkers(t, {
      home,
      roles: 'scheduler',
      env: { ...CRASH_SERVE_ENV, ...FAST_SCHEDULER_ENV, ...clock },
    });
    const lastKill = await killDuringSyncs(t, scheduler, rounds);
    t.ok(
      await settled(successes),
      `then every link synced (${Date.now() - lastKill} ms after the last kill)`,
    );
    await scheduler.stop();
    await withDatabase(database.url, async (db) => {
      const links: { id: string; sync_successes: number; sync_attempts: number; status: string }[] = await db
        .knex('links')
        .select('id', 'sync_successes', 'sync_attempts', 'status');
      t.same(
        links.filter((l) => l.sync_successes !== successes || l.sync_attempts !== successes),
        [],
        `each of ${links.length} links has synced exactly ${successes} time(s), none failed`,
      );
      const jobs: { link_id: string; status: string; attempts: number; payload: string }[] = await db
        .knex('jobs')
        .select('link_id', 'status', 'attempts', 'payload');
      t.same(
        jobs.filter((j) => j.status !== 'succeeded'),
        [],
        'every job succeeded: none lost, none left running with an expired lease',
      );
      t.equal(
        jobs.length,
        links.length * successes,
        `one job per link and sync (${jobs.length}): none enqueued twice`,
      );
      const retried = jobs.filter((j) => j.attempts > 1);
      t.ok(retried.length > 0, `${retried.length} jobs were taken over after a kill`);
      const [outcomes] = await db.knex('bank_sync_outcomes').where({ succeeded: true }).count({ n: '*' });
      t.equal(
        Number(outcomes!.n),
        links.length * successes,
        'one bank outcome per sync: no sync written twice',
      );
    });
  };

  await t.test('kill -9 during the first syncs', (t) => phase(t, 1, ROUNDS_PER_PHASE[0], firstClock));
  await t.test('kill -9 during the scheduled syncs a day later', (t) =>
    phase(t, 2, ROUNDS_PER_PHASE[1], clockAt(SECOND_SYNC_AT)),
  );

  await withDatabase(database.url, async (db) => {
    t.same(await storeProblems(db, home), [], 'events, intents, accounts and counters are consistent');
    const [scheduled] = await db.knex('jobs').where('payload', 'like', '%"scheduled"%').count({ n: '*' });
    t.equal(Number(scheduled!.n), LINKS, 'the second syncs were enqueued by the cron, once per link');
    t.same(await movementsByAccount(db), expected, 'every account holds exactly what a clean run stores');
  });
  t.comment(`${engine}: ${ROUNDS} kills over ${LINKS} links in ${Date.now() - began} ms`);
});
