import t, { type Test } from 'tap';
import { pino } from 'pino';
import { openDatabase, type Database } from '../../src/db/database.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import type { RetentionCounts } from '../../src/scheduler/retention.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { forEachEngine, setTimeLimit, startTestApp, TEST_EPOCH, type TestApp } from '../helpers/harness.js';
import { tenantWithStalledEndpoint } from '../helpers/webhook-events.js';

/*
 * Issue 28, item 11: one tenant cannot stall pruning. A tenant's endpoint is disabled with a backlog of
 * pending deliveries, so their events stay whatever their age; they are the oldest rows of the events
 * table. Other events, delivered, go past retention behind them. Each housekeeping pass must spend what it
 * reads on the rows it can prune: the walk used to pass every held event again in every batch (a pass of
 * 40 batches read the 800 held events 40 times), so that enough of them used a pass's whole budget.
 *
 * What the walk reads is measured where the engine says it: on PostgreSQL by its own count of the index
 * entries read from `events` (pg_stat_user_indexes), flushed by running the pass on connections of its own
 * and closing them; on SQLite by the rows each walk statement returns, with its plan showing that it reads
 * nothing it does not return (one index range, no filter evaluated per row, no sort). Before the change
 * the first pass read 34,774 entries on PostgreSQL and the second 17,924 (bounds 2,066 and 220), and
 * SQLite's plan showed the NOT EXISTS evaluated for each row the walk passed.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const HELD = 800;
const PRUNABLE_FIRST = 200;
const PRUNABLE_LATER = 100;
/** 15 rows a batch, three rows an event: 5 events a batch, so the first pass takes 40-odd batches. */
const RETENTION = { eventsDays: 30, batchSize: 15 };

setTimeLimit(t, 600_000);

interface PassResult {
  pruned: RetentionCounts;
  /** Rows the walk statements returned (select ... from events). */
  walkRows: number;
  /** SQLite: the plans of those statements. PostgreSQL: the engine's count of rows read from `events`. */
  plans: string[];
  engineRowsRead: number | null;
}

/** The pass read at most `bound` rows of `events` (PostgreSQL's count), or only what it returned (SQLite's plans). */
function readNoMoreThan(t: Test, result: PassResult, bound: number): void {
  if (result.engineRowsRead !== null) {
    t.ok(
      result.engineRowsRead <= bound,
      `PostgreSQL counted ${result.engineRowsRead} rows read from events (at most ${bound})`,
    );
  } else {
    for (const plan of result.plans) {
      t.notMatch(plan, /SUBQUERY|SCAN |TEMP B-TREE/, `one index range, nothing filtered: ${plan}`);
    }
  }
}

/**
 * Index entries read from `events` so far, as PostgreSQL counts them: by scans of each of its indexes but the
 * primary key (which the deletes and holds by id read, as many as they write). Live and dead entries alike:
 * a pruned or held event leaves a dead entry until vacuum, and a walk that passes it reads it. (Scans of the
 * whole table are left out: the API's own reads in the setup may be counted late, and no walk scans; SQLite's
 * plans show that.)
 */
async function eventsRowsRead(admin: Database): Promise<number> {
  await admin.knex.raw('select pg_stat_clear_snapshot()');
  const indexes = await admin.knex.raw(
    `select coalesce(sum(idx_tup_read), 0)::bigint as n from pg_stat_user_indexes
       where schemaname = current_schema() and relname = 'events' and indexrelname <> 'events_pkey'`,
  );
  return Number(indexes.rows[0]?.n ?? 0);
}

/**
 * Runs `work` on a database handle of its own, named `name` on PostgreSQL, and closes it: its backends
 * flush their statistics as they exit, and leave pg_stat_activity after (their exit hooks run in that
 * order), so the counters are complete when this returns. (A backend that stays connected may hold its
 * counts back for ten seconds.)
 */
