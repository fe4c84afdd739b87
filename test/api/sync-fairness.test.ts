import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectorError, type Connector } from '../../src/banks/connector.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';
import { BankShares, runSyncWorkers } from '../../src/sync/worker-pool.js';
import {
  HANG_GUARD_MS,
  RAISED_LIMITS,
  createTenant,
  forEachEngine,
  linkBody,
  startTestApp,
} from '../helpers/harness.js';
import { waitFor } from '../helpers/cli.js';

const HANGING_BANK = 'santander';

/** A bank whose logins never answer until the test ends: each one holds the worker that called it. */
function hangingBank() {
  const sandbox = createSandboxConnector();
  const waiting: ((error: Error) => void)[] = [];
  const connector = new Proxy(sandbox, {
    get(target, name: string) {
      if (name !== 'login') return (target as unknown as Record<string, unknown>)[name];
      return () => new Promise((_, reject) => waiting.push(reject));
    },
  }) as Connector;
  return {
    resolver: (bank: string, mode: 'live' | 'test') =>
      mode !== 'test' ? null : bank === HANGING_BANK ? connector : sandbox,
    hanging: () => waiting.length,
    release: () => {
      for (const reject of waiting.splice(0)) reject(new ConnectorError('bank_unavailable', 'test over'));
    },
  };
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
    const bank = hangingBank();
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
    const key = a.keys.sk_test.secret;
    const link = (await app.request('POST', '/v1/links', { key, body: linkBody() })).body.id as string;
    const active = await waitFor(async () => {
      const seen = await app.request('GET', `/v1/links/${link}`, { key });
      return seen.body.status === 'active' && seen.body.refresh_status === 'idle' ? seen.body : undefined;
    }, HANG_GUARD_MS / 2);
    t.ok(active, "A's link synced while B's bank hangs");
    const intent = await app.request('POST', '/v1/refresh_intents', { key, body: { link_id: link } });
    t.equal(intent.status, 200, intent.text);
    const done = await waitFor(async () => {
      const seen = await app.request('GET', `/v1/refresh_intents/${intent.body.id}`, { key });
      return seen.body.status === 'succeeded' ? seen.body : undefined;
    }, HANG_GUARD_MS / 2);
    t.ok(done, "and A's refresh succeeded");
    t.equal(bank.hanging(), 2, 'the hanging bank never held more than its 2 of the 4 workers');
  });
});
