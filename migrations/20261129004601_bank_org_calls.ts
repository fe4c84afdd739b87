import type { Knex } from 'knex';

/*
 * Frozen snapshot: each organisation's calls in a bank's current second and minute (issue 43, item 3), JSON
 * text on the bank's budget row, `{ "<org id>": { "all": { "second": n, "minute": n, "at": ms }, "onDemand":
 * { … } } }` (all its calls, and its refreshes'); null before the first permit of a build that writes it. The permit decides every organisation's share from the row it
 * already reads and writes (src/banks/budget/org-shares.ts): one write per call, as before, and no table whose
 * rows grow with the organisations.
 */

/** Expand: a nullable column the previous release neither reads nor writes (its permits count without it). */
export const kind = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('bank_call_budgets', (t) => {
    t.text('org_calls').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  // Not knex's dropColumn: on SQLite it rebuilds the table.
  await knex.raw('ALTER TABLE bank_call_budgets DROP COLUMN org_calls');
}
