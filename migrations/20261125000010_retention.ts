import type { Knex } from 'knex';

/*
 * Frozen snapshot: retention (src/scheduler/retention.ts). Each pruned table gets an index on the column its
 * prune walks, oldest first, so that a batch of 500 reads 500 index entries instead of scanning a table of
 * millions of rows. The existing indexes lead with `org_id`, `link_id` or `bank_id` and cannot serve a
 * cut-off across all of them.
 *
 * Jobs need none: a finished job is walked by `run_at` on the existing `jobs_due_idx (status, run_at)`.
 *
 * Deleting a row also makes each engine look up the rows whose foreign keys point at it (to cascade): those
 * lookups use `webhook_deliveries(event_id)`, `webhook_attempts(delivery_id, number)` and the two indexes
 * added here, `jobs(refresh_intent_id)` and `widget_sessions(widget_token_id)`.
 *
 * `retention_totals` holds, per kind, how many rows retention has removed since install: the scheduler
 * that prunes adds to it once per pass, and every API process serves it on /metrics as a counter (the
 * scheduler serves no metrics of its own, and may run on another node).
 */
/** Expand: indexes and a new table; the previous release reads and writes as before. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.index(['created_at', 'id'], 'events_created_at_idx');
  });
  await knex.schema.alterTable('jobs', (t) => {
    // Retention keeps an intent while a job of it is kept (its foreign key cascades), and the MFA paths
    // (`requeueAfterMfa`, `failJobsOfIntent`) look jobs up by intent: both scanned the table until now.
    t.index(['refresh_intent_id'], 'jobs_intent_idx');
  });
  await knex.schema.alterTable('bank_sync_outcomes', (t) => {
    t.index(['created_at', 'id'], 'bank_sync_outcomes_created_at_idx');
  });
  await knex.schema.alterTable('refresh_intents', (t) => {
    // Finished intents by age: the status leads, as in `jobs_due_idx`, so that a planner that sees
    // `status IN ('succeeded', 'failed')` walks this index rather than sorting every finished intent.
    t.index(['status', 'created_at'], 'refresh_intents_finished_idx');
    // Housekeeping looks for MFA waits every minute (to expire them, and to keep their widget sessions):
    // without this it scanned every intent, and retention now keeps 90 days of them.
    t.index(['status', 'mfa_expires_at'], 'refresh_intents_mfa_wait_idx');
  });
  await knex.schema.alterTable('widget_tokens', (t) => {
    t.index(['expires_at', 'id'], 'widget_tokens_expires_at_idx');
  });
  // Removing a widget token looks for its sessions twice: retention keeps a token a session points at, and
  // the foreign key's cascade searches the sessions of every deleted token.
  await knex.schema.alterTable('widget_sessions', (t) => {
    t.index(['widget_token_id'], 'widget_sessions_token_idx');
  });
  await knex.schema.alterTable('exchange_tokens', (t) => {
    t.index(['expires_at', 'id'], 'exchange_tokens_expires_at_idx');
  });
  await knex.schema.alterTable('audit_log', (t) => {
    t.index(['created_at', 'id'], 'audit_log_created_at_idx');
  });
  await knex.schema.createTable('retention_totals', (t) => {
    t.string('kind', 32).primary();
    t.bigInteger('rows_removed').notNullable().defaultTo(0);
    t.bigInteger('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('retention_totals');
  for (const [table, name] of [
    ['audit_log', 'audit_log_created_at_idx'],
    ['exchange_tokens', 'exchange_tokens_expires_at_idx'],
    ['widget_sessions', 'widget_sessions_token_idx'],
    ['widget_tokens', 'widget_tokens_expires_at_idx'],
    ['refresh_intents', 'refresh_intents_finished_idx'],
    ['refresh_intents', 'refresh_intents_mfa_wait_idx'],
    ['bank_sync_outcomes', 'bank_sync_outcomes_created_at_idx'],
    ['jobs', 'jobs_intent_idx'],
    ['events', 'events_created_at_idx'],
  ] as const) {
    await knex.schema.alterTable(table, (t) => {
      t.dropIndex([], name);
    });
  }
}
