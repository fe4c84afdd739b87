import type { Knex } from 'knex';

/*
 * Frozen snapshot: an endpoint may be temporary (`svc webhooks listen`): it lives while its creator keeps
 * renewing `expires_at`, so one whose listener was killed stops receiving events and is then removed.
 */
/** Expand: a nullable column; an endpoint without it is permanent, as before. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.bigInteger('expires_at');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.dropColumn('expires_at');
  });
}
