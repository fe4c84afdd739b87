import type { Knex } from 'knex';

/*
 * Frozen snapshot: the banks' limits (src/banks/budget/; docs/open-finance.md, "Bank limits"). One row per
 * bank and mode, shared by every scheduler process, so that together they keep within what the bank allows:
 * - `second_start`, `second_count` and `minute_start`, `minute_count`: the calls permitted in the current
 *   second and minute (windows aligned to the clock's seconds and minutes, as the CMF's draft counts them);
 *   a permit is one conditional UPDATE of the row;
 * - `paused_until`, `paused_reason`: the bank answered 429 or 529 with `Retry-After`: no process calls it
 *   before then; the reason is the appliance's words (status and until when), never the bank's text;
 * - `calls_per_sync`: the calls a sync of this bank made, on average (the last syncs weigh most), which the
 *   scheduler's capacity warning multiplies by the bank's links.
 * Transient state: a row lost costs at most one window's count. Times are epoch milliseconds.
 */
/** Expand: a new table. */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('bank_call_budgets', (t) => {
    t.string('bank_id', 32).notNullable();
    t.string('mode', 8).notNullable();
    t.bigInteger('second_start').notNullable().defaultTo(0);
    t.integer('second_count').notNullable().defaultTo(0);
    t.bigInteger('minute_start').notNullable().defaultTo(0);
    t.integer('minute_count').notNullable().defaultTo(0);
    t.bigInteger('paused_until').nullable();
    t.string('paused_reason', 200).nullable();
    t.double('calls_per_sync').nullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['bank_id', 'mode']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('bank_call_budgets');
}
