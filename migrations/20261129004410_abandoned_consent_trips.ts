import type { Knex } from 'knex';

/*
 * Frozen snapshot: abandoned consent trips (issue 43, item 4; src/widget/abandoned-trips.ts). Housekeeping
 * ends, once a minute, the trips past their wait whose callback never came (`completed_at IS NULL AND
 * expires_at <= now`), and queues the revoke of the consent each left at a Brazilian bank. Without an index
 * that pass reads every trip kept (they go with their widget session, a day after it ends); this one holds
 * the open trips first, ordered by when their wait ends, so a pass reads the trips it ends and no more.
 */

/** Expand: an index; the previous release reads and writes as before, and never ends a trip itself. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('widget_consent_requests', (t) => {
    t.index(['completed_at', 'expires_at'], 'widget_consent_requests_open_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('widget_consent_requests', (t) => {
    t.dropIndex(['completed_at', 'expires_at'], 'widget_consent_requests_open_idx');
  });
}
