/*
 * Set-based seeding for bench/growth.ts: each table filled by `INSERT ... SELECT` over a series of integers
 * (`generate_series` on Postgres, a recursive CTE on SQLite), a million rows per statement, so that the
 * issue's full scale (10,000,000 movements, 100,000 links, 3,000,000 events) seeds in minutes. Dialect-specific
 * SQL lives here because this is a benchmark: the appliance's own code keeps it in src/db/.
 *
 * Ids are prefix + 16 lowercase hex of the row's number (`mov_000000000000002a`), as `newId` makes them.
 * The secondary indexes of the large tables are dropped before their rows go in and built again after
 * (what a restore does; building an index sorts once, where inserting into it walks it per row), and on
 * Postgres the foreign-key triggers are skipped for the seed's own transactions
 * (`session_replication_role = replica`); every row satisfies them anyway.
 */
import type { Knex } from 'knex';
import type { Database } from '../src/db/database.js';

export const DAY = 86_400_000;
export const YEAR = 365 * DAY;
export const TYPES = [
  'link.refreshed',
  'account.created',
  'refresh_intent.succeeded',
  'refresh_intent.created',
];
/** Rows per INSERT ... SELECT statement, each its own transaction. */
const CHUNK = 1_000_000;

export interface SeedScale {
  links: number;
  movements: number;
  events: number;
}

export interface SeedShape {
  orgId: string;
  now: number;
  /** Movements of the measured account (the same on every database). */
  big: number;
  /** Deliveries still pending and due (the newest), for the dispatcher's claim. */
  pending: number;
  endpointId: string;
}

/** The id a seeded row of `prefix` number `expr` (an SQL expression) gets. */
export function hexId(db: Database, prefix: string, expr: string): string {
  return db.engine === 'postgres'
    ? `('${prefix}_' || lpad(to_hex(${expr}), 16, '0'))`
    : `printf('${prefix}_%016x', ${expr})`;
}

/** The `attempt_history` of a delivery attempted once, at `at` + 400 ms, answered `status` (SQL). */
function oneAttempt(at: string, status: string): string {
  return `'[{"number":1,"started_at":' || (${at} + 400) || ',"duration_ms":100,"status_code":' || (${status}) ||
    ',"error":null,"response_excerpt":"ok"}]'`;
}

export function hexOf(prefix: string, i: number): string {
  return `${prefix}_${i.toString(16).padStart(16, '0')}`;
}

/** A time in the twelve months before `now`, older first as `j` grows towards `count` (SQL of `spread`). */
function spreadSql(now: number, j: string, count: number): string {
  return `(${now} - ((${count} - (${j})) * ${YEAR}) / ${count} - ((${j}) % 1000))`;
}

/**
 * Runs `INSERT INTO table (columns) SELECT select FROM (SELECT i, inner FROM <series i in [lo, hi)>)` in
 * chunks, each in its own transaction. `select` reads the integer column `i` and the columns `inner` names.
 */
export async function insertSeries(
  db: Database,
  table: string,
  columns: readonly string[],
  select: string,
  lo: number,
  hi: number,
  inner = '',
): Promise<void> {
  for (let start = lo; start < hi; start += CHUNK) {
    const end = Math.min(hi, start + CHUNK);
    const series =
      db.engine === 'postgres' ? `generate_series(${start}::bigint, ${end - 1}::bigint) AS g(i)` : `g`;
    const prefix =
      db.engine === 'postgres'
        ? ''
        : `WITH RECURSIVE g(i) AS (SELECT ${start} UNION ALL SELECT i + 1 FROM g WHERE i < ${end - 1}) `;
    const source = inner === '' ? series : `(SELECT i, ${inner} FROM ${series}) AS s`;
    const sql = `${prefix}INSERT INTO ${table} (${columns.join(', ')}) SELECT ${select} FROM ${source}`;
    await db.knex.transaction(async (trx: Knex.Transaction) => {
      if (db.engine === 'postgres') await trx.raw('SET LOCAL session_replication_role = replica');
      await trx.raw(sql);
    });
  }
}

