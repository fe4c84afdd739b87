import type { Knex } from 'knex';

/*
 * Frozen snapshot: the operator's cap on an organisation's live API keys (issue 44, item 2). Each secret key
 * had its own rate buckets at the organisation's ceiling, so an admin who issued keys multiplied the
 * ceiling. Null means the build's default cap (src/orgs/orgs.ts, DEFAULT_MAX_LIVE_KEYS).
 */

/** Expand: a nullable column; the previous release never reads it and issues keys as before. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('organisations', (t) => {
    t.integer('max_live_keys').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE organisations DROP COLUMN max_live_keys');
}
