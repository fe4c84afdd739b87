import type { Knex } from 'knex';

/*
 * Frozen snapshot: what a consent link's sync keeps between syncs so a steady-state scheduled sync asks the
 * bank only for balances (docs/open-finance.md, "Calls per sync"):
 * - `link_grants.full_sync_at`: when a consent link's sync last read every list, every card's details and
 *   every account's movements (a first sync, an on-demand refresh, the daily full pass); null: never;
 * - `account_read_marks`: per account, `movements_read_to`, the end of the last window whose movements were
 *   read, where the next incremental window starts (less a small overlap); no row: never read;
 * - `bank_call_budgets.interval_minutes`: the interval the scheduler gives the bank's links, stretched beyond
 *   `scheduler.syncIntervalMinutes` when their syncs need more calls than the bank's budget allows; null: the
 *   configured one.
 * Times are epoch milliseconds. Not columns of `links` or `accounts`: the previous release reads those by id
 * with a prepared `SELECT *` (auth/ownership.ts), and on PostgreSQL a prepared statement whose result gains a
 * column fails ("cached plan must not change result type") until its node restarts: the rolling upgrade saw
 * every refresh on the old nodes answer 500.
 */
/** Expand: a new table and nullable columns, which the previous release neither reads nor writes. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('link_grants', (t) => {
    t.bigInteger('full_sync_at').nullable();
  });
  await knex.schema.createTable('account_read_marks', (t) => {
    t.string('account_id').primary().references('id').inTable('accounts').onDelete('CASCADE');
    t.bigInteger('movements_read_to').notNullable();
  });
  await knex.schema.alterTable('bank_call_budgets', (t) => {
    t.double('interval_minutes').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE bank_call_budgets DROP COLUMN interval_minutes');
  await knex.schema.dropTable('account_read_marks');
  await knex.raw('ALTER TABLE link_grants DROP COLUMN full_sync_at');
}
