import type { Knex } from 'knex';

/*
 * Frozen snapshot:
 * - `serve_instances`: one row per running `svc serve` (its supervisor), written when it starts, renewed on
 *   every heartbeat and removed when it stops (src/processes/serve-instances.ts). `svc migrate` and
 *   `svc install` read the rows whose `expires_at` is still ahead of the database's clock and refuse to
 *   migrate under a server of another build. `migrations_digest` names the build by its set of migrations;
 *   `migration_head` and `version` are what a person reads. Times are epoch milliseconds of the database
 *   server's clock, so that nodes with skewed clocks agree on which rows have lapsed.
 */
/** Expand: a new table. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('serve_instances', (t) => {
    t.string('id', 32).primary();
    t.string('host', 255).notNullable();
    t.integer('pid').notNullable();
    t.string('roles', 64).notNullable();
    t.string('version', 64).notNullable();
    t.string('migration_head', 255).notNullable();
    t.string('migrations_digest', 64).notNullable();
    t.bigInteger('started_at').notNullable();
    t.bigInteger('heartbeat_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('serve_instances');
}
