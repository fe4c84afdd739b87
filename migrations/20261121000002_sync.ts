import type { Knex } from 'knex';

/* Frozen snapshot: sync history on links, bank outcomes for institution health, one active job per link. */
/**
 * Contract: the unique index on active syncs refuses a second queued sync of a link, which the previous
 * release could write (and creating it fails on a database that holds one).
 */
export const kind = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('links', (t) => {
    t.integer('sync_attempts').notNullable().defaultTo(0);
    t.integer('sync_successes').notNullable().defaultTo(0);
  });

  // Events written in one transaction share a millisecond; `seq` keeps their order (see src/events/outbox.ts).
  await knex.schema.alterTable('events', (t) => {
    t.bigInteger('seq').notNullable().defaultTo(0);
    t.index(['org_id', 'mode', 'seq']);
  });

  await knex.schema.createTable('bank_sync_outcomes', (t) => {
    t.increments('id').primary();
    t.string('bank_id', 24).notNullable();
    t.string('mode', 4).notNullable();
    t.boolean('succeeded').notNullable();
    t.string('error_code', 64);
    t.bigInteger('created_at').notNullable();
    t.index(['bank_id', 'mode', 'created_at']);
  });

  // The default movement list (visible rows, newest first) walks this index alone, at any page depth.
  await knex.schema.alterTable('movements', (t) => {
    t.index(['account_id', 'status', 'pending', 'posted_at', 'id'], 'movements_list_idx');
  });

  // At most one queued or running sync per link: the scheduler and on-demand refreshes can never start a
  // second one beside it. Partial unique indexes read the same on both engines.
  await knex.raw(
    `CREATE UNIQUE INDEX jobs_one_active_sync_per_link ON jobs (link_id) WHERE kind = 'sync' AND status IN ('queued', 'running')`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS jobs_one_active_sync_per_link');
  await knex.schema.alterTable('movements', (t) => {
    t.dropIndex([], 'movements_list_idx');
  });
  await knex.schema.dropTableIfExists('bank_sync_outcomes');
  await knex.schema.alterTable('events', (t) => {
    t.dropIndex(['org_id', 'mode', 'seq']);
    t.dropColumn('seq');
  });
  await knex.schema.alterTable('links', (t) => {
    t.dropColumn('sync_attempts');
    t.dropColumn('sync_successes');
  });
}
