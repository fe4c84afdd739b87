import type { Knex } from 'knex';

/*
 * Frozen snapshot: the browser a hosted consent trip started in (issue 44, item 5). Whoever loaded a leaked,
 * unused callback URL took the widget session over: the callback handed its page, with a fresh session
 * secret, to any browser. The trip now sets a cookie at its start and keeps its SHA-256 here; the hosted
 * callback completes only where that cookie comes back (src/widget/consent-flow.ts).
 */

/** Expand: a nullable column; the previous release neither writes nor reads it, and its rows stay unchecked. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('widget_consent_requests', (t) => {
    t.string('browser_hash', 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE widget_consent_requests DROP COLUMN browser_hash');
}
