import type { Knex } from 'knex';

/*
 * Frozen snapshot: an endpoint's health, kept by the dispatcher. `unanswered_attempts` counts its latest
 * attempts in a row that got no HTTP answer (timed out, refused, cut); a 2xx answer sets it back to 0.
 * Past the operator's threshold the endpoint is backed off until `backoff_until`: its deliveries are not
 * claimed before then (their `next_attempt_at` is moved there, so the due index never walks them).
 */
/** Expand: defaulted and nullable columns the previous release ignores. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.integer('unanswered_attempts').notNullable().defaultTo(0);
    t.bigInteger('backoff_until');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.dropColumn('backoff_until');
    t.dropColumn('unanswered_attempts');
  });
}
