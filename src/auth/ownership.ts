import type { Knex } from 'knex';
import { errors } from '../errors/api-error.js';
import type { Principal } from './principal.js';

/**
 * Loads a resource the caller may see. Another organisation's row answers 404 exactly as a missing one
 * (nothing leaks); the same organisation's row in the other mode answers 403 `wrong_mode`.
 */
export async function findOwned<T extends { org_id: string; mode: string }>(
  db: Knex,
  table: string,
  id: string,
  principal: Principal,
  noun: string,
): Promise<T> {
  const row: T | undefined = await db(table).where({ id, org_id: principal.orgId }).first();
  if (!row) throw errors.notFound(`No such ${noun}: '${id}'.`, 'id');
  if (row.mode !== principal.mode) {
    throw errors.wrongMode(
      `The ${noun} '${id}' exists in ${row.mode} mode, but a ${principal.mode}-mode key was used.`,
    );
  }
  return row;
}
