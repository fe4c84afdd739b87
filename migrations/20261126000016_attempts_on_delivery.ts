import type { Knex } from 'knex';

/*
 * Frozen snapshot: a delivery's attempts move onto its own row, as a JSON array in `attempt_history`
 * (oldest first, the keys of the old `webhook_attempts` columns), and `webhook_attempts` goes.
 *
 * Why (issue 17, bench/webhooks.ts on Postgres): every attempt was a row of its own, written in the cycle
 * that recorded its result on the delivery row: one more statement per cycle, a heap insert, two index
 * entries and a foreign-key check per attempt; about 20 µs of Postgres CPU per delivery of about 90, for a
 * history the API only ever reads whole, on the single-delivery read. The delivery row is rewritten by
 * that same cycle anyway (its status changes, so never a HOT update): appending the attempt to it costs
 * only its bytes. A series has at most `retryScheduleSeconds` attempts (6 by default), each with at most
 * `responseBytesKept` of excerpt (2 KiB by default).
 */
/** Contract: it drops webhook_attempts, where the previous release's dispatcher records each attempt. */
export const kind = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.text('attempt_history');
  });
  // SQLite's json_group_array(… ORDER BY …) loses its arguments' JSON subtype (3.44) and quotes each
  // attempt as a string, so the array is joined by hand there.
  if (knex.client.dialect === 'postgresql') {
    await knex.raw(`
      UPDATE webhook_deliveries SET attempt_history = a.history
      FROM (
        SELECT delivery_id, json_agg(json_build_object(
          'number', number, 'started_at', started_at, 'duration_ms', duration_ms,
          'status_code', status_code, 'error', error, 'response_excerpt', response_excerpt)
          ORDER BY number, started_at)::text AS history
        FROM webhook_attempts GROUP BY delivery_id
      ) AS a
      WHERE webhook_deliveries.id = a.delivery_id`);
  } else {
    await knex.raw(`
      UPDATE webhook_deliveries SET attempt_history = (
        SELECT '[' || group_concat(json_object(
          'number', number, 'started_at', started_at, 'duration_ms', duration_ms,
          'status_code', status_code, 'error', error, 'response_excerpt', response_excerpt),
          ',' ORDER BY number, started_at) || ']'
        FROM webhook_attempts WHERE webhook_attempts.delivery_id = webhook_deliveries.id)
      WHERE id IN (SELECT delivery_id FROM webhook_attempts)`);
  }
  await knex.schema.dropTable('webhook_attempts');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_attempts', (t) => {
    t.string('id', 24).primary();
    t.string('delivery_id', 24)
      .notNullable()
      .references('id')
      .inTable('webhook_deliveries')
      .onDelete('CASCADE');
    t.integer('number').notNullable();
    t.bigInteger('started_at').notNullable();
    t.integer('duration_ms').notNullable();
    t.integer('status_code');
    t.text('error');
    t.text('response_excerpt');
    t.index(['delivery_id', 'number']);
  });
  // The attempts' ids were never shown anywhere: new ones are made from the delivery's and the number.
  if (knex.client.dialect === 'postgresql') {
    await knex.raw(`
      INSERT INTO webhook_attempts
        (id, delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt)
      SELECT 'wa_' || substr(md5(d.id || ':' || (a->>'number')), 1, 16), d.id, (a->>'number')::integer,
        (a->>'started_at')::bigint, (a->>'duration_ms')::integer, (a->>'status_code')::integer,
        a->>'error', a->>'response_excerpt'
      FROM webhook_deliveries AS d, json_array_elements(d.attempt_history::json) AS a
      WHERE d.attempt_history IS NOT NULL`);
  } else {
    await knex.raw(`
      INSERT INTO webhook_attempts
        (id, delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt)
      SELECT 'wa_' || substr(lower(hex(randomblob(8))), 1, 16), d.id, a.value ->> 'number',
        a.value ->> 'started_at', a.value ->> 'duration_ms', a.value ->> 'status_code', a.value ->> 'error',
        a.value ->> 'response_excerpt'
      FROM webhook_deliveries AS d, json_each(d.attempt_history) AS a
      WHERE d.attempt_history IS NOT NULL`);
  }
  // Not knex's dropColumn: on SQLite it copies the table into a new one and drops the old, whose cascade
  // would take the attempts just restored with it. Both engines drop a column in place.
  await knex.raw('ALTER TABLE webhook_deliveries DROP COLUMN attempt_history');
}
