import t from 'tap';
import { pino } from 'pino';
import { issueExchangeToken } from '../../src/exchange/exchange.js';
import { startMetricsServer } from '../../src/metrics/metrics.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import type { RetentionCounts } from '../../src/scheduler/retention.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { Config } from '../../src/config/defaults.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  startTestApp,
  storedAttempts,
  RAISED_LIMITS,
  type TestApp,
} from '../helpers/harness.js';
import { startReceiver } from '../helpers/receiver.js';

/*
 * Retention over real data: a quarter of history written through the API and the sync engine at the test
 * epoch, then 100 days on a little more, then housekeeping. What is past its retention goes with its
 * dependants; what must never go (a pending delivery and its event, each bank's latest outcome, each link's
 * latest job, an active job, an intent waiting for MFA, movements, the audit log by default, a grant
 * revocation still pending or failed) stays.
 */

const MINUTE = 60_000;
const PRUNED_TABLES = [
  'idempotency_keys',
  'events',
  'webhook_deliveries',
  'jobs',
  'bank_sync_outcomes',
  'refresh_intents',
  'widget_sessions',
  'widget_tokens',
  'exchange_tokens',
  'audit_log',
  'grant_revocations',
];
const DAY = 24 * 60 * MINUTE;

async function count(app: TestApp, table: string, where: Record<string, unknown> = {}): Promise<number> {
  const [row] = await app.db.knex(table).where(where).count({ n: '*' });
  return Number((row as { n: number | string }).n);
}

/** The attempts the deliveries keep, on their rows. */
async function attemptCount(app: TestApp): Promise<number> {
  return (await storedAttempts(app.db)).length;
}

/** The rows of every kind retention prunes. */
async function prunedKinds(app: TestApp) {
  return {
    events: await count(app, 'events'),
    deliveries: await count(app, 'webhook_deliveries'),
    attempts: await attemptCount(app),
    jobs: await count(app, 'jobs'),
    outcomes: await count(app, 'bank_sync_outcomes'),
    intents: await count(app, 'refresh_intents'),
    tokens: await count(app, 'widget_tokens'),
    exchangeTokens: await count(app, 'exchange_tokens'),
    revocations: await count(app, 'grant_revocations'),
  };
}

/** While housekeeping runs: the statements the plans' check reads are its own. */
let housekeeping = false;

/** Housekeeping with other retention settings and a logger whose lines the test reads. */
async function housekeep(
  app: TestApp,
  retention: Partial<Config['retention']>,
): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  app.clock.advance(MINUTE); // a new housekeeping tick
  housekeeping = true;
  try {
    await runHousekeeping({
      ...app.services,
      logger,
      config: { ...app.config, retention: { ...app.config.retention, ...retention } },
    });
  } finally {
    housekeeping = false;
  }
  return lines.filter((line) => line.msg === 'housekeeping done');
}

function pick(counts: RetentionCounts) {
  const { events, webhook_deliveries, webhook_attempts } = counts;
  return { events, webhook_deliveries, webhook_attempts };
}

