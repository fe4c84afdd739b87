import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectorError, type Connector } from '../../src/banks/connector.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';
import { BankShares, runSyncWorkers } from '../../src/sync/worker-pool.js';
import {
  HANG_GUARD_MS,
  RAISED_LIMITS,
  createTenant,
  forEachEngine,
  type EngineName,
  type TestApp,
  linkBody,
  startTestApp,
} from '../helpers/harness.js';
import { waitFor } from '../helpers/cli.js';

const HANGING_BANK = 'santander';

/**
 * The sandbox bank, except that the logins `hangs` picks never answer until the test ends: each one holds the
 * worker that called it.
 */
function hangingBank(hangs: (bankId: string, rut: string) => boolean) {
  const sandbox = createSandboxConnector();
  const waiting: ((error: Error) => void)[] = [];
  const over = () => new ConnectorError('bank_unavailable', 'test over');
  let released = false;
  const connector = new Proxy(sandbox, {
    get(target, name: string) {
      if (name !== 'login') return (target as unknown as Record<string, unknown>)[name];
      return (request: Parameters<typeof sandbox.login>[0]) =>
        !hangs(request.bankId, request.credentials.rut)
          ? sandbox.login(request)
          : released // a worker that claimed a job as the test ended: it must not hang the teardown
            ? Promise.reject(over())
            : new Promise((_, reject) => waiting.push(reject));
    },
  }) as Connector;
  return {
    resolver: (_bank: string, mode: 'live' | 'test') => (mode === 'test' ? connector : null),
    hanging: () => waiting.length,
    release: () => {
      released = true;
      for (const reject of waiting.splice(0)) reject(over());
    },
  };
}

/** The app with 4 workers, 2 a bank, running until the test ends; the bank's hanging logins released first. */
async function appWithWorkers(t: Test, engine: EngineName, bank: ReturnType<typeof hangingBank>) {
  const app = await startTestApp(t, engine, {
    connectors: bank.resolver,
    config: {
      scheduler: { concurrency: 4, perBankConcurrency: 2, pollIntervalMs: 50 },
      refresh: { onlyLastCooldownMinutes: 0 },
    },
  });
  const stop = new AbortController();
  const workers = runSyncWorkers(app.services, stop.signal);
  // LIFO: the logins are released before the workers are awaited.
  t.teardown(() => workers);
  t.teardown(() => {
    stop.abort();
    bank.release();
  });
  return app;
}

/**
 * A tenant's new link at bancochile syncs, then its refresh succeeds: what a tenant sees while another's syncs
 * hold the workers. The assertions name `who`.
 */
async function linkSyncsAndRefreshes(t: Test, app: TestApp, key: string, who: string): Promise<void> {
  const started = Date.now();
  const link = (await app.request('POST', '/v1/links', { key, body: linkBody() })).body.id as string;
  const synced = await waitFor(async () => {
    const seen = await app.request('GET', `/v1/links/${link}`, { key });
    return seen.body.status === 'active' && seen.body.refresh_status === 'idle' ? seen.body : undefined;
  }, HANG_GUARD_MS / 2);
  t.ok(synced, `${who} link synced (${Date.now() - started} ms)`);
  const intent = await app.request('POST', '/v1/refresh_intents', { key, body: { link_id: link } });
  t.equal(intent.status, 200, intent.text);
  const done = await waitFor(async () => {
    const seen = await app.request('GET', `/v1/refresh_intents/${intent.body.id}`, { key });
    return seen.body.status === 'succeeded' ? seen.body : undefined;
  }, HANG_GUARD_MS / 2);
  t.ok(done, `and ${who} refresh succeeded`);
}

t.test('a bank at its share is passed over; a finished job gives its place back', async (t) => {
  const shares = new BankShares(2);
  shares.add('santander');
  t.same(shares.full(), [], 'one of two places taken');
  shares.add('santander');
  shares.add('bci');
  shares.add(null);
  t.same(shares.full(), ['santander'], 'two of two: full; another bank is not');
  shares.remove('santander');
  t.same(shares.full(), [], 'a place given back');
});

forEachEngine(t, async (t, engine) => {
  t.test("a hanging bank holds its share of the workers, and another bank's refresh runs", async (t) => {
    const bank = hangingBank((bankId) => bankId === HANGING_BANK);
    const app = await appWithWorkers(t, engine, bank);

    // Organisation B: more links at the hanging bank than there are workers.
    const b = await createTenant(app, { rateLimits: RAISED_LIMITS });
    for (let i = 0; i < 6; i++) {
      const link = await app.request('POST', '/v1/links', {
        key: b.keys.sk_test.secret,
        body: linkBody({ bank_id: HANGING_BANK }),
      });
      t.equal(link.status, 200);
    }
    t.ok(await waitFor(async () => (bank.hanging() >= 2 ? true : undefined), HANG_GUARD_MS), 'logins hang');
    await sleep(300); // time for any free worker to take another of B's jobs, as it would without the cap

    // Organisation A, at another bank: a new link's first sync, then an on-demand refresh.
    const a = await createTenant(app, { rateLimits: RAISED_LIMITS });
    await linkSyncsAndRefreshes(t, app, a.keys.sk_test.secret, "A's (at another bank, while B's bank hangs)");
    t.equal(bank.hanging(), 2, 'the hanging bank never held more than its 2 of the 4 workers');
  });
  t.test(
    "a tenant whose refreshes hold a bank's places does not queue another tenant's refresh there (the spare worker)",
    async (t) => {
      const NOISY_RUT = '22.222.222-2';
      const bank = hangingBank((_bankId, rut) => rut === '22222222-2'); // the RUT as the bank sees it
      const app = await appWithWorkers(t, engine, bank);

      // The noisy tenant: six links at bancochile whose first syncs (on demand) never end.
      const noisy = await createTenant(app, { rateLimits: RAISED_LIMITS });
      for (let i = 0; i < 6; i++) {
        const link = await app.request('POST', '/v1/links', {
          key: noisy.keys.sk_test.secret,
          body: linkBody({ credentials: { rut: NOISY_RUT, password: 'sandbox' } }),
        });
        t.equal(link.status, 200, link.text);
      }
      t.ok(
        await waitFor(async () => (bank.hanging() >= 2 ? true : undefined), HANG_GUARD_MS),
        "the noisy tenant's syncs hold the bank's two places",
      );
      await sleep(300); // time for a free worker to take another of its jobs, were the share not kept

      // The quiet tenant, at the same bank: its link's first sync and a refresh both run.
      const quiet = await createTenant(app, { rateLimits: RAISED_LIMITS });
      await linkSyncsAndRefreshes(t, app, quiet.keys.sk_test.secret, "the quiet tenant's (at the same bank)");
      t.equal(
        bank.hanging(),
        2,
        "the noisy tenant still holds only the bank's two places: the spare took none",
      );
    },
  );
});
