import type { Knex } from 'knex';

/*
 * Frozen snapshot:
 * - `consent_bank_state`: the simulated consent bank's authorization-server state (src/consent-bank/store.ts),
 *   one row per oidc-provider model instance (Session, Interaction, PushedAuthorizationRequest,
 *   AuthorizationCode, Grant, AccessToken, RefreshToken, Client, ...) and per revoked grant. Rows are found
 *   by an HMAC of the id (`key`), never the id itself, since an opaque token's id is the token; `grant_key`
 *   finds every token of a grant when it is revoked. `payload` is sealed (AES-256-GCM). Times are epoch
 *   milliseconds of the bank's clock.
 */
/** Expand: a new table. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('consent_bank_state', (t) => {
    t.string('model', 64).notNullable();
    t.string('key', 64).notNullable();
    t.text('payload').notNullable();
    t.string('grant_key', 64).nullable();
    t.string('uid_key', 64).nullable();
    t.string('user_code_key', 64).nullable();
    t.bigInteger('expires_at').nullable();
    t.bigInteger('consumed_at').nullable();
    t.primary(['model', 'key']);
    t.index(['grant_key']);
    t.index(['uid_key']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('consent_bank_state');
}
