import { randomBytes } from 'node:crypto';
import type { Database } from '../db/database.js';
import { serverNowSql } from '../db/server-clock.js';

const TABLE = 'serve_instances';
/** Rows that lapsed this long ago are removed when a server registers: nobody reads them any more. */
const KEEP_LAPSED_MS = 24 * 3600_000;

/**
 * A running `svc serve` as the database knows it: written by its supervisor when it starts, renewed on every
 * heartbeat, removed when it stops. Times are epoch milliseconds of the database server's clock.
 */
export interface ServeInstance {
  id: string;
  host: string;
  pid: number;
  /** The roles it runs, comma-separated. */
  roles: string;
  version: string;
  /** The last migration its build knows. */
  migration_head: string;
  /** Names its build by its set of migrations: two servers with the same digest expect the same schema. */
  migrations_digest: string;
  started_at: number;
  heartbeat_at: number;
  /** After this it no longer counts: it stopped renewing (killed, or cut off from the database). */
  expires_at: number;
}

/** A row still within its expiry, with the database's clock at the time of the read. */
export interface LiveServeInstance extends ServeInstance {
  now: number;
}

export type NewServeInstance = Omit<ServeInstance, 'id' | 'started_at' | 'heartbeat_at' | 'expires_at'>;

export function newServeInstanceId(): string {
  return `srv_${randomBytes(8).toString('hex')}`;
}

/**
 * Records a server that starts, lasting `lapseMs` unless renewed, and returns its row. Rows that lapsed a
 * day ago (servers killed without stopping) go at the same time.
 */
export async function registerServeInstance(
  db: Database,
  id: string,
  instance: NewServeInstance,
  lapseMs: number,
): Promise<ServeInstance> {
  const now = serverNowSql(db);
  await db.transaction(async (trx) => {
    await trx(TABLE)
      .where('expires_at', '<', trx.raw(`${now} - ?`, [KEEP_LAPSED_MS]))
      .delete();
    await trx(TABLE).insert({
      id,
      ...instance,
      started_at: trx.raw(now),
      heartbeat_at: trx.raw(now),
      expires_at: trx.raw(`${now} + ?`, [lapseMs]),
    });
  });
  return (await db.knex(TABLE).where({ id }).first()) as ServeInstance;
}

/**
 * A heartbeat: the server counts for `lapseMs` more. A row removed meanwhile (by hand, or a restore) is
 * written again with its original start.
 */
export async function renewServeInstance(db: Database, row: ServeInstance, lapseMs: number): Promise<void> {
  const now = serverNowSql(db);
  const renewed = await db
    .knex(TABLE)
    .where({ id: row.id })
    .update({ heartbeat_at: db.knex.raw(now), expires_at: db.knex.raw(`${now} + ?`, [lapseMs]) });
  if (renewed > 0) return;
  await db.knex(TABLE).insert({
    ...row,
    heartbeat_at: db.knex.raw(now),
    expires_at: db.knex.raw(`${now} + ?`, [lapseMs]),
  });
}

/** A server that stops cleanly stops counting at once. */
export async function removeServeInstance(db: Database, id: string): Promise<void> {
  await db.knex(TABLE).where({ id }).delete();
}

/**
 * The servers within their expiry. Empty on a database from before servers recorded themselves (the table
 * comes with migration 20261127000020): the caller falls back on what it can see of this host.
 */
export async function liveServeInstances(db: Database): Promise<LiveServeInstance[]> {
  if (!(await db.knex.schema.hasTable(TABLE))) return [];
  const now = serverNowSql(db);
  const rows = (await db
    .knex(TABLE)
    .select('*', db.knex.raw(`${now} as now`))
    .where('expires_at', '>', db.knex.raw(now))
    .orderBy('started_at')) as LiveServeInstance[];
  return rows.map((row) => ({ ...row, now: Number(row.now) }));
}
