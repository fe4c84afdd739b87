import type { Knex } from 'knex';

/*
 * Frozen snapshot: finding a link by its holder's RUT (the console's link search, src/links/rut-search.ts).
 * The RUT itself lives only inside the sealed credentials; these columns hold a keyed digest of it (HMAC
 * under a key derived from the master key, prefixed by that key's id), so a copy of the database alone
 * cannot test the ~25 million possible RUTs against them. A business link has the person's and the
 * company's. Existing links are filled by housekeeping, which holds the master key; this migration cannot.
 */
/**
 * Expand: nullable columns and indexes; housekeeping fills the digests of every link, including those the
 * previous release writes.
 */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('links', (t) => {
    t.string('rut_digest', 80);
    t.string('company_rut_digest', 80);
    t.index(['org_id', 'mode', 'rut_digest'], 'links_rut_digest_idx');
    t.index(['org_id', 'mode', 'company_rut_digest'], 'links_company_rut_digest_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('links', (t) => {
    t.dropIndex(['org_id', 'mode', 'rut_digest'], 'links_rut_digest_idx');
    t.dropIndex(['org_id', 'mode', 'company_rut_digest'], 'links_company_rut_digest_idx');
    t.dropColumn('rut_digest');
    t.dropColumn('company_rut_digest');
  });
}
