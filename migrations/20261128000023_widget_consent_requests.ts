import type { Knex } from 'knex';

/*
 * Frozen snapshot: the widget's consent requests (src/widget/consent-flow.ts; docs/open-finance.md, "What
 * the end user sees"). One row per trip to a consent bank's authorization page: made when the end user
 * presses "Continue to the bank" (after the PAR), claimed once by the bank's callback. The `state` sent to
 * the bank is kept only as its SHA-256 (`state_hash`: the callback finds its row by it); the PKCE verifier
 * is sealed under the row (context `widget_consent_requests/<id>/verifier_sealed`). `outcome` says how the
 * trip ended (`linked`, or the problem code the widget showed); `link_id` is the link it made. Rows go with
 * their widget session (pruned a day after it ends). Times are epoch milliseconds.
 */
/** Expand: a new table. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('widget_consent_requests', (t) => {
    t.string('id', 32).primary();
    t.string('session_id', 32).notNullable().references('id').inTable('widget_sessions').onDelete('CASCADE');
    t.string('org_id', 32).notNullable();
    t.string('mode', 8).notNullable();
    t.string('bank_id', 32).notNullable();
    t.string('holder_type', 16).notNullable();
    t.string('consent_client_id', 32).notNullable();
    t.string('state_hash', 64).notNullable().unique();
    t.text('verifier_sealed').notNullable();
    t.text('authorization_details').notNullable();
    t.string('consent_text_hash', 64).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('completed_at').nullable();
    t.string('outcome', 32).nullable();
    t.string('link_id', 32).nullable();
    t.bigInteger('created_at').notNullable();
    t.index(['session_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('widget_consent_requests');
}