/** A row of the revoke outbox as the consent flow leaves it (the grant id stays sealed; any text does here). */
async function revocation(
  app: TestApp,
  orgId: string,
  status: 'pending' | 'revoked' | 'failed',
  revokedAt: number | null,
): Promise<string> {
  const id = `grv_${status}_${app.clock.now()}`;
  const now = app.clock.now();
  await app.db.knex('grant_revocations').insert({
    id,
    link_id: `link_${id}`,
    org_id: orgId,
    mode: 'test',
    bank_id: 'bancoabierto',
    client_id: 'client',
    grant_id_sealed: 'sealed',
    status,
    attempts: status === 'failed' ? 20 : 1,
    next_attempt_at: now + MINUTE,
    locked_until: null,
    last_error: null,
    created_at: now,
    updated_at: now,
    revoked_at: revokedAt,
  });
  return id;
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    // One attempt now, the next 30 days later: a delivery that failed once stays pending past the cut-off.
    config: { dispatcher: { retryScheduleSeconds: [0, 2_592_000, 2_592_000, 2_592_000, 2_592_000] } },
  });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const good = await startReceiver(t);
  const bad = await startReceiver(t, (_request, response) => {
    response.writeHead(503);
    response.end('down');
  });
  for (const [url, events] of [
    [good.url, ['*']],
    [bad.url, ['account.created']],
  ] as const) {
    const created = await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url, enabled_events: events },
    });
    t.equal(created.status, 200, created.text);
  }
  let rutSeq = 1;
  const newLink = async (password = 'sandbox', overrides: Record<string, unknown> = {}) => {
    const n = rutSeq++;
    const rut = `${n}${n}.${n}${n}${n}.${n}${n}${n}-${n}`;
    const created = await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ credentials: { rut, password }, ...overrides }),
    });
    if (created.status !== 200) throw new Error(created.text);
    return created.body.id as string;
  };
  const refresh = async (linkId: string) => {
    const response = await app.request('POST', '/v1/refresh_intents', { key: sk, body: { link_id: linkId } });
    if (response.status !== 200) throw new Error(response.text);
    return response.body.id as string;
  };

  // The old history, at the test epoch.
  const busy = await newLink();
  await runSyncs(app);
  app.clock.advance(10 * MINUTE);
  const oldIntent = await refresh(busy);
  await runSyncs(app);
  const quiet = await newLink('sandbox', { bank_id: 'santander' }); // synced once, never again
  await runSyncs(app);
  await new Dispatcher(app.services).dispatchDue();
  const oldWidgetToken = (await app.request('POST', '/v1/widget_tokens', { key: sk, body: {} })).body.id;
  const exchangeToken = () =>
    app.db.transaction((trx) =>
      issueExchangeToken(trx, {
        orgId: tenant.orgId,
        mode: 'test',
        linkId: busy,
        widgetTokenId: null,
        intent: 'connect',
        ttlMs: 5 * MINUTE,
        now: app.clock.now(),
      }),
    );
  await exchangeToken();
  // The revoke outbox: one the bank confirmed, one still being told, one that gave up; all a quarter old.
  const oldRevoked = await revocation(app, tenant.orgId, 'revoked', app.clock.now());
  app.clock.advance(1);
  const oldPending = await revocation(app, tenant.orgId, 'pending', null);
  app.clock.advance(1);
  const oldFailed = await revocation(app, tenant.orgId, 'failed', null);
  const pendingEvents: string[] = (
    await app.db.knex('webhook_deliveries').where({ status: 'pending' }).distinct('event_id')
  ).map((row: { event_id: string }) => row.event_id);
  t.ok(pendingEvents.length > 0, 'a delivery failed once and waits 30 days for its next attempt');
  t.ok((await attemptCount(app)) > 0, 'the deliveries made attempts');
  const oldEvents = await count(app, 'events');
  const quietOutcomes = await count(app, 'bank_sync_outcomes', { bank_id: 'santander' });
  t.equal(quietOutcomes, 1);

  // A hundred days on: new history.
  app.clock.advance(100 * DAY);
  const newIntent = await refresh(busy);
  await runSyncs(app);
  const newWidgetToken = (await app.request('POST', '/v1/widget_tokens', { key: sk, body: {} })).body.id;
  await exchangeToken();
  const newRevoked = await revocation(app, tenant.orgId, 'revoked', app.clock.now());
  const mfaLink = await newLink('sandbox-mfa');
  await runSyncs(app);
  const waiting = await refresh(mfaLink);
  await runSyncs(app);
  t.equal((await app.db.knex('refresh_intents').where({ id: waiting }).first()).status, 'requires_mfa');
  const queuedLink = await newLink(); // its first sync stays queued
  // An intent still waiting for MFA and a queued job, as if they were old: they stay whatever their age.
  await app.db
    .knex('refresh_intents')
    .where({ id: waiting })
    .update({ created_at: app.clock.now() - 100 * DAY });
  await app.db
    .knex('jobs')
    .whereIn('link_id', [mfaLink, queuedLink])
    .whereIn('status', ['queued', 'running', 'waiting_mfa'])
    .update({ created_at: app.clock.now() - 100 * DAY });
  const activeJobs = await app.db.knex('jobs').whereIn('status', ['queued', 'running', 'waiting_mfa']);
  t.ok(activeJobs.length >= 2, 'a queued job and one waiting for MFA');

  const movements = await count(app, 'movements');
  const audit = await count(app, 'audit_log');
  t.ok(movements > 0 && audit > 0);
  const before = await prunedKinds(app);

  // Every statement of the passes below that reads or deletes a pruned table, for the plans' check at the end.
  const statements: { sql: string; bindings: unknown[] }[] = [];
  const pruneStatement = new RegExp(`^(delete from|select .*? from) \`(${PRUNED_TABLES.join('|')})\``);
  const listener = (query: { sql: string; bindings?: unknown[] }) => {
    if (housekeeping && pruneStatement.test(query.sql))
      statements.push({ sql: query.sql, bindings: query.bindings ?? [] });
  };
  app.db.knex.on('query', listener);

  /** Every kind but events kept forever (the audit log is by default): a pass that can prune only events. */
  const ONLY_EVENTS_PRUNED = {
    jobsDays: 0,
    bankOutcomesDays: 0,
    refreshIntentsDays: 0,
    widgetTokensDays: 0,
    auditLogDays: 0,
    grantRevocationsDays: 0,
  };

  t.test('a kind set to 0 is kept forever', async (t) => {
    const [line] = await housekeep(app, { ...ONLY_EVENTS_PRUNED, eventsDays: 0 });
    t.match(line?.retention_pruned, {
      events: 0,
      webhook_deliveries: 0,
      webhook_attempts: 0,
      jobs: 0,
      bank_sync_outcomes: 0,
      refresh_intents: 0,
      widget_tokens: 0,
      exchange_tokens: 0,
      audit_log: 0,
      grant_revocations: 0,
    });
    t.same(await prunedKinds(app), before);
  });

  const firstPass = { events: 0, webhook_deliveries: 0, webhook_attempts: 0 };
  t.test('a pass stops at maxRowsPerPass rows read, in batches, and the next goes on', async (t) => {
    const [line] = await housekeep(app, { ...ONLY_EVENTS_PRUNED, batchSize: 2, maxRowsPerPass: 3 });
    // Three events read, one a batch: each pruned, or held by its pending delivery and set aside.
    Object.assign(firstPass, pick(line?.retention_pruned as RetentionCounts));
    const setAside = await app.db.knex('events').whereNotNull('held_until').count({ n: '*' });
    t.equal(firstPass.events + Number(setAside[0]?.n), 3, 'three events read');
    t.equal(await count(app, 'events'), before.events - firstPass.events);
    t.equal(await count(app, 'webhook_deliveries'), before.deliveries - firstPass.webhook_deliveries);
    t.equal(await attemptCount(app), before.attempts - firstPass.webhook_attempts);
  });

  t.test('the defaults remove what is past its retention and keep what must stay', async (t) => {
    const [line] = await housekeep(app, { batchSize: 7 });
    const pruned = line?.retention_pruned as RetentionCounts;
    t.ok(line, 'the housekeeping line');

    // Events: every old one goes but those with a pending delivery; their deliveries and attempts go too.
    const events = await app.db.knex('events').select('id', 'created_at');
    const old = events.filter((e: { created_at: number }) => e.created_at < app.clock.now() - 30 * DAY);
    t.same(
      old.map((e: { id: string }) => e.id).sort(),
      [...pendingEvents].sort(),
      'old events left: pending ones',
    );
    t.equal(
      pruned.events + firstPass.events,
      oldEvents - pendingEvents.length,
      'the log counts the events of this pass',
    );
    for (const eventId of pendingEvents) {
      t.ok(
        (await count(app, 'webhook_deliveries', { event_id: eventId, status: 'pending' })) > 0,
        'with its pending delivery',
      );
    }
    t.ok(pruned.webhook_deliveries > 0 && pruned.webhook_attempts > 0);
    const deliveriesPruned = firstPass.webhook_deliveries + pruned.webhook_deliveries;
    const attemptsPruned = firstPass.webhook_attempts + pruned.webhook_attempts;
    t.equal(await count(app, 'webhook_deliveries'), before.deliveries - deliveriesPruned);
    t.equal(await attemptCount(app), before.attempts - attemptsPruned);
    const kept: { id: string; attempts: number }[] = await app.db
      .knex('webhook_deliveries')
      .select('id', 'attempts');
    const history = new Map<string, number>();
    for (const attempt of await storedAttempts(app.db))
      history.set(attempt.delivery_id, (history.get(attempt.delivery_id) ?? 0) + 1);
    t.same(
      kept.filter((row) => (history.get(row.id) ?? 0) !== row.attempts),
      [],
      'each delivery left keeps every attempt it counts',
    );
    const orphanDeliveries = await app.db
      .knex('webhook_deliveries')
      .whereNotIn('event_id', app.db.knex('events').select('id'))
      .count({ n: '*' });
    t.equal(Number(orphanDeliveries[0]?.n), 0);

    // Jobs: the busy link's old ones go; the quiet link's only (latest) job and the active ones stay.
    t.equal(pruned.jobs, 2, "the busy link's two old jobs");
    t.equal(await count(app, 'jobs', { link_id: busy }), 1);
    t.equal(await count(app, 'jobs', { link_id: quiet }), 1, "a link's latest job stays");
    for (const job of activeJobs) t.ok(await app.db.knex('jobs').where({ id: job.id }).first(), job.status);

    // Bank outcomes: the old ones go, but each bank's latest.
    t.equal(await count(app, 'bank_sync_outcomes', { bank_id: 'santander' }), 1, "a bank's latest stays");
    t.equal(pruned.bank_sync_outcomes, before.outcomes - (await count(app, 'bank_sync_outcomes')));
    t.ok(pruned.bank_sync_outcomes >= 2);

    // Refresh intents: the old finished one goes; the one waiting for MFA stays, as does the new one.
    t.notOk(await app.db.knex('refresh_intents').where({ id: oldIntent }).first(), 'the old intent went');
    t.ok(await app.db.knex('refresh_intents').where({ id: waiting }).first(), 'the MFA wait stays');
    t.ok(await app.db.knex('refresh_intents').where({ id: newIntent }).first());
    t.equal(pruned.refresh_intents, before.intents - (await count(app, 'refresh_intents')));
    t.ok(pruned.refresh_intents >= 1);

    // Widget tokens: the old one goes, the new one stays.
    t.notOk(await app.db.knex('widget_tokens').where({ id: oldWidgetToken }).first());
    t.ok(await app.db.knex('widget_tokens').where({ id: newWidgetToken }).first());
    t.equal(pruned.widget_tokens, 1);
    t.equal(pruned.exchange_tokens, 1, 'and the old exchange token');
    t.equal(await count(app, 'exchange_tokens'), before.exchangeTokens - 1);

    // Grant revocations: the one the bank confirmed a quarter ago goes; the recent one, the one still being
    // told and the one that gave up stay.
    t.notOk(await app.db.knex('grant_revocations').where({ id: oldRevoked }).first(), 'the old revoked row');
    for (const id of [newRevoked, oldPending, oldFailed])
      t.ok(await app.db.knex('grant_revocations').where({ id }).first(), `${id} stays`);
    t.equal(pruned.grant_revocations, 1);
    t.equal(await count(app, 'grant_revocations'), before.revocations - 1);

    // Never by age: movements; the audit log by default.
    t.equal(await count(app, 'movements'), movements, 'every movement stays');
    t.equal(await count(app, 'audit_log'), audit, 'the audit log is kept forever by default');
    t.equal(pruned.audit_log, 0);

    // /metrics: the totals since install, from every pass.
    // Served by the API process's metrics server (here the test app's), read from what housekeeping stored.
    const server = await startMetricsServer(app.services.metrics, '127.0.0.1', 0);
    t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as { port: number };
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const metric = (kind: string) =>
      Number(new RegExp(`svc_retention_pruned_rows_total\\{kind="${kind}"\\} (\\d+)`).exec(text)?.[1]);
    t.equal(metric('events'), pruned.events + firstPass.events, 'the counter adds the passes');
    t.equal(metric('webhook_deliveries'), deliveriesPruned);
    t.equal(metric('webhook_attempts'), attemptsPruned);
    t.equal(metric('jobs'), pruned.jobs);
    t.equal(metric('bank_sync_outcomes'), pruned.bank_sync_outcomes);
    t.equal(metric('refresh_intents'), pruned.refresh_intents);
    t.equal(metric('widget_tokens'), 1);
    t.equal(metric('exchange_tokens'), 1);
    t.equal(metric('grant_revocations'), 1);
    t.match(text, /# TYPE svc_retention_pruned_rows_total counter/);

    // A second pass finds nothing more.
    const [again] = await housekeep(app, {});
    t.equal((again?.retention_pruned as RetentionCounts).events, 0);
    t.equal((again?.retention_pruned as RetentionCounts).jobs, 0);
  });

  t.test('the audit log goes when the operator sets its retention', async (t) => {
    app.clock.advance(400 * DAY);
    const [line] = await housekeep(app, { auditLogDays: 365 });
    t.equal((line?.retention_pruned as RetentionCounts).audit_log, audit);
    t.equal(await count(app, 'audit_log'), 0);
    t.equal(await count(app, 'movements'), movements, 'movements still all there');
  });

  t.test(
    'each prune statement walks an index, not the table (SQLite plans)',
    { skip: engine !== 'sqlite' },
    async (t) => {
      app.db.knex.off('query', listener);
      const seen = new Set(statements.map((s) => pruneStatement.exec(s.sql)?.[2]));
      for (const table of PRUNED_TABLES) t.ok(seen.has(table), `a statement prunes ${table}`);
      for (const { sql, bindings } of statements) {
        const plan: { detail: string }[] = await app.db.knex.raw(
          `explain query plan ${sql}`,
          bindings as never,
        );
        const scans = plan.map((row) => row.detail).filter((detail) => /^SCAN \w+$/.test(detail));
        t.same(scans, [], `${sql}\n${plan.map((row) => row.detail).join('; ')}`);
        // The revoke outbox's walk reads its own index in order: no sort of every revoked row kept.
        if (/^delete from `grant_revocations`/.test(sql))
          t.match(
            plan.map((row) => row.detail).join('; '),
            /USING (COVERING )?INDEX grant_revocations_revoked_idx \(status=\? AND revoked_at<\?\)(?!.*TEMP B-TREE)/,
            `${sql}: walks grant_revocations_revoked_idx`,
          );
      }
    },
  );
});
