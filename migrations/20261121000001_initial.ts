import type { Knex } from 'knex';

/*
 * Frozen snapshot: a migration never imports live code. Times are epoch milliseconds in bigint columns on
 * both engines (UTC, millisecond precision, indexable, no driver time-zone surprises); the API serialises
 * them as ISO 8601. Money is bigint minor units. JSON documents are text.
 */
/** Expand: it only creates tables, and there is no earlier release to break. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  const ownedBy = (t: Knex.CreateTableBuilder) => {
    t.string('org_id', 24).notNullable().references('id').inTable('organisations').onDelete('CASCADE');
    t.string('mode', 4).notNullable();
  };

  await knex.schema.createTable('organisations', (t) => {
    t.string('id', 24).primary();
    t.string('name', 200).notNullable();
    t.bigInteger('created_at').notNullable();
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('type', 12).notNullable();
    t.string('token_hash', 64).notNullable().unique();
    t.string('prefix', 40).notNullable();
    t.string('last4', 4).notNullable();
    t.string('name', 200);
    t.text('rate_limits');
    t.string('bucket_id', 24).notNullable();
    t.string('rotated_from', 24);
    t.string('rotated_to', 24);
    t.bigInteger('created_at').notNullable();
    t.bigInteger('last_used_at');
    t.bigInteger('expires_at');
    t.bigInteger('revoked_at');
    t.index(['org_id', 'mode', 'type']);
  });

  await knex.schema.createTable('links', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('bank_id', 24).notNullable();
    t.string('holder_type', 12).notNullable();
    t.string('holder_name', 200);
    t.string('status', 12).notNullable();
    t.boolean('paused').notNullable().defaultTo(false);
    t.bigInteger('paused_at');
    t.string('external_user_id', 255);
    t.string('consent_version', 64);
    t.string('consent_text_hash', 128);
    t.text('credentials_encrypted').notNullable();
    t.string('refresh_status', 16).notNullable().defaultTo('idle');
    t.integer('accounts_count').notNullable().defaultTo(0);
    t.integer('new_movements_count').notNullable().defaultTo(0);
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.string('last_error_code', 64);
    t.bigInteger('last_synced_at');
    t.bigInteger('next_sync_at');
    t.bigInteger('expired_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['org_id', 'mode', 'created_at', 'id']);
    t.index(['org_id', 'mode', 'external_user_id']);
    t.index(['status', 'paused', 'next_sync_at'], 'links_due_idx');
  });

  await knex.schema.createTable('accounts', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('link_id', 24).notNullable().references('id').inTable('links').onDelete('CASCADE');
    t.string('bank_account_ref', 128).notNullable();
    t.string('name', 200).notNullable();
    t.string('type', 16).notNullable();
    t.string('currency', 3).notNullable();
    t.string('last_4', 4);
    t.string('holder_name', 200);
    t.bigInteger('balance_available');
    t.bigInteger('balance_current');
    t.bigInteger('balance_limit');
    t.string('status', 12).notNullable().defaultTo('active');
    t.boolean('removed_from_link').notNullable().defaultTo(false);
    t.bigInteger('removed_at');
    t.integer('visible_count').notNullable().defaultTo(0);
    t.integer('pending_count').notNullable().defaultTo(0);
    t.bigInteger('refreshed_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.unique(['link_id', 'bank_account_ref']);
  });

  await knex.schema.createTable('movements', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('link_id', 24).notNullable().references('id').inTable('links').onDelete('CASCADE');
    t.string('account_id', 24).notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.string('bank_ref', 128);
    t.string('fingerprint', 64).notNullable();
    t.bigInteger('amount').notNullable();
    t.string('currency', 3).notNullable();
    t.text('description').notNullable();
    t.string('type', 16).notNullable();
    t.string('reference_id', 128);
    t.text('counterparty');
    t.bigInteger('posted_at').notNullable();
    t.string('transaction_date', 10);
    t.boolean('pending').notNullable().defaultTo(false);
    t.string('status', 12).notNullable().defaultTo('normal');
    t.string('canonical_id', 24);
    t.bigInteger('synced_at').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['account_id', 'posted_at', 'id']);
    t.index(['account_id', 'synced_at', 'id']);
    t.index(['account_id', 'bank_ref']);
    t.index(['account_id', 'fingerprint']);
    t.index(['link_id']);
  });

  await knex.schema.createTable('refresh_intents', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('link_id', 24).notNullable().references('id').inTable('links').onDelete('CASCADE');
    t.string('refresh_type', 16).notNullable();
    t.string('status', 16).notNullable();
    t.string('error_code', 64);
    t.integer('accounts_updated');
    t.integer('new_movements_count');
    t.string('mfa_token_hash', 64).unique();
    t.bigInteger('mfa_expires_at');
    t.text('mfa_code_encrypted');
    t.integer('backfill_months');
    t.boolean('force').notNullable().defaultTo(false);
    t.bigInteger('started_at');
    t.bigInteger('completed_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['link_id', 'created_at']);
  });

  await knex.schema.createTable('widget_tokens', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('token_hash', 64).notNullable().unique();
    t.string('intent', 16).notNullable();
    t.string('product', 32);
    t.string('institution_id', 24);
    t.string('username_prefill', 64);
    t.string('external_user_id', 255);
    t.string('link_id', 24).references('id').inTable('links').onDelete('CASCADE');
    t.integer('connection_limit');
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('consumed_at');
    t.bigInteger('created_at').notNullable();
  });

  await knex.schema.createTable('exchange_tokens', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('token_hash', 64).notNullable().unique();
    t.string('link_id', 24).notNullable().references('id').inTable('links').onDelete('CASCADE');
    t.string('widget_token_id', 24);
    t.bigInteger('expires_at').notNullable();
    t.bigInteger('consumed_at');
    t.bigInteger('created_at').notNullable();
  });

  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.text('url').notNullable();
    t.string('description', 500);
    t.text('enabled_events').notNullable();
    t.boolean('disabled').notNullable().defaultTo(false);
    t.text('secret_encrypted').notNullable();
    t.text('previous_secret_encrypted');
    t.bigInteger('previous_secret_expires_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['org_id', 'mode', 'created_at']);
  });

  await knex.schema.createTable('events', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('type', 64).notNullable();
    // No foreign key: `link.deleted` and the history a receiver recovers outlive the link.
    t.string('link_id', 24);
    t.text('data').notNullable();
    t.bigInteger('created_at').notNullable();
    t.index(['org_id', 'mode', 'created_at', 'id']);
    t.index(['link_id']);
  });

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.string('id', 24).primary();
    ownedBy(t);
    t.string('event_id', 24).notNullable().references('id').inTable('events').onDelete('CASCADE');
    t.string('event_type', 64).notNullable();
    t.string('endpoint_id', 24)
      .notNullable()
      .references('id')
      .inTable('webhook_endpoints')
      .onDelete('CASCADE');
    t.string('status', 12).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.bigInteger('next_attempt_at');
    t.bigInteger('last_attempt_at');
    t.integer('last_response_status');
    t.text('last_error');
    t.string('locked_by', 64);
    t.bigInteger('locked_until');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['status', 'next_attempt_at'], 'deliveries_due_idx');
    t.index(['org_id', 'mode', 'created_at', 'id']);
    t.index(['event_id']);
    t.index(['endpoint_id']);
  });

  await knex.schema.createTable('webhook_attempts', (t) => {
    t.string('id', 24).primary();
    t.string('delivery_id', 24)
      .notNullable()
      .references('id')
      .inTable('webhook_deliveries')
      .onDelete('CASCADE');
    t.integer('number').notNullable();
    t.bigInteger('started_at').notNullable();
    t.integer('duration_ms').notNullable();
    t.integer('status_code');
    t.text('error');
    t.text('response_excerpt');
    t.index(['delivery_id', 'number']);
  });

  await knex.schema.createTable('jobs', (t) => {
    t.string('id', 24).primary();
    t.string('kind', 32).notNullable();
    t.string('org_id', 24).references('id').inTable('organisations').onDelete('CASCADE');
    t.string('link_id', 24).references('id').inTable('links').onDelete('CASCADE');
    t.string('refresh_intent_id', 24).references('id').inTable('refresh_intents').onDelete('CASCADE');
    t.text('payload');
    t.string('status', 12).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.bigInteger('run_at').notNullable();
    t.string('locked_by', 64);
    t.bigInteger('locked_until');
    t.text('last_error');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['status', 'run_at'], 'jobs_due_idx');
    t.index(['link_id', 'status']);
  });

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.string('org_id', 24).notNullable().references('id').inTable('organisations').onDelete('CASCADE');
    t.string('mode', 4).notNullable();
    t.string('idempotency_key', 255).notNullable();
    t.string('request_hash', 64).notNullable();
    t.integer('status_code');
    t.text('response_body');
    t.bigInteger('locked_until');
    t.bigInteger('created_at').notNullable();
    t.primary(['org_id', 'mode', 'idempotency_key']);
    t.index(['created_at']);
  });

  await knex.schema.createTable('audit_log', (t) => {
    t.string('id', 24).primary();
    t.string('org_id', 24);
    t.string('actor', 100).notNullable();
    t.string('action', 64).notNullable();
    t.string('target_type', 32);
    t.string('target_id', 64);
    t.text('details');
    t.bigInteger('created_at').notNullable();
    t.index(['org_id', 'created_at']);
    t.index(['target_id']);
  });

  await knex.schema.createTable('rate_limit_buckets', (t) => {
    t.string('bucket_key', 96).primary();
    t.double('tokens').notNullable();
    t.boolean('allowed').notNullable();
    t.bigInteger('updated_at').notNullable();
  });

  // One row per periodic task; a scheduler wins a tick with a conditional update of `last_run_at`.
  await knex.schema.createTable('cron_ticks', (t) => {
    t.string('name', 64).primary();
    t.bigInteger('last_run_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'cron_ticks',
    'rate_limit_buckets',
    'audit_log',
    'idempotency_keys',
    'jobs',
    'webhook_attempts',
    'webhook_deliveries',
    'events',
    'webhook_endpoints',
    'exchange_tokens',
    'widget_tokens',
    'refresh_intents',
    'movements',
    'accounts',
    'links',
    'api_keys',
    'organisations',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
