import type { Knex } from 'knex';

/*
 * Frozen snapshot: a consent's life on its link (src/links/consent/consent-life.ts; docs/open-finance.md,
 * "A consent's life"). The scheduler's tick warns before a consent ends (`link.consent_expiring`) and
 * expires the link when it ends (`link.expired`, `consent_expired`), each once per consent:
 * - `expiry_warned_at`: when the warning was sent (null: not yet);
 * - `consent_ended_at`: when the tick found the consent ended (null: not yet, or it never ends).
 * Each tick reads grants by `(column IS NULL, expires_at)`, so the indexes lead with the marker: a consent
 * handled long ago is never read again, however many years of them a table holds. Additive: the previous
 * release runs on this schema unchanged. Times are epoch milliseconds.
 */
/** Expand: nullable columns and indexes the previous release ignores. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('link_grants', (t) => {
    t.bigInteger('expiry_warned_at').nullable();
    t.bigInteger('consent_ended_at').nullable();
    t.index(['expiry_warned_at', 'expires_at'], 'link_grants_expiry_warning_idx');
    t.index(['consent_ended_at', 'expires_at'], 'link_grants_consent_end_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('link_grants', (t) => {
    t.dropIndex(['expiry_warned_at', 'expires_at'], 'link_grants_expiry_warning_idx');
    t.dropIndex(['consent_ended_at', 'expires_at'], 'link_grants_consent_end_idx');
    t.dropColumn('expiry_warned_at');
    t.dropColumn('consent_ended_at');
  });
}
