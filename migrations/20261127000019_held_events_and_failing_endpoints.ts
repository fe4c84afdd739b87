import type { Knex } from 'knex';

/*
 * Frozen snapshot (issue 28, item 11: one tenant cannot stall pruning).
 *
 * `events.held_until`: set by retention when it finds an event past its retention that a pending delivery
 * still holds (an endpoint disabled with a backlog, or one that never answers): the time it looks at the
 * event again. Null for every other event. The walk of prunable events reads `events_walk_idx`, a partial
 * index of the events that are not held, so that a held event leaves the walk as soon as it is found: the
 * walk used to pass every held event again in each batch of 5 to 167 events, and 100,000 of them made a
 * pass spend its time budget on reading them and prune nothing. Held events come back through
 * `events_held_idx` when their time comes. `events_created_at_idx` served only that walk and goes.
 *
 * `retention_walks`: where each walk of events stopped (src/scheduler/retention-walks.ts), so that the next
 * batch and the next pass start there. On PostgreSQL a pruned or held event leaves a dead entry in the
 * index until vacuum; a walk from the start of the index read every one of them again in every batch (a
 * pass that held 800 events and pruned 200 read 200,000 index entries in a test; from its cursor, 2,000).
 *
 * `webhook_endpoints.failing_since`: when the endpoint's attempts began to fail without a success since
 * (null while its latest attempt succeeded); the dispatcher disables an endpoint that has failed every
 * attempt for `webhooks.disableAfterFailingDays` (src/webhooks/endpoint-health.ts). `disabled_reason`
 * says who disabled it: `requested` (its tenant, or an operator) or `failing` (the dispatcher). Endpoints
 * disabled before this migration were disabled on request.
 *
 * The partial indexes are written in SQL, the same statement on both engines. The previous release still
 * runs on this schema (it never sets `held_until`), but its pruning walk finds no index of its own here and
 * would scan: upgrade it rather than leave it running.
 */
/**
 * Expand: a nullable column, a new table and indexes; the previous release works (its pruning walk scans
 * without the index this drops, so replace it soon), and an endpoint it disables without a reason reads as
 * requested.
 */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.bigInteger('held_until');
  });
  await knex.raw('CREATE INDEX events_walk_idx ON events (created_at, id) WHERE held_until IS NULL');
  await knex.raw('CREATE INDEX events_held_idx ON events (held_until, id) WHERE held_until IS NOT NULL');
  await knex.schema.alterTable('events', (t) => {
    t.dropIndex([], 'events_created_at_idx');
  });
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.bigInteger('failing_since');
    t.string('disabled_reason', 16);
  });
  await knex('webhook_endpoints').where({ disabled: true }).update({ disabled_reason: 'requested' });
  await knex.schema.createTable('retention_walks', (t) => {
    t.string('walk', 32).primary();
    t.bigInteger('after_key').notNullable();
    t.string('after_id', 24).notNullable();
    t.bigInteger('started_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('retention_walks');
  await knex.raw('ALTER TABLE webhook_endpoints DROP COLUMN disabled_reason');
  await knex.raw('ALTER TABLE webhook_endpoints DROP COLUMN failing_since');
  await knex.schema.alterTable('events', (t) => {
    t.index(['created_at', 'id'], 'events_created_at_idx');
  });
  await knex.raw('DROP INDEX events_held_idx');
  await knex.raw('DROP INDEX events_walk_idx');
  // Not knex's dropColumn: on SQLite it rebuilds the table, whose cascade would empty the deliveries.
  await knex.raw('ALTER TABLE events DROP COLUMN held_until');
}
