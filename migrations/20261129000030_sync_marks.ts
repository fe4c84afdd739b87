import type { Knex } from 'knex';

/*
 * Frozen snapshot: what a consent link's sync keeps between syncs so a steady-state scheduled sync asks the
 * bank only for balances (docs/open-finance.md, "Calls per sync"):
 * - `links.full_sync_at`: when a sync last read every list, every card's details and every account's
 *   movements (a first sync, an on-demand refresh, the daily full pass); null: never;
 * - `accounts.movements_read_to`: the end of the last window whose movements were read for the account, where
 *   the next incremental window starts (less a small overlap); null: never read;
 * - `bank_call_budgets.interval_minutes`: the interval the scheduler gives the bank's links, stretched beyond
 *   `scheduler.syncIntervalMinutes` when their syncs need more calls than the bank's budget allows; null: the
 *   configured one.
 * Times are epoch milliseconds.
 */
/** Expand: new nullable columns, which the previous release neither reads nor writes. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('links', (t) => {
    t.bigInteger('full_sync_at').nullable();
  });
  await knex.schema.alterTable('accounts', (t) => {
    t.bigInteger('movements_read_to').nullable();
  });
  await knex.schema.alterTable('bank_call_budgets', (t) => {
    t.double('interval_minutes').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table, and dropping the old one cascades to every row
  // that references it (an organisation's keys, links, endpoints and deliveries went with it).
  await knex.raw('ALTER TABLE bank_call_budgets DROP COLUMN interval_minutes');
  await knex.raw('ALTER TABLE accounts DROP COLUMN movements_read_to');
  await knex.raw('ALTER TABLE links DROP COLUMN full_sync_at');
}
