import type { Knex } from 'knex';

/*
 * Frozen snapshot: retention (src/scheduler/retention.ts). Each pruned table gets an index on the column its
 * prune walks, oldest first, so that a batch of 500 reads 500 index entries instead of scanning a table of
 * millions of rows. The existing indexes lead with `org_id`, `link_id` or `bank_id` and cannot serve a
 * cut-off across all of them.
 *
 * Jobs are walked by `created_at`, not `updated_at`: `created_at` never changes, so the index costs nothing
 * on the claim and finish updates (on Postgres an index on a column an update writes rules out HOT updates
 * on the busiest table). A sync runs for minutes, so its creation is within minutes of its end.
 *
 * `retention_totals` holds, per kind, how many rows retention has removed since install: the scheduler
 * that prunes adds to it once per pass, and every API process serves it on /metrics as a counter (the
 * scheduler serves no metrics of its own, and may run on another node).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.index(['created_at', 'id'], 'events_created_at_idx');
  });
  await knex.schema.alterTable('jobs', (t) => {
    t.index(['created_at', 'id'], 'jobs_created_at_idx');
    // Retention keeps an intent while a job of it is kept (its foreign key cascades), and the MFA paths
    // (`requeueAfterMfa`, `failJobsOfIntent`) look jobs up by intent: both scanned the table until now.
    t.index(['refresh_intent_id'], 'jobs_intent_idx');
  });
  await knex.schema.alterTable('bank_sync_outcomes', (t) => {
    t.index(['created_at', 'id'], 'bank_sync_outcomes_created_at_idx');
  });
  await knex.schema.alterTable('refresh_intents', (t) => {
    t.index(['created_at', 'id'], 'refresh_intents_created_at_idx');
  });
  await knex.schema.alterTable('widget_tokens', (t) => {
    t.index(['expires_at', 'id'], 'widget_tokens_expires_at_idx');
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
    ['widget_tokens', 'widget_tokens_expires_at_idx'],
    ['refresh_intents', 'refresh_intents_created_at_idx'],
    ['bank_sync_outcomes', 'bank_sync_outcomes_created_at_idx'],
    ['jobs', 'jobs_created_at_idx'],
    ['jobs', 'jobs_intent_idx'],
    ['events', 'events_created_at_idx'],
  ] as const) {
    await knex.schema.alterTable(table, (t) => {
      t.dropIndex([], name);
    });
  }
}