/** Drops a table's secondary indexes (not those behind a primary key or a constraint); returns their DDL. */
async function dropIndexes(db: Database, table: string): Promise<string[]> {
  if (db.engine === 'postgres') {
    const result = await db.knex.raw(
      `SELECT i.indexname, i.indexdef FROM pg_indexes i
       WHERE i.schemaname = current_schema() AND i.tablename = ?
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
                         WHERE n.nspname = current_schema() AND c.conname = i.indexname)`,
      [table],
    );
    const rows = result.rows as { indexname: string; indexdef: string }[];
    for (const row of rows) await db.knex.raw(`DROP INDEX "${row.indexname}"`);
    return rows.map((row) => row.indexdef);
  }
  const rows: { name: string; sql: string }[] = await db.knex.raw(
    `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`,
    [table],
  );
  for (const row of rows) await db.knex.raw(`DROP INDEX "${row.name}"`);
  return rows.map((row) => row.sql);
}

async function createIndexes(db: Database, ddl: readonly string[]): Promise<void> {
  if (db.engine === 'postgres') {
    await db.knex.transaction(async (trx: Knex.Transaction) => {
      await trx.raw(`SET LOCAL maintenance_work_mem = '1GB'`);
      for (const statement of ddl) await trx.raw(statement);
    });
  } else {
    for (const statement of ddl) await db.knex.raw(statement);
  }
}

/** Fills `table` by `fill` with its secondary indexes dropped, then builds them again. */
async function withoutIndexes(db: Database, table: string, fill: () => Promise<void>): Promise<void> {
  const ddl = await dropIndexes(db, table);
  await fill();
  await createIndexes(db, ddl);
}

/**
 * Seeds one organisation's year: links (each with one account, due over the next four hours), movements
 * (the measured account's `big` spread evenly through the table among the others', as syncs over a year
 * append them), one webhook endpoint, events (a realistic `seq`), one delivery per event (the newest
 * `pending` still pending and due) and one attempt per finished delivery, and half as many finished sync
 * jobs as events. Then the counts the list totals come from: the accounts' `visible_count` and
 * `pending_count`, and the event and delivery tallies (as migration 20261125000011 fills them).
 */