async function onOwnConnections<T>(
  app: TestApp,
  name: string,
  work: (db: Database) => Promise<T>,
): Promise<T> {
  const separator = app.config.databaseUrl.includes('?') ? '&' : '?';
  const url =
    app.engine === 'postgres'
      ? `${app.config.databaseUrl}${separator}application_name=${name}`
      : app.config.databaseUrl;
  const db = openDatabase({ url });
  try {
    return await work(db);
  } finally {
    await db.close();
    for (let i = 0; app.engine === 'postgres' && i < 200; i++) {
      const left = await app.db.knex.raw(
        'select count(*)::int as n from pg_stat_activity where application_name = ?',
        [name],
      );
      if (Number(left.rows[0].n) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * One housekeeping pass, a minute after the last, on a database handle of its own (so that PostgreSQL
 * flushes its statistics when its connections close).
 */
async function pass(app: TestApp, name: string): Promise<PassResult> {
  app.clock.advance(MINUTE);
  const before = app.engine === 'postgres' ? await eventsRowsRead(app.db) : 0;
  const walks: { sql: string; bindings: unknown[]; rows: number }[] = [];
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const plans = await onOwnConnections(app, name, async (db) => {
    db.knex.on('query-response', (response: unknown, query: { sql: string; bindings?: unknown[] }) => {
      if (/^select .* from [`"]events[`"]/.test(query.sql)) {
        walks.push({
          sql: query.sql,
          bindings: query.bindings ?? [],
          rows: Array.isArray(response) ? response.length : 0,
        });
      }
    });
    await runHousekeeping({
      ...app.services,
      db,
      logger,
      config: { ...app.config, retention: { ...app.config.retention, ...RETENTION } },
    });
    const explained: string[] = [];
    if (app.engine === 'sqlite') {
      // Each statement's plan once (a pass runs the same few in every batch), on the pass's own connection.
      const unique = new Map(walks.map((walk) => [walk.sql, walk.bindings]));
      for (const [sql, bindings] of unique) {
        const plan: { detail: string }[] = await db.knex.raw(`explain query plan ${sql}`, bindings as never);
        explained.push(`${sql}\n  ${plan.map((row) => row.detail).join('; ')}`);
      }
    }
    return explained;
  });
  const done = lines.find((line) => line.msg === 'housekeeping done');
  if (!done) throw new Error('no housekeeping line');
  const engineRowsRead = app.engine === 'postgres' ? (await eventsRowsRead(app.db)) - before : null;
  return {
    pruned: done.retention_pruned as RetentionCounts,
    walkRows: walks.reduce((sum, walk) => sum + walk.rows, 0),
    plans,
    engineRowsRead,
  };
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const stalledTenant = await tenantWithStalledEndpoint(t, app);
  const { sk, stalled, receiver } = stalledTenant;
  /** `count` events of `type`, fired 8 at a time. */
  const fire = async (type: string, count: number) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 8)
      ids.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(8, count - i) }, () => stalledTenant.fire(type)),
        )),
      );
    return ids;
  };
  const dispatcher = new Dispatcher(app.services);
  t.teardown(() => dispatcher.close());
  const count = async (query: (q: ReturnType<TestApp['db']['knex']>) => unknown) => {
    const builder = app.db.knex('events');
    query(builder);
    const [row] = await builder.count({ n: '*' });
    return Number((row as { n: number | string }).n);
  };
  /**
   * Events older than the cut-off a pass at `passAt` uses, but the held ones: read on connections of its
   * own, so that PostgreSQL's count of what the pass reads does not get this read too.
   */
  const prunableAt = (passAt: number, held: string[]) =>
    onOwnConnections(app, 'svc_test_count', async (db) => {
      const [row] = await db
        .knex('events')
        .where('created_at', '<', passAt - RETENTION.eventsDays * DAY)
        .whereNotIn('id', held)
        .count({ n: '*' });
      return Number((row as { n: number | string }).n);
    });

  // The oldest rows: events whose deliveries wait for an endpoint its tenant disabled.
  await fire('refresh_intent.succeeded', HELD);
  const disabled = await app.request('PATCH', `/v1/webhook_endpoints/${stalled}`, {
    key: sk,
    body: { disabled: true },
  });
  t.equal(disabled.status, 200, disabled.text);
  // Behind them, events delivered at once, past retention at the first pass...
  app.clock.advance(MINUTE);
  await fire('link.refreshed', PRUNABLE_FIRST);
  await dispatcher.dispatchDue();
  // ...and others an hour after that pass.
  app.clock.set(TEST_EPOCH + 11 * HOUR);
  const later = await fire('link.refreshed', PRUNABLE_LATER);
  await dispatcher.dispatchDue();
  // (The link's first sync emitted one event of each endpoint's type too.)
  const delivered = receiver.received.length;
  t.equal(delivered, PRUNABLE_FIRST + PRUNABLE_LATER + 1, 'the flowing endpoint got its events');
  const held: string[] = (
    await app.db
      .knex('webhook_deliveries')
      .where({ endpoint_id: stalled, status: 'pending' })
      .select('event_id')
  ).map((row: { event_id: string }) => row.event_id);
  t.equal(held.length, HELD + 1, 'the disabled endpoint holds a delivery of each of its events');
  const pendingOf = async () =>
    Number(
      (
        await app.db
          .knex('webhook_deliveries')
          .where({ endpoint_id: stalled, status: 'pending' })
          .count({ n: '*' })
      )[0]?.n,
    );

  t.test('a pass prunes what it can and reads each held event at most once', async (t) => {
    // Held 10 hours past retention by then.
    app.clock.set(TEST_EPOCH + RETENTION.eventsDays * DAY + 10 * HOUR - MINUTE);
    const prunable = await prunableAt(app.clock.now() + MINUTE, held);
    t.ok(prunable >= PRUNABLE_FIRST, `${prunable} prunable events`);
    const result = await pass(app, 'svc_retention_first');
    t.equal(result.pruned.events, prunable, 'every prunable event went in one pass');
    t.equal(await count((q) => q.whereIn('id', held)), held.length, 'the held events stay');
    t.equal(await pendingOf(), held.length, 'with their pending deliveries');
    // The walk used to read every held event in each of its 40-odd batches: 800 x 40 rows.
    const bound = 2 * (held.length + prunable) + 50;
    t.ok(result.walkRows <= held.length + prunable + 20, `the walk returned ${result.walkRows} rows`);
    readNoMoreThan(t, result, bound);
  });

  t.test('the next passes spend nothing on the held events', async (t) => {
    app.clock.set(TEST_EPOCH + RETENTION.eventsDays * DAY + 11 * HOUR + MINUTE);
    const result = await pass(app, 'svc_retention_second');
    t.equal(result.pruned.events, PRUNABLE_LATER, 'the events that went past retention since');
    t.equal(await count((q) => q.whereIn('id', later)), 0);
    t.equal(await count((q) => q.whereIn('id', held)), held.length, 'the held events stay');
    const bound = 2 * PRUNABLE_LATER + 20;
    t.ok(result.walkRows <= PRUNABLE_LATER + 10, `the walk returned ${result.walkRows} rows`);
    readNoMoreThan(t, result, bound);
    const quiet = await pass(app, 'svc_retention_quiet');
    t.equal(quiet.pruned.events, 0);
    t.equal(quiet.walkRows, 0, 'a pass with nothing new to prune reads no event');
  });

  t.test('once their deliveries are made, the held events go too', async (t) => {
    const enabled = await app.request('PATCH', `/v1/webhook_endpoints/${stalled}`, {
      key: sk,
      body: { disabled: false },
    });
    t.equal(enabled.status, 200, enabled.text);
    await dispatcher.dispatchDue();
    t.equal(receiver.received.length, delivered + held.length, 'the backlog was delivered');
    app.clock.advance(DAY);
    const result = await pass(app, 'svc_retention_released');
    t.equal(result.pruned.events, held.length, 'looked at again, they are pruned');
    t.equal(await count((q) => q.whereIn('id', held)), 0);
  });
});
