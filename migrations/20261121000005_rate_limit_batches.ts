import type { Knex } from 'knex';

/*
 * Frozen snapshot: a shared rate-limit bucket answers how many tokens one statement granted, so an API
 * process can charge all its waiting requests of a bucket in one write rather than one write each.
 * Buckets are transient state (they refill within a minute), so the old rows are simply dropped.
 */
/** Contract: it drops rate_limit_buckets.allowed, which the previous release reads and writes. */
export const kind = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex('rate_limit_buckets').delete();
  await knex.schema.alterTable('rate_limit_buckets', (t) => {
    t.dropColumn('allowed');
    t.integer('granted').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex('rate_limit_buckets').delete();
  await knex.schema.alterTable('rate_limit_buckets', (t) => {
    t.dropColumn('granted');
    t.boolean('allowed').notNullable().defaultTo(false);
  });
}
