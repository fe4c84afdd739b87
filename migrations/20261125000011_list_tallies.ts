import type { Knex } from 'knex';

/*
 * Frozen snapshot: the event and delivery lists at a year's scale (issue 17; bench/growth.ts).
 *
 * Their `X-Total-Count` counted every row the filter matched (30 times slower on 500,000 events than on
 * 10,000): `event_tallies` and `webhook_delivery_tallies` keep the counts instead, as rows of changes
 * that housekeeping folds (src/db/tallies.ts), filled here from the rows already stored.
 *
 * Each filter of the two lists gets an index that serves it in the list's order, so that a page reads its
 * rows and no more: events by type (emission order), deliveries by endpoint and by status (newest first).
 * The delivery index by endpoint replaces the one on `endpoint_id` alone, which it covers.
 */
/**
 * Contract: the tallies are filled once from the rows present; events and deliveries the previous release
 * writes afterwards would never be counted.
 */
export const kind = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('event_tallies', (t) => {
    t.bigIncrements('id');
    t.string('org_id', 24).notNullable();
    t.string('mode', 8).notNullable();
    t.string('type', 64).notNullable();
    t.bigInteger('n').notNullable();
    t.index(['org_id', 'mode', 'type']);
  });
  await knex.schema.createTable('webhook_delivery_tallies', (t) => {
    t.bigIncrements('id');
    t.string('endpoint_id', 24)
      .notNullable()
      .references('id')
      .inTable('webhook_endpoints')
      .onDelete('CASCADE');
    t.string('status', 12).notNullable();
    t.bigInteger('n').notNullable();
    t.index(['endpoint_id', 'status']);
  });
  await knex.raw(
    `INSERT INTO event_tallies (org_id, mode, type, n)
     SELECT org_id, mode, type, count(*) FROM events GROUP BY org_id, mode, type`,
  );
  await knex.raw(
    `INSERT INTO webhook_delivery_tallies (endpoint_id, status, n)
     SELECT endpoint_id, status, count(*) FROM webhook_deliveries GROUP BY endpoint_id, status`,
  );
  await knex.schema.alterTable('events', (t) => {
    t.index(['org_id', 'mode', 'type', 'seq', 'id'], 'events_type_idx');
  });
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.index(['endpoint_id', 'created_at', 'id'], 'deliveries_endpoint_idx');
    t.index(['org_id', 'mode', 'status', 'created_at', 'id'], 'deliveries_status_idx');
  });
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropIndex(['endpoint_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.index(['endpoint_id']);
  });
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropIndex([], 'deliveries_status_idx');
    t.dropIndex([], 'deliveries_endpoint_idx');
  });
  await knex.schema.alterTable('events', (t) => {
    t.dropIndex([], 'events_type_idx');
  });
  await knex.schema.dropTableIfExists('webhook_delivery_tallies');
  await knex.schema.dropTableIfExists('event_tallies');
}
