import type { Knex } from 'knex';

/*
 * Frozen snapshot: `jobs(refresh_intent_id)` indexes only the jobs that have an intent (on-demand refreshes).
 * Scheduled syncs, most of the table (six a link a day), have none, and every one of them used to add a NULL
 * entry: a scheduler tick queuing 5,000 syncs wrote 5,000 index entries nobody reads, about 14% of its
 * insert's WAL records on Postgres (35,600 → 30,600; bench/sync.ts, the catch-up tick). Every reader looks jobs up
 * by an intent (`refresh_intent_id = …`: the MFA paths and the cascade when retention deletes an intent),
 * which both engines prove implies `IS NOT NULL`, so they keep using the index.
 * Expand only: the previous release runs on this schema unchanged.
 */
/** Expand: a narrower index that serves the same lookups; the previous release reads and writes as before. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS jobs_intent_idx');
  await knex.raw(
    'CREATE INDEX jobs_intent_idx ON jobs (refresh_intent_id) WHERE refresh_intent_id IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS jobs_intent_idx');
  await knex.raw('CREATE INDEX jobs_intent_idx ON jobs (refresh_intent_id)');
}
