import type { Knex } from 'knex';

/*
 * Frozen snapshot:
 * - `console_sign_in_attempts`: console sign-in attempts counted per email, address and known browser in a
 *   fixed window (src/console/sign-in-attempts.ts), so that every API node counts the same and a burst
 *   counts in full. `subject` is the kind and a keyed digest of what is counted, never the email or the
 *   address as typed. The lock-out columns of console_users are no longer written: nothing locks.
 * - `console_sessions`: one row per signed-in console session (src/console/sessions.ts). A session token
 *   names its row and holds only while the row is there: signing out removes it, on every API node at once.
 *   `expires_at` is the absolute end (12 hours after signing in), which no renewal passes.
 */
/** Expand: new tables only; the previous release keeps its own lock-out columns. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('console_sign_in_attempts', (t) => {
    t.string('subject', 64).primary();
    t.bigInteger('window_started_at').notNullable();
    t.integer('attempts').notNullable();
    t.index(['window_started_at']);
  });
  await knex.schema.createTable('console_sessions', (t) => {
    t.string('id', 32).primary();
    t.string('user_id', 24).notNullable().references('id').inTable('console_users').onDelete('CASCADE');
    t.bigInteger('signed_in_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.index(['user_id']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('console_sessions');
  await knex.schema.dropTableIfExists('console_sign_in_attempts');
}
