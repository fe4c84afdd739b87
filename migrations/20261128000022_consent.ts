import type { Knex } from 'knex';

/*
 * Frozen snapshot: consent banks (Open Finance; docs/open-finance.md).
 * - `consent_clients` (src/banks/consent/): the appliance's registration as a client of one bank in one
 *   mode, made by Dynamic Client Registration (`svc banks register`). The client's private key and the
 *   registration access token are sealed with the master key (context: the row's id); the certificate is
 *   public and kept as PEM. `registration` is what the bank answered, without its secrets. One row per
 *   bank and mode: registering again replaces it.
 * - `link_grants` (src/links/consent/): the grant behind a consent link: its id at the bank (sealed: a
 *   grant id is enough to query or revoke the consent with the client's certificate), what the end user
 *   authorised (`authorization_details`, JSON), when the grant ends, and the tokens (sealed). It goes with
 *   its link.
 * - `grant_revocations` (src/links/consent/): the revoke outbox. Deleting a consent link queues one row,
 *   in the deleting transaction, which a worker claims with a lease and retries until the bank confirms or
 *   the attempts run out. It outlives the link on purpose (no foreign key), so `svc links inspect` can
 *   still say whether the bank was told.
 * Times are epoch milliseconds.
 */
/** Expand: new tables. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('consent_clients', (t) => {
    t.string('id', 32).primary();
    t.string('bank_id', 32).notNullable();
    t.string('mode', 8).notNullable();
    t.string('issuer', 2048).notNullable();
    t.string('api_base', 2048).notNullable();
    t.string('client_id', 255).notNullable();
    t.text('registration_access_token_sealed').nullable();
    t.string('registration_client_uri', 2048).nullable();
    t.text('private_key_sealed').notNullable();
    t.text('certificate_pem').notNullable();
    // The CA the bank's TLS server certificate chains to when it is not a public one (the CMF's sandbox,
    // the simulated bank's local CA); null: the system's roots.
    t.text('server_ca_pem').nullable();
    t.text('registration').notNullable();
    t.bigInteger('registered_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['bank_id', 'mode']);
  });
  await knex.schema.createTable('link_grants', (t) => {
    t.string('link_id', 32).primary().references('id').inTable('links').onDelete('CASCADE');
    t.string('consent_client_id', 32).notNullable();
    t.string('client_id', 255).notNullable();
    t.text('grant_id_sealed').notNullable();
    t.text('authorization_details').notNullable();
    t.bigInteger('expires_at').nullable();
    t.text('access_token_sealed').notNullable();
    t.bigInteger('access_token_expires_at').nullable();
    t.text('refresh_token_sealed').nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });
  await knex.schema.createTable('grant_revocations', (t) => {
    t.string('id', 32).primary();
    t.string('link_id', 32).notNullable();
    t.string('org_id', 32).notNullable();
    t.string('mode', 8).notNullable();
    t.string('bank_id', 32).notNullable();
    t.string('client_id', 255).notNullable();
    t.text('grant_id_sealed').notNullable();
    t.string('status', 16).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.bigInteger('next_attempt_at').notNullable();
    t.bigInteger('locked_until').nullable();
    t.string('last_error', 500).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.bigInteger('revoked_at').nullable();
    t.index(['status', 'next_attempt_at']);
    t.index(['link_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('grant_revocations');
  await knex.schema.dropTableIfExists('link_grants');
  await knex.schema.dropTableIfExists('consent_clients');
}
