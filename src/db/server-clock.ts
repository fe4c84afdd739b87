import type { Database } from './database.js';

/**
 * The database server's clock minus this machine's, in milliseconds (positive: this machine is behind),
 * measured against the middle of the round trip; null on SQLite, whose clock is this machine's. Leases,
 * key expiry and rate-limit windows are compared across processes and the database, so `svc doctor` looks.
 */
export async function serverClockSkewMs(db: Database): Promise<number | null> {
  if (db.engine !== 'postgres') return null;
  const before = Date.now();
  const result = (await db.knex.raw('select extract(epoch from clock_timestamp()) * 1000 as now')) as {
    rows: { now: string | number }[];
  };
  const after = Date.now();
  return Number(result.rows[0]!.now) - (before + after) / 2;
}

/**
 * The database server's clock as epoch milliseconds, as an SQL expression for a statement to compute where it
 * runs: times that several machines compare (a server's heartbeat and its expiry) are all taken from one
 * clock. On SQLite, the one machine's.
 */
export function serverNowSql(db: Pick<Database, 'engine'>): string {
  return db.engine === 'postgres'
    ? '(extract(epoch from clock_timestamp()) * 1000)::bigint'
    : "cast((julianday('now') - 2440587.5) * 86400000 as integer)";
}
