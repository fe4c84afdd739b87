import type { Knex } from 'knex';

/*
 * Frozen snapshot: who issued a widget token (issue 44, item 9). A link made through the widget is written
 * to the audit log with the widget session that made it and the key that issued its token (`key:<id>`), so
 * support can follow a link back to the integration that opened the widget.
 */

/** Expand: a nullable column; the previous release leaves it empty and never reads it. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('widget_tokens', (t) => {
    t.string('issued_by', 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE widget_tokens DROP COLUMN issued_by');
}
