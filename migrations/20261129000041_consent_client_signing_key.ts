import type { Knex } from 'knex';

/*
 * Frozen snapshot: the request-object and client-assertion signing key of a consent client
 * (src/banks/consent/register.ts, `signingKeyOf`). FAPI 1.0 Advanced §5.2.2 clause 10 (Open Finance Brasil)
 * has the client sign its request object with PS256, and RFC 7523 §2.2 `private_key_jwt` signs the client
 * assertion; the key is generated at registration and its public half registered as `jwks` (RFC 7591 §2).
 * Sealed like `private_key_sealed` (SecretBox, under the row's id); null for a registration that signs
 * nothing (Chile's FAPI 2.0 profile: PAR over mTLS, no request object) or made before this release.
 */

/** Expand: a nullable column; the previous release never reads it. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('consent_clients', (t) => {
    t.text('signing_key_sealed').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE consent_clients DROP COLUMN signing_key_sealed');
}
