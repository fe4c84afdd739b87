import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { SupervisorState } from '../../src/processes/status.js';
import { HANG_GUARD_MS, forEachEngine } from '../helpers/harness.js';
import { installedHome, startServe, waitFor } from '../helpers/cli.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';
import { timeLimitForRounds, crashRounds } from '../helpers/crash.js';
import { emitRefreshed } from '../helpers/webhook-events.js';

/** 12 unless CRASH_ROUNDS says otherwise (the soak run sets about 100). */
const KILLS = crashRounds(12);
/** Emitted each round; each dispatcher answers at least ANSWERED_PER_ROUND before it is killed. */
const EVENTS_PER_ROUND = 12;
const ANSWERED_PER_ROUND = 8;

// A kill took 0.9 s on an idle machine; the final settling may wait up to 50 s.
timeLimitForRounds(t, KILLS, 10_000, 120_000);

/**
 * `KILLS` `kill -9`s of the dispatcher child of `svc serve` during a burst of events, each while a delivery is in
 * flight (the receiver answers after 50 ms; each dispatcher delivers a round's worth and is killed while it
 * holds a request): every event still arrives, and a repeat carries the same event id.
 */
forEachEngine(t, async (t, engine) => {
  const { database, home, key, orgId } = await installedHome(t, engine);
  const serve = await startServe(t, {
    home,
    args: ['--roles', 'api,dispatcher'],
    env: {
      SVC_DISPATCHER_LEASE_SECONDS: '1',
      SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
      SVC_DISPATCHER_PER_ENDPOINT_CONCURRENCY: '8',
      SVC_SUPERVISOR_RESTART_DELAYS_MS: '[0]',
      SVC_SUPERVISOR_CRASH_LOOP_RESTARTS: '1000',
      SVC_LOG_LEVEL: 'warn',
    },
  });
  const receiver = await startReceiver(t, (_request, response) => {
    setTimeout(() => {
      response.writeHead(200);
      response.end('ok');
    }, 50);
  });
  const hook = (
    await serve.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: receiver.url, enabled_events: ['*'] },
    })
  ).body;
  const db = openDatabase({ url: database.url });
  t.teardown(() => db.close());

  const dispatcherPid = (): number | null => {
    try {
      const state = JSON.parse(
        readFileSync(join(home, 'run', `serve-${serve.pid}.json`), 'utf8'),
      ) as SupervisorState;
      return state.children.find((child) => child.role === 'dispatcher')?.pid ?? null;
    } catch {
      return null; // being rewritten
    }
  };
  const emitted: string[] = [];
  const burst = async (count: number) => {
    emitted.push(...(await emitRefreshed(db, orgId, count, { now: Date.now }, emitted.length)));
  };
  const began = Date.now();
  let killed = 0;
  let last: number | null = null;
  for (let round = 0; round < KILLS; round++) {
    await burst(EVENTS_PER_ROUND);
    const pid = await waitFor(
      async () => {
        const current = dispatcherPid();
        return current !== null && current !== last ? current : undefined;
      },
      HANG_GUARD_MS,
      20,
    );
    // Let this dispatcher deliver a round's worth, then kill it while it holds a request.
    const answered = () => receiver.received.length - receiver.pending();
    const before = answered();
    const busy = await waitFor(
      async () => (answered() >= before + ANSWERED_PER_ROUND && receiver.pending() > 0 ? true : undefined),
      HANG_GUARD_MS,
      2,
    );
    if (!pid || !busy) {
      t.fail(`round ${round}: no dispatcher (${pid}) or nothing in flight (${busy})`);
      break;
    }
    // The pid may have been replaced between the read and now only by another kill, which we do not make.
    process.kill(pid, 'SIGKILL');
    killed += 1;
    last = pid;
    await sleep(10);
  }
  t.equal(
    killed,
    KILLS,
    `${killed} kill -9s during a burst of ${emitted.length} events in ${Date.now() - began} ms`,
  );
  const arrived = await waitFor(
    async () => {
      const ids = new Set(receiver.received.map((r) => r.event?.id));
      return emitted.every((id) => ids.has(id)) ? ids : undefined;
    },
    30_000,
    100,
  );
  const ids = new Set(receiver.received.map((r) => r.event?.id));
  const missing = emitted.filter((id) => !ids.has(id));
  t.same(missing, [], 'no event lost');
  t.ok(arrived, 'every event arrived at least once');
  const repeats = receiver.received.length - ids.size;
  t.ok(
    repeats > 0,
    `${repeats} repeated deliveries (attempts cut off by a kill, made again after the lease)`,
  );
  let consistent = true;
  for (const got of receiver.received) {
    if (got.headers['svc-event-id'] !== got.event?.id) consistent = false;
    if (independentlyVerified(got.body, got.headers['svc-signature'], hook.secret) !== 1) consistent = false;
  }
  t.ok(consistent, 'every request, repeats included, carries its event id in body and header, signed');
  t.ok(
    receiver.received.every((r) => emitted.includes(r.event?.id)),
    'nothing arrived that was not emitted',
  );
  const settled = await waitFor(
    async () => {
      const rows: { status: string; n: number | string }[] = await db
        .knex('webhook_deliveries')
        .select('status')
        .count({ n: '*' })
        .groupBy('status');
      const pending = rows.filter((row) => row.status !== 'succeeded');
      return pending.length === 0 ? rows : undefined;
    },
    20_000,
    200,
  );
  t.ok(settled, 'every delivery ends succeeded');
});
