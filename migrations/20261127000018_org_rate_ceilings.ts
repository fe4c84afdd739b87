import type { Knex } from 'knex';

/*
 * Frozen snapshot:
 * - `organisations.rate_limit_ceilings`: the operator's ceilings on the rate limits of the organisation's
 *   keys, as JSON `{ group: { perMinute, burst } }` for the groups the operator set; null, and any group left
 *   out, is the configured default (src/orgs/orgs.ts). No key of the organisation is allowed more.
 */
/** Expand: a nullable column; null is the configured default. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('organisations', (t) => {
    t.text('rate_limit_ceilings').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds organisations, and dropping the old table cascades to every
  // row that references an organisation (keys, links, endpoints, deliveries).
  await knex.raw('ALTER TABLE organisations DROP COLUMN rate_limit_ceilings');
}
