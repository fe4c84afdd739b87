import t from 'tap';
import { startBankGateway } from '../../src/banks/gateway/gateway.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';
import { forEachEngine, linkBody, request } from '../helpers/harness.js';
import {
  installedHome,
  runCliJson,
  startServe,
  useBankGateway,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { nextChildPid } from '../helpers/crash.js';

const GATEWAY_SECRET = 'gateway-shared-secret-0123456789';
const FAST_SCHEDULER = {
  SVC_SCHEDULER_CRON: '* * * * * *',
  SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
  SVC_SCHEDULER_LEASE_SECONDS: '2',
  SVC_SUPERVISOR_RESTART_DELAYS_MS: '[100]',
};

interface LinkState {
  sync_attempts: number;
  sync_successes: number;
  last_synced_at: number | null;
  last_error_code: string | null;
}

forEachEngine(t, async (t, engine) => {
  const { database, home, key: testKey } = await installedHome(t, engine);
  const liveKey = (
    await runCliJson<{ secret: string }>(
      t,
      [
        'keys',
        'create',
        '--mode',
        'live',
        '--type',
        'secret',
        '--rate-limit',
        'resource_write=1000',
        '--rate-limit',
        'read=1000',
      ],
      { home },
    )
  ).secret;

  const gateway = await startBankGateway({
    host: '127.0.0.1',
    port: 0,
    secret: GATEWAY_SECRET,
    connector: createSandboxConnector(),
  });
  t.teardown(() => gateway.close());
  useBankGateway(home, { url: gateway.url, secret: GATEWAY_SECRET });

  const linkState = (id: string) =>
    withDatabase(database.url, async (db) => (await db.knex('links').where({ id }).first()) as LinkState);
  const syncedAtLeast = (id: string, successes: number) =>
    // A hang guard, not a bound: a sync takes about a second idle.
    waitFor(async () => ((await linkState(id)).sync_successes >= successes ? true : undefined), 60_000);

  const serve = await startServe(t, { home, env: FAST_SCHEDULER });
  const create = async (key: string, rut: string, password = 'sandbox') => {
    const response = await request(serve.url, 'POST', '/v1/links', {
      key,
      body: linkBody({ credentials: { rut, password } }),
    });
    t.equal(response.status, 200, `link created (${response.text.slice(0, 120)})`);
    return response.body.id as string;
  };

  t.test('the scheduler process runs the first sync of a test-mode link', async (t) => {
    const id = await create(testKey, '11.111.111-1');
    t.ok(await syncedAtLeast(id, 1), 'synced by svc serve');
    const accounts = await request(serve.url, 'GET', `/v1/accounts?link_id=${id}`, { key: testKey });
    t.ok(accounts.body.length >= 2);
  });

  t.test('live mode syncs through the reference gateway over a socket, faults included', async (t) => {
    const id = await create(liveKey, '22.222.222-2');
    t.ok(await syncedAtLeast(id, 1), 'synced through the gateway');
    const link = (await request(serve.url, 'GET', `/v1/links/${id}`, { key: liveKey })).body;
    t.match(link, { mode: 'live', status: 'active', last_error_code: null });
    t.ok(link.accounts_count >= 2);

    gateway.setFaults({ error: 'bank_unavailable' });
    const down = await create(liveKey, '33.333.333-3');
    const failed = await waitFor(
      async () => ((await linkState(down)).sync_attempts >= 1 ? linkState(down) : undefined),
      60_000,
    );
    t.equal(failed?.last_error_code, 'bank_unavailable', "the gateway's fault reaches the link");
    t.equal(failed?.sync_successes, 0);
    const intent = await withDatabase(database.url, (db) =>
      db.knex('refresh_intents').where({ link_id: down }).first(),
    );
    t.match(intent, { status: 'failed', error_code: 'bank_unavailable' });
    gateway.setFaults({});
  });

  t.test(
    'kill -9 of the scheduler in the middle of a sync loses no job and writes no half sync',
    async (t) => {
      // Each bank call takes 1.5 s, so the sync (4 calls or more) is still running when it is seen running.
      gateway.setFaults({ latencyMs: 1500 });
      const schedulerPid = await nextChildPid(home, serve.pid, 'scheduler', null, 60_000);
      const id = await create(liveKey, '44.444.444-4');
      const running = await waitFor(
        () =>
          withDatabase(
            database.url,
            async (db) =>
              (await db.knex('jobs').where({ link_id: id, status: 'running' }).first()) ?? undefined,
          ),
        60_000,
        50,
      );
      t.ok(running, 'the sync started');
      process.kill(schedulerPid, 'SIGKILL');
      gateway.setFaults({});
      t.ok(await syncedAtLeast(id, 1), 'the job was taken up again after its lease and finished');
      await withDatabase(database.url, async (db) => {
        const jobs = await db.knex('jobs').where({ link_id: id });
        t.equal(jobs.length, 1, 'one job');
        t.match(jobs[0], { status: 'succeeded' });
        t.ok(jobs[0].attempts >= 2, 'claimed again after the kill');
        const [counts] = await db
          .knex('movements')
          .where({ link_id: id })
          .count({ rows: '*' })
          .countDistinct({ refs: 'bank_ref' });
        t.ok(Number(counts?.rows) > 0, 'the sync wrote movements');
        t.equal(Number(counts?.rows), Number(counts?.refs), 'no movement written twice');
        const events = (await db.knex('events').where({ link_id: id }).select('type')).map(
          (e: { type: string }) => e.type,
        );
        t.equal(events.filter((type: string) => type === 'link.refreshed').length, 1, 'one link.refreshed');
        t.equal(events.filter((type: string) => type === 'refresh_intent.succeeded').length, 1);
      });
    },
  );

  t.test('with the clock four hours on, the scheduler syncs every link again', async (t) => {
    const before = await withDatabase(
      database.url,
      async (db) =>
        (await db
          .knex('links')
          .where({ status: 'active', paused: false, mode: 'test' })
          .select('id', 'sync_successes')) as { id: string; sync_successes: number }[],
    );
    serve.process.kill('SIGTERM');
    await new Promise((resolve) => serve.process.once('exit', resolve));
    await startServe(t, {
      home,
      env: { ...FAST_SCHEDULER, SVC_CLOCK_OFFSET_MS: String(4 * 3_600_000 + 120_000) },
    });
    for (const link of before) {
      t.ok(await syncedAtLeast(link.id, link.sync_successes + 1), `${link.id} synced again`);
    }
  });
});
