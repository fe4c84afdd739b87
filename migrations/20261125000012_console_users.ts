import type { Knex } from 'knex';

/*
 * Frozen snapshot: the web console's users (src/console/). An operator sees every organisation (`org_id`
 * null); an organisation's admin and support see theirs; support with `org_id` null supports all of them.
 * The password is a scrypt hash (never the password), the TOTP secret is sealed under the master key, and
 * `session_epoch` is part of every session's token: a reset or a disable adds one, which ends every session
 * signed before it. `failed_logins` and `locked_until` slow down and lock out guessing.
 *
 * `console_tokens` are the invitation and password-reset links the CLI prints (the appliance sends no mail):
 * stored as SHA-256 of the token, used once, short-lived.
 */
/** Expand: new tables only. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('console_users', (t) => {
    t.string('id', 24).primary();
    t.string('email', 254).notNullable().unique();
    t.string('role', 12).notNullable();
    t.string('org_id', 24).references('id').inTable('organisations').onDelete('CASCADE');
    t.string('status', 12).notNullable();
    t.string('password_hash', 200);
    t.text('totp_secret_sealed');
    t.integer('session_epoch').notNullable().defaultTo(0);
    t.integer('failed_logins').notNullable().defaultTo(0);
    t.bigInteger('locked_until');
    t.bigInteger('last_login_at');
    t.string('locale', 8);
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  await knex.schema.createTable('console_tokens', (t) => {
    t.string('id', 24).primary();
    t.string('user_id', 24).notNullable().references('id').inTable('console_users').onDelete('CASCADE');
    t.string('purpose', 12).notNullable();
    t.string('token_hash', 64).notNullable().unique();
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('used_at');
    t.bigInteger('created_at').notNullable();
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('console_tokens');
  await knex.schema.dropTableIfExists('console_users');
}
