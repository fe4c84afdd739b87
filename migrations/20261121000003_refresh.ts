import type { Knex } from 'knex';

/* Frozen snapshot: what an on-demand refresh needs to wait for MFA and resume, and backfill coverage. */
/** Expand: nullable columns the previous release never reads. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('refresh_intents', (t) => {
    // The bank's challenge (opaque JSON) and the ri_…_sec_… token, sealed with the master key: the
    // intent's owner can read the token back from GET /v1/refresh_intents/{id}; the hash authenticates it.
    t.text('mfa_challenge_encrypted');
    t.text('mfa_token_encrypted');
  });
  // The oldest posted_at that statements (backfill) have covered: per link (to answer a repeat without
  // calling the bank) and per account (an account that appears later still needs its whole history).
  for (const table of ['links', 'accounts']) {
    await knex.schema.alterTable(table, (t) => {
      t.bigInteger('backfill_covered_from');
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('refresh_intents', (t) => {
    t.dropColumn('mfa_challenge_encrypted');
    t.dropColumn('mfa_token_encrypted');
  });
  for (const table of ['links', 'accounts']) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('backfill_covered_from');
    });
  }
}
