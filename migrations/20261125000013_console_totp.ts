import type { Knex } from 'knex';

/*
 * Frozen snapshot: the console's second factor (src/console/totp.ts). `totp_last_step` is the TOTP time
 * step (30-second periods since 1970) of the last code accepted from the user, so that no code is accepted
 * twice; null until one is. The secret itself is `totp_secret_sealed`, there from the start.
 */
/** Expand: a nullable column the previous release ignores. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('console_users', (t) => {
    t.bigInteger('totp_last_step');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('console_users', (t) => {
    t.dropColumn('totp_last_step');
  });
}
