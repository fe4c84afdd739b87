import t from 'tap';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import { openDatabase } from '../../src/db/database.js';
import { migrateRollback, migrateUp, migrationNames } from '../../src/db/migrations.js';
import { withHistory, type DeliveryRow } from '../../src/webhooks/deliveries.js';
import { forEachEngine, freshDatabase } from '../helpers/harness.js';

/*
 * migrations/20261126000016 moves each delivery's attempts from `webhook_attempts` onto its row: a database
 * with history from before it keeps every attempt, in order, with its values; the rollback gives the table
 * back with the same attempts.
 */

const MOVE = '20261126000016_attempts_on_delivery';

/** The migrations before MOVE only, as a database made by the previous release had them. */
const before: Knex.MigratorConfig = {
  tableName: 'knex_migrations',
  migrationSource: {
    getMigrations: async () => migrationNames().filter((name) => name < MOVE),
    getMigrationName: (name: string) => name,
    getMigration: async (name: string) =>
      import(pathToFileURL(new URL(`../../migrations/${name}.js`, import.meta.url).pathname).href),
  },
};

const T0 = Date.UTC(2026, 10, 1);

/** As `webhook_attempts` held them; inserted out of order, as concurrent cycles could. */
const OLD_ATTEMPTS = [
  {
    id: 'wa_0000000000000002',
    delivery_id: 'wd_retried',
    number: 2,
    started_at: T0 + 60_000,
    duration_ms: 45,
    status_code: 200,
    error: null,
    response_excerpt: 'ok, "quoted" and ñandú',
  },
  {
    id: 'wa_0000000000000001',
    delivery_id: 'wd_retried',
    number: 1,
    started_at: T0 + 1_000,
    duration_ms: 10_000,
    status_code: null,
    error: 'timed out after 10000 ms',
    response_excerpt: null,
  },
];

forEachEngine(t, async (t, engine) => {
  const { url } = await freshDatabase(t, engine);
  const db = openDatabase({ url });
  t.teardown(() => db.close());
  await db.knex.migrate.latest(before);

  await db.knex('organisations').insert({ id: 'org_a', name: 'A', created_at: T0 });
  await db.knex('webhook_endpoints').insert({
    id: 'we_a',
    org_id: 'org_a',
    mode: 'test',
    url: 'https://example.com/hook',
    enabled_events: '["*"]',
    secret_encrypted: 'sealed',
    created_at: T0,
    updated_at: T0,
  });
  await db.knex('events').insert([
    { id: 'evt_1', org_id: 'org_a', mode: 'test', type: 'link.refreshed', data: '{}', created_at: T0 },
    { id: 'evt_2', org_id: 'org_a', mode: 'test', type: 'link.refreshed', data: '{}', created_at: T0 },
  ]);
  const delivery = (id: string, eventId: string, attempts: number) => ({
    id,
    org_id: 'org_a',
    mode: 'test',
    event_id: eventId,
    event_type: 'link.refreshed',
    endpoint_id: 'we_a',
    status: attempts > 0 ? 'succeeded' : 'pending',
    attempts,
    next_attempt_at: attempts > 0 ? null : T0,
    created_at: T0,
    updated_at: T0,
  });
  await db
    .knex('webhook_deliveries')
    .insert([delivery('wd_retried', 'evt_1', 2), delivery('wd_new', 'evt_2', 0)]);
  await db.knex('webhook_attempts').insert(OLD_ATTEMPTS);

  const history = async (id: string) => {
    const row: DeliveryRow = await db.knex('webhook_deliveries').where({ id }).first();
    return withHistory(row).attempt_history;
  };

  await t.test('each delivery keeps its attempts, oldest first, with their values', async (t) => {
    t.same(
      await migrateUp(db),
      migrationNames().filter((name) => name >= MOVE),
    );
    t.notOk(await db.knex.schema.hasTable('webhook_attempts'), 'the table is gone');
    t.same(await history('wd_retried'), [
      {
        object: 'webhook_attempt',
        number: 1,
        started_at: new Date(T0 + 1_000).toISOString(),
        duration_ms: 10_000,
        status_code: null,
        error: 'timed out after 10000 ms',
        response_excerpt: null,
      },
      {
        object: 'webhook_attempt',
        number: 2,
        started_at: new Date(T0 + 60_000).toISOString(),
        duration_ms: 45,
        status_code: 200,
        error: null,
        response_excerpt: 'ok, "quoted" and ñandú',
      },
    ]);
    t.same(await history('wd_new'), [], 'a delivery not yet attempted has none');
  });

  await t.test('the rollback gives webhook_attempts back with the same attempts', async (t) => {
    const reverted = await migrateRollback(db);
    t.ok(reverted.includes(MOVE));
    const rows = await db
      .knex('webhook_attempts')
      .orderBy('number')
      .select(
        'delivery_id',
        'number',
        'started_at',
        'duration_ms',
        'status_code',
        'error',
        'response_excerpt',
      );
    t.same(
      rows.map((row) => ({ ...row, started_at: Number(row.started_at) })),
      [...OLD_ATTEMPTS].reverse().map(({ id: _id, ...attempt }) => attempt),
    );
    t.notOk(await db.knex.schema.hasColumn('webhook_deliveries', 'attempt_history'));
    await migrateUp(db);
    t.equal((await history('wd_retried'))?.length, 2, 'and migrating again moves them again');
  });
});
