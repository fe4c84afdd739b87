import type { Knex } from 'knex';

/**
 * The emails of the console users among `actors` (`console:cu_…`), by user id, for the audit log to name
 * people rather than ids. One query for a page's 30 entries; an id with no user (removed) is left out.
 */
export async function consoleUserEmails(db: Knex, actors: readonly string[]): Promise<Map<string, string>> {
  const ids = [
    ...new Set(actors.filter((actor) => actor.startsWith('console:')).map((actor) => actor.slice(8))),
  ];
  if (ids.length === 0) return new Map();
  const rows: { id: string; email: string }[] = await db('console_users')
    .whereIn('id', ids)
    .select('id', 'email');
  return new Map(rows.map((row) => [row.id, row.email]));
}
