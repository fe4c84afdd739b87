import t from 'tap';
import { pino } from 'pino';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { createTenant, forEachEngine, startTestApp, RAISED_LIMITS } from '../helpers/harness.js';

/*
 * Idempotency keys answer a retry for `idempotency.ttlHours`, then housekeeping removes them in the same
 * short batches as the rest of retention (a scheduler that was down for a day does not come back to one
 * delete of a day of keys), counted like every other kind.
 */
const HOUR = 3_600_000;

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const createToken = (key: string) =>
    app.request('POST', '/v1/widget_tokens', { key: sk, body: {}, headers: { 'Idempotency-Key': key } });
  const keys = async () =>
    (await app.db.knex('idempotency_keys').select('idempotency_key')).map(
      (row: { idempotency_key: string }) => row.idempotency_key,
    );

  // Seven keys a day and a half ago, three of them in the same millisecond; two keys an hour ago.
  for (const key of ['old-1', 'old-2', 'old-3']) t.equal((await createToken(key)).status, 200);
  app.clock.advance(1);
  for (const key of ['old-4', 'old-5', 'old-6', 'old-7']) {
    t.equal((await createToken(key)).status, 200);
    app.clock.advance(1000);
  }
  app.clock.advance(35 * HOUR);
  const recent = await createToken('recent-1');
  await createToken('recent-2');
  app.clock.advance(HOUR);

  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const statements: string[] = [];
  const listener = (query: { sql: string }) => {
    if (/idempotency_keys/.test(query.sql) && /^delete/i.test(query.sql)) statements.push(query.sql);
  };
  app.db.knex.on('query', listener);
  await runHousekeeping({
    ...app.services,
    logger,
    config: { ...app.config, retention: { ...app.config.retention, batchSize: 2 } },
  });
  app.db.knex.off('query', listener);

  t.same((await keys()).sort(), ['recent-1', 'recent-2'], 'the keys past 24 hours are gone, the recent stay');
  t.ok(statements.length >= 3, `in batches of about two (${statements.length} deletes for seven keys)`);
  const done = lines.find((line) => line.msg === 'housekeeping done');
  t.equal(done?.idempotency_keys_removed, 7, 'the log line counts them');
  t.match(done?.retention_pruned, { idempotency_keys: 7 }, 'as a retention kind');

  const replay = await createToken('recent-1');
  t.equal(replay.headers.get('idempotent-replayed'), 'true', 'a recent key still replays');
  t.equal(replay.body.id, recent.body.id);
  const afresh = await createToken('old-1');
  t.equal(afresh.status, 200);
  t.equal(afresh.headers.get('idempotent-replayed'), null, 'a pruned key is a new request');
});
