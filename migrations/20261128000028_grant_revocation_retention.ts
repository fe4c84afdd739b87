import type { Knex } from 'knex';

/*
 * Frozen snapshot: retention of the revoke outbox (src/links/consent/revocations.ts, pruneRevokedGrants).
 * A row whose grant the bank confirmed revoked was kept forever: one per deleted or renewed consent link,
 * so the table grew with every renewal (a consent lasts a year at most, and each renewal queues the old
 * grant's revocation). Housekeeping now removes those revoked more than `retention.grantRevocationsDays`
 * ago, oldest first, a batch at a time; pending and failed rows always stay (a failed one waits for
 * someone to act). The walk reads this index: `status = 'revoked'` leads and `revoked_at` orders, so a
 * batch reads the rows it removes and no more. The (status, next_attempt_at) index would read every
 * revoked row ever kept and sort them, at each batch.
 */

/** Expand: an index; the previous release reads and writes as before, and never prunes. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('grant_revocations', (t) => {
    t.index(['status', 'revoked_at', 'id'], 'grant_revocations_revoked_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('grant_revocations', (t) => {
    t.dropIndex(['status', 'revoked_at', 'id'], 'grant_revocations_revoked_idx');
  });
}
