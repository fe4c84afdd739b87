import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import { recordAudit } from '../audit/audit-log.js';
import { fetchPage, type PageWindow } from '../db/paging.js';

export interface Organisation {
  object: 'organisation';
  id: string;
  name: string;
  created_at: string;
}

interface OrganisationRow {
  id: string;
  name: string;
  created_at: number;
}

const present = (row: OrganisationRow): Organisation => ({
  object: 'organisation',
  id: row.id,
  name: row.name,
  created_at: toIso(row.created_at)!,
});

export async function createOrganisation(
  trx: Knex,
  name: string,
  actor: string,
  now: number,
): Promise<Organisation> {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) {
    throw errors.invalidParameter('name', 'An organisation name must have 1 to 200 characters.');
  }
  const row: OrganisationRow = { id: newId('org'), name: trimmed, created_at: now };
  await trx('organisations').insert(row);
  await recordAudit(
    trx,
    { orgId: row.id, actor, action: 'organisation.created', targetType: 'organisation', targetId: row.id },
    now,
  );
  return present(row);
}

export async function listOrganisations(db: Knex): Promise<Organisation[]> {
  const rows: OrganisationRow[] = await db('organisations').select('*').orderBy('created_at').orderBy('id');
  return rows.map(present);
}

/** One page of organisations, oldest first (the console's list for operators). */
export async function pageOrganisations(
  db: Knex,
  window: PageWindow,
): Promise<{ data: Organisation[]; total: number }> {
  const { rows, total } = await fetchPage<OrganisationRow>(
    () => db<OrganisationRow>('organisations'),
    [
      ['created_at', 'asc'],
      ['id', 'asc'],
    ],
    window.offset,
    window.limit,
  );
  return { data: rows.map(present), total };
}

export async function getOrganisation(db: Knex, id: string): Promise<Organisation> {
  const row: OrganisationRow | undefined = await db('organisations').where({ id }).first();
  if (!row) throw errors.notFound(`No organisation ${id}.`, 'org');
  return present(row);
}

/**
 * Holds the organisation's row until the transaction ends, so that count-then-insert checks across its rows
 * are taken one at a time: on Postgres a second transaction waits here for the first to commit (SQLite's
 * writers take turns already). A no-op update, as SQLite has no `FOR UPDATE`.
 */
export async function lockOrganisation(trx: Knex, orgId: string): Promise<void> {
  await trx('organisations')
    .where({ id: orgId })
    .update({ name: trx.ref('name') });
}
