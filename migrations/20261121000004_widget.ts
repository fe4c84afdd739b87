import type { Knex } from 'knex';

/*
 * Frozen snapshot: the hosted widget's sessions, and what an exchange token was issued for.
 *
 * A session is what a widget gets when it opens: its JSON API is authenticated by the session secret
 * (hashed here), never by the token that opened it. `token_hash` is the consumed `wt_…` or `ri_…_sec_…`
 * token; its unique index is what makes opening single use, even for two opens racing each other.
 * `link_id` and `refresh_intent_id` have no foreign keys on purpose: a connect whose first sync fails
 * discards its link, and the session must outlive that to offer another try.
 */
/** Expand: a new table, and exchange_tokens.intent defaults to what the previous release meant (connect). */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('widget_sessions', (t) => {
    t.string('id', 24).primary();
    t.string('org_id', 24).notNullable().references('id').inTable('organisations').onDelete('CASCADE');
    t.string('mode', 4).notNullable();
    t.string('kind', 12).notNullable();
    t.string('session_hash', 64).notNullable().unique();
    t.string('token_hash', 64).notNullable().unique();
    t.string('widget_token_id', 24).references('id').inTable('widget_tokens').onDelete('CASCADE');
    t.string('opener_origin', 255).notNullable();
    t.string('bank_id', 24);
    t.string('link_id', 24);
    t.string('refresh_intent_id', 24);
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('last_error_code', 64);
    t.bigInteger('previous_expired_at');
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('finished_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['expires_at']);
  });
  await knex.schema.alterTable('exchange_tokens', (t) => {
    // `connect` (the exchange announces the new link with `link.created`) or `reconnect` (it does not).
    t.string('intent', 16).notNullable().defaultTo('connect');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('exchange_tokens', (t) => {
    t.dropColumn('intent');
  });
  await knex.schema.dropTableIfExists('widget_sessions');
}