export async function seedSetBased(
  db: Database,
  scale: SeedScale,
  shape: SeedShape,
  progress: (step: string) => void,
): Promise<void> {
  const { orgId, now, big, pending, endpointId } = shape;
  const pg = db.engine === 'postgres';
  const L = scale.links;
  const M = scale.movements;
  const E = scale.events;
  const J = Math.floor(E / 2);
  const org = `'${orgId}'`;
  const link = (expr: string) => hexId(db, 'link', expr);
  const account = (expr: string) => hexId(db, 'acc', expr);
  const dateOf = (ms: string) =>
    pg
      ? `to_char(to_timestamp((${ms}) / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`
      : `strftime('%Y-%m-%d', (${ms}) / 1000, 'unixepoch')`;
  if (!pg) await db.knex.raw('PRAGMA foreign_keys = OFF');
  try {
    progress('links');
    await insertSeries(
      db,
      'links',
      [
        'id',
        'org_id',
        'mode',
        'bank_id',
        'holder_type',
        'status',
        'credentials_encrypted',
        'next_sync_at',
        'created_at',
        'updated_at',
      ],
      `${link('i')}, ${org}, 'test', 'bancochile', 'individual', 'active', 'x',
       ${now} + (i * ${4 * 3_600_000}) / ${L}, ${now - YEAR}, ${now}`,
      0,
      L,
    );
    progress('accounts');
    await insertSeries(
      db,
      'accounts',
      [
        'id',
        'org_id',
        'mode',
        'link_id',
        'bank_account_ref',
        'name',
        'type',
        'currency',
        'created_at',
        'updated_at',
      ],
      `${account('i')}, ${org}, 'test', ${link('i')}, 'CC-' || i, 'Cuenta', 'checking', 'CLP', ${now - YEAR}, ${now}`,
      0,
      L,
    );

    // Every `stride`-th movement (the first `big` of them) is the measured account's; the others go round
    // the remaining accounts. Each part is spread over the year in insertion order.
    const stride = Math.max(1, Math.floor(M / big));
    const others = Math.max(1, L - 1);
    const mine = `(i % ${stride} = 0 AND i / ${stride} < ${big})`;
    const a = `CASE WHEN ${mine} THEN 0 ELSE 1 + (i % ${others}) END`;
    const posted = `CASE WHEN ${mine} THEN ${spreadSql(now, `i / ${stride}`, big)} ELSE ${spreadSql(now, 'i', M)} END`;
    progress(`movements (${M})`);
    await withoutIndexes(db, 'movements', () =>
      insertSeries(
        db,
        'movements',
        [
          'id',
          'org_id',
          'mode',
          'link_id',
          'account_id',
          'bank_ref',
          'fingerprint',
          'amount',
          'currency',
          'description',
          'type',
          'reference_id',
          'posted_at',
          'transaction_date',
          'pending',
          'status',
          'synced_at',
          'created_at',
        ],
        `${hexId(db, 'mov', 'i')}, ${org}, 'test', ${link('a')}, ${account('a')}, 'M-' || i, 'f' || i,
         -((i * 7919) % 100000), 'CLP', 'COMPRA ' || (i % 200), 'card_purchase', 'R' || i, posted,
         ${dateOf('posted')}, (i % 50 = 0), CASE WHEN i % 97 = 0 THEN 'duplicated' ELSE 'normal' END,
         posted + 60000, posted + 60000`,
        0,
        M,
        `${a} AS a, ${posted} AS posted`,
      ),
    );

    progress('webhook endpoint');
    await db.knex('webhook_endpoints').insert({
      id: endpointId,
      org_id: orgId,
      mode: 'test',
      url: 'https://receiver.example/hook',
      enabled_events: JSON.stringify(TYPES),
      disabled: false,
      secret_encrypted: 'x',
      created_at: now - YEAR,
      updated_at: now,
    });

    // Events over the year, `seq` as `nextSeq` makes it (the emission time in ms, times 1000, plus a
    // counter), and one delivery each, the newest `pending` of them still pending and due.
    const at = spreadSql(now, 'i', E);
    const type = `CASE i % 4 ${TYPES.map((t, k) => `WHEN ${k} THEN '${t}'`).join(' ')} END`;
    progress(`events (${E})`);
    await withoutIndexes(db, 'events', () =>
      insertSeries(
        db,
        'events',
        ['id', 'org_id', 'mode', 'type', 'link_id', 'data', 'created_at', 'seq'],
        `${hexId(db, 'evt', 'i')}, ${org}, 'test', ${type}, ${link(`i % ${L}`)},
         '{"link_id":"' || ${link(`i % ${L}`)} || '","n":' || i || '}', at, at * 1000 + i % 1000`,
        0,
        E,
        `${at} AS at`,
      ),
    );
    const isPending = `(i >= ${E - pending})`;
    progress(`webhook_deliveries (${E})`);
    await withoutIndexes(db, 'webhook_deliveries', () =>
      insertSeries(
        db,
        'webhook_deliveries',
        [
          'id',
          'org_id',
          'mode',
          'event_id',
          'event_type',
          'endpoint_id',
          'status',
          'attempts',
          'next_attempt_at',
          'last_attempt_at',
          'last_response_status',
          'created_at',
          'updated_at',
          'attempt_history',
        ],
        `${hexId(db, 'wd', 'i')}, ${org}, 'test', ${hexId(db, 'evt', 'i')}, ${type}, '${endpointId}',
         CASE WHEN ${isPending} THEN 'pending' WHEN i % 100 = 0 THEN 'failed' ELSE 'succeeded' END,
         CASE WHEN ${isPending} THEN 0 ELSE 1 END,
         CASE WHEN ${isPending} THEN ${now - 1000} END,
         CASE WHEN ${isPending} THEN NULL ELSE at + 500 END,
         CASE WHEN ${isPending} THEN NULL WHEN i % 100 = 0 THEN 500 ELSE 200 END,
         at, at + 500,
         CASE WHEN ${isPending} THEN NULL ELSE ${oneAttempt('at', 'CASE WHEN i % 100 = 0 THEN 500 ELSE 200 END')} END`,
        0,
        E,
        `${at} AS at`,
      ),
    );
    // Finished sync jobs over the year (half as many as events), which retention prunes after 14 days.
    const jobAt = spreadSql(now, 'i', Math.max(1, J));
    progress(`jobs (${J})`);
    await withoutIndexes(db, 'jobs', () =>
      insertSeries(
        db,
        'jobs',
        [
          'id',
          'kind',
          'org_id',
          'link_id',
          'payload',
          'status',
          'attempts',
          'run_at',
          'created_at',
          'updated_at',
        ],
        `${hexId(db, 'job', 'i')}, 'sync', ${org}, ${link(`i % ${L}`)},
         '{"refresh_type":"scheduled","interactive":false}',
         CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END, 1, at, at, at + 5000`,
        0,
        J,
        `${jobAt} AS at`,
      ),
    );
  } finally {
    if (!pg) await db.knex.raw('PRAGMA foreign_keys = ON');
  }

  progress('counts and tallies');
  // Counts as the sync engine keeps them (the movement list's total comes from these).
  await db.knex.transaction(async (trx: Knex.Transaction) => {
    await trx.raw(
      `UPDATE accounts SET
      visible_count = (SELECT count(*) FROM movements m WHERE m.account_id = accounts.id AND m.status = 'normal' AND m.pending = ?),
      pending_count = (SELECT count(*) FROM movements m WHERE m.account_id = accounts.id AND m.status = 'normal' AND m.pending = ?)`,
      [false, true],
    );
  });
  // The event and delivery lists' totals, as migration 20261125000011 fills them.
  await db.knex.raw(
    `INSERT INTO event_tallies (org_id, mode, type, n)
     SELECT org_id, mode, type, count(*) FROM events GROUP BY org_id, mode, type`,
  );
  await db.knex.raw(
    `INSERT INTO webhook_delivery_tallies (endpoint_id, status, n)
     SELECT endpoint_id, status, count(*) FROM webhook_deliveries GROUP BY endpoint_id, status`,
  );
  if (pg) {
    // As autovacuum leaves tables that were filled over a year: vacuumed (visibility map set) and analysed.
    progress('VACUUM ANALYZE');
    await db.knex.raw('VACUUM ANALYZE');
  }
}

