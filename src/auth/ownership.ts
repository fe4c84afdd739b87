import type { Knex } from 'knex';
import { errors } from '../errors/api-error.js';
import { runNamed } from '../db/bound-rows.js';
import type { Principal } from './principal.js';

const lookups = new Map<string, string>();

/** One fixed statement per table: built once, and prepared once per connection on Postgres. */
function lookupSql(table: string): string {
  let sql = lookups.get(table);
  if (!sql) {
    sql = `SELECT * FROM ${table} WHERE id = ? AND org_id = ? LIMIT 1`;
    lookups.set(table, sql);
  }
  return sql;
}

/**
 * Loads a resource the caller may see. Another organisation's row answers 404 exactly as a missing one
 * (nothing leaks); the same organisation's row in the other mode answers 403 `wrong_mode`. Every API read
 * by id comes through here, so it skips the query builder.
 */
export async function findOwned<T extends { org_id: string; mode: string }>(
  db: Knex,
  table: string,
  id: string,
  principal: Principal,
  noun: string,
): Promise<T> {
  const [row] = await runNamed<T>(db, `owned_${table}`, lookupSql(table), [id, principal.orgId]);
  if (!row) throw errors.notFound(`No such ${noun}: '${id}'.`, 'id');
  if (row.mode !== principal.mode) {
    throw errors.wrongMode(
      `The ${noun} '${id}' exists in ${row.mode} mode, but a ${principal.mode}-mode key was used.`,
    );
  }
  return row;
}
