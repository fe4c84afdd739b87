import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { runSyncWorkers } from '../../src/sync/worker-pool.js';
import {
  HANG_GUARD_MS,
  appWithTenant,
  forEachEngine,
  type EngineName,
  linkBody,
} from '../helpers/harness.js';
import { waitFor } from '../helpers/cli.js';

/**
 * Idle sync workers take a job as soon as it is committed, not at their next poll: a person's refresh, a new
 * link's first sync and a sync back from its MFA code. The poll here is 10 minutes, far beyond what the test
 * waits, so only the wake-up (Postgres LISTEN/NOTIFY, the SQLite WAL watched; db/notify.ts) can run them.
 */
const POLL_MS = 600_000;

async function appWithIdleWorkers(t: Test, engine: EngineName, wakeOnCommit: boolean) {
  const { app, sk } = await appWithTenant(t, engine, {
    config: {
      scheduler: { concurrency: 2, perBankConcurrency: 2, pollIntervalMs: POLL_MS, wakeOnCommit },
      refresh: { onlyLastCooldownMinutes: 0 },
    },
  });
  // A link queued before the workers start: their first claims take it (one worker) or find nothing (the
  // others). Once it has synced and its worker has looked again, all of them sleep out the poll unless woken.
  const first = (
    await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ credentials: { rut: '12.345.678-5', password: 'sandbox' } }),
    })
  ).body.id as string;
  const stop = new AbortController();
  const workers = runSyncWorkers(app.services, stop.signal);
  t.teardown(() => workers);
  t.teardown(() => stop.abort());
  const idle = await waitFor(async () => {
    const seen = (await app.request('GET', `/v1/links/${first}`, { key: sk })).body;
    return seen.refresh_status === 'idle' ? seen : undefined;
  }, HANG_GUARD_MS);
  t.ok(idle, 'the workers took the job queued before they started');
  await sleep(300);
  return { app, key: sk };
}

forEachEngine(t, async (t, engine) => {
  t.test('a committed job wakes the idle workers', async (t) => {
    const { app, key } = await appWithIdleWorkers(t, engine, true);
    const statusOf = async (path: string) => (await app.request('GET', path, { key })).body;

    const link = (await app.request('POST', '/v1/links', { key, body: linkBody() })).body.id as string;
    const synced = await waitFor(async () => {
      const seen = await statusOf(`/v1/links/${link}`);
      return seen.status === 'active' && seen.refresh_status === 'idle' ? seen : undefined;
    }, HANG_GUARD_MS);
    t.ok(synced, "a new link's first sync ran");

    const intent = await app.request('POST', '/v1/refresh_intents', { key, body: { link_id: link } });
    t.equal(intent.status, 200, intent.text);
    const done = await waitFor(async () => {
      const seen = await statusOf(`/v1/refresh_intents/${intent.body.id}`);
      return seen.status === 'succeeded' ? seen : undefined;
    }, HANG_GUARD_MS);
    t.ok(done, 'an on-demand refresh ran');

    const mfaLink = (
      await app.request('POST', '/v1/links', {
        key,
        body: linkBody({ credentials: { rut: '22.222.222-2', password: 'sandbox-mfa' } }),
      })
    ).body.id as string;
    const active = await waitFor(async () => {
      const seen = await statusOf(`/v1/links/${mfaLink}`);
      return seen.refresh_status === 'idle' ? seen : undefined;
    }, HANG_GUARD_MS);
    t.ok(active, 'a link whose bank asks for a code synced first');
    const mfa = await app.request('POST', '/v1/refresh_intents', { key, body: { link_id: mfaLink } });
    t.equal(mfa.status, 200, mfa.text);
    const waiting = await waitFor(async () => {
      const seen = await statusOf(`/v1/refresh_intents/${mfa.body.id}`);
      return seen.status === 'requires_mfa' ? seen : undefined;
    }, HANG_GUARD_MS);
    t.ok(waiting, 'its refresh waits for the code');
    const answered = await app.request('POST', `/v1/refresh_intents/${mfa.body.id}/mfa`, {
      key,
      body: { code: '123456' },
    });
    t.equal(answered.status, 200, answered.text);
    const resumed = await waitFor(async () => {
      const seen = await statusOf(`/v1/refresh_intents/${mfa.body.id}`);
      return seen.status === 'succeeded' ? seen : undefined;
    }, HANG_GUARD_MS);
    t.ok(resumed, 'the code sent it back to a worker at once');
  });

  t.test('with wakeOnCommit off the workers wait for their poll', async (t) => {
    const { app, key } = await appWithIdleWorkers(t, engine, false);
    const link = (await app.request('POST', '/v1/links', { key, body: linkBody() })).body.id as string;
    await sleep(2000);
    const job = await app.db.knex('jobs').where({ link_id: link }).first('status');
    t.equal(job?.status, 'queued', "the new link's first sync is still queued after 2 s");
  });
});