/**
 * One simulated day of the steady load after the seed, at the large operator's rate: `events` events (with
 * one succeeded delivery and one attempt each) and `jobs` finished sync jobs, created evenly over the day
 * from `start`, numbered from `first` (after every row seeded before), and the tallies' changes for them
 * as the writers record theirs.
 */
export async function seedDay(
  db: Database,
  shape: Pick<SeedShape, 'orgId' | 'endpointId'> & { links: number },
  day: { start: number; first: number; events: number; jobs: number },
): Promise<void> {
  const pg = db.engine === 'postgres';
  const { first, events, jobs, start } = day;
  const org = `'${shape.orgId}'`;
  const link = (expr: string) => hexId(db, 'link', expr);
  const at = `(${start} + ((i - ${first}) * ${DAY}) / ${events})`;
  const type = `CASE i % 4 ${TYPES.map((t, k) => `WHEN ${k} THEN '${t}'`).join(' ')} END`;
  if (!pg) await db.knex.raw('PRAGMA foreign_keys = OFF');
  try {
    await insertSeries(
      db,
      'events',
      ['id', 'org_id', 'mode', 'type', 'link_id', 'data', 'created_at', 'seq'],
      `${hexId(db, 'evt', 'i')}, ${org}, 'test', ${type}, ${link(`i % ${shape.links}`)},
       '{"link_id":"' || ${link(`i % ${shape.links}`)} || '","n":' || i || '}', at, at * 1000 + i % 1000`,
      first,
      first + events,
      `${at} AS at`,
    );
    await insertSeries(
      db,
      'webhook_deliveries',
      [
        'id',
        'org_id',
        'mode',
        'event_id',
        'event_type',
        'endpoint_id',
        'status',
        'attempts',
        'last_attempt_at',
        'last_response_status',
        'created_at',
        'updated_at',
        'attempt_history',
      ],
      `${hexId(db, 'wd', 'i')}, ${org}, 'test', ${hexId(db, 'evt', 'i')}, ${type}, '${shape.endpointId}',
       'succeeded', 1, at + 500, 200, at, at + 500, ${oneAttempt('at', '200')}`,
      first,
      first + events,
      `${at} AS at`,
    );
    const jobAt = `(${start} + ((i - ${first}) * ${DAY}) / ${jobs})`;
    await insertSeries(
      db,
      'jobs',
      [
        'id',
        'kind',
        'org_id',
        'link_id',
        'payload',
        'status',
        'attempts',
        'run_at',
        'created_at',
        'updated_at',
      ],
      `${hexId(db, 'job', 'i')}, 'sync', ${org}, ${link(`i % ${shape.links}`)},
       '{"refresh_type":"scheduled","interactive":false}', 'succeeded', 1, at, at, at + 5000`,
      first,
      first + jobs,
      `${jobAt} AS at`,
    );
  } finally {
    if (!pg) await db.knex.raw('PRAGMA foreign_keys = ON');
  }
  await db.knex.raw(
    `INSERT INTO event_tallies (org_id, mode, type, n)
     SELECT org_id, mode, type, count(*) FROM events WHERE id >= ? AND id < ? GROUP BY org_id, mode, type`,
    [hexOf('evt', first), hexOf('evt', first + events)],
  );
  await db
    .knex('webhook_delivery_tallies')
    .insert({ endpoint_id: shape.endpointId, status: 'succeeded', n: events });
}
