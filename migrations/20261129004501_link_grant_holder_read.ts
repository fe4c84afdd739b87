import type { Knex } from 'knex';

/*
 * Frozen snapshot: when a consent link's sync last read the holder's name at the bank (issue 45), epoch
 * milliseconds; null: never. A link's first sync reads it, then a full pass a day or more after the last read
 * (the daily one), never a steady-state scheduled sync: each read may cost the bank a call (Brazil's customers
 * API; in Chile a token refresh, when the sync made none). The name itself goes where a password link's does,
 * `links.holder_name`. On the grant, not the link, as `full_sync_at` (migration 30): the previous release reads
 * links by id with a prepared `SELECT *`, which a new column of `links` breaks on PostgreSQL.
 */

/** Expand: a nullable column the previous release neither reads nor writes. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('link_grants', (t) => {
    t.bigInteger('holder_read_at').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it.
  await knex.raw('ALTER TABLE link_grants DROP COLUMN holder_read_at');
}
