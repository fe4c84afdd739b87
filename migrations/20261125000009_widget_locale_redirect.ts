import type { Knex } from 'knex';

/*
 * Frozen snapshot: the widget's language and the hosted (redirect) flow, and wrong MFA codes.
 *
 * `widget_tokens.locale` is the language the customer asked for (`es`, `en`, or null: the browser's, else
 * the operator's); `redirect_uri` and `state` make the token usable as a plain URL in a full page or a
 * mobile web view: the widget returns there with the exchange token and the state. A session records the
 * language it was opened in (its error messages and the consent text whose hash the link keeps), and a
 * hosted session has an empty `opener_origin` (there is no page to post to).
 *
 * `refresh_intents.mfa_attempts` counts the wrong codes of the current MFA wait: below the limit the
 * intent waits again for another code, at the limit it fails with `mfa_invalid`.
 */
/** Expand: nullable and defaulted columns the previous release ignores. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('widget_tokens', (t) => {
    t.string('locale', 2);
    t.string('redirect_uri', 2048);
    t.string('state', 512);
  });
  await knex.schema.alterTable('widget_sessions', (t) => {
    t.string('locale', 2).notNullable().defaultTo('es');
  });
  await knex.schema.alterTable('refresh_intents', (t) => {
    t.integer('mfa_attempts').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('refresh_intents', (t) => {
    t.dropColumn('mfa_attempts');
  });
  await knex.schema.alterTable('widget_sessions', (t) => {
    t.dropColumn('locale');
  });
  await knex.schema.alterTable('widget_tokens', (t) => {
    t.dropColumn('state');
    t.dropColumn('redirect_uri');
    t.dropColumn('locale');
  });
}
