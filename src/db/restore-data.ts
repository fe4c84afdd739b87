import { createReadStream, closeSync, openSync, readSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Knex } from 'knex';
import { ArchiveError } from '../errors/archive-error.js';
import { openDatabase, type Database } from './database.js';
import { migrateTo } from './migrations.js';
import { libpqConnection, rowCounts, runTool, type ToolOptions } from './snapshot.js';

/**
 * Loading an archive's data into a schema our own migrations made, never the archive's schema itself: a
 * restore treats the archive as untrusted (docs/security.md). The archive's database is read as data only.
 *
 * - SQLite: the archived file must hold exactly the tables and indexes the migrations make (no trigger, no
 *   view, no extra table or column, no generated column); only then are its rows copied, table by table,
 *   into a new file migrated to the same level. A trigger in the archive never fires (nothing is written to
 *   the archived file) and a view is never read.
 * - PostgreSQL: `pg_restore --data-only --file=…` turns the dump into text without connecting anywhere; of
 *   that text only the COPY blocks are read, each checked against a table and columns of the migrated
 *   schema, and their rows inserted with statements svc writes. Functions, triggers, constraints,
 *   extensions and every other statement of the dump are never executed.
 */

/** Tables the migrations fill themselves (migrateTo), never loaded from an archive. */
const MIGRATION_TABLES = new Set(['knex_migrations', 'knex_migrations_lock', 'migration_kinds']);
/**
 * The migrator's record of kinds (src/db/migrations.ts), absent from archives of builds before it: not part
 * of the schema an archive is compared with.
 */
const MIGRATOR_OWN = 'migration_kinds';
/**
 * Tables never loaded from an archive: the migrations' own, and `serve_instances`, the servers that were
 * running when the backup was taken. Loaded, they would hold `svc migrate` back on the restored database
 * for 3 heartbeats as if those servers still ran.
 */
const NOT_RESTORED = new Set([...MIGRATION_TABLES, 'serve_instances']);

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

interface SchemaObject {
  type: string;
  name: string;
  tbl_name: string;
  sql: string | null;
}

/** Whitespace, quoting and case aside, the text of an index (tables are compared column by column). */
function normalised(sql: string | null): string {
  return (sql ?? '')
    .replace(/["`[\]]/g, '')
    .replace(/\s+/g, ' ')
    .replace(/\s*([(),])\s*/g, '$1')
    .trim()
    .toLowerCase();
}

/**
 * Builds `out`, a new SQLite database migrated to `migrations`, and copies the rows of the archived file
 * `archived` into it once its schema is found to be exactly that. Throws an ArchiveError (one line) for a
 * file that is not a database, or holds anything the migrations do not make.
 */
export async function rebuildSqlite(
  archived: string,
  out: string,
  migrations: string[],
  expectedCounts: Record<string, number>,
): Promise<void> {
  const fd = openSync(archived, 'r');
  try {
    const header = Buffer.alloc(100);
    const read = readSync(fd, header, 0, 100, 0);
    if (read < 100 || !header.subarray(0, 16).equals(SQLITE_HEADER))
      throw new ArchiveError('svc.db in the archive is not a SQLite database');
  } finally {
    closeSync(fd);
  }
  const db = openDatabase({ url: `sqlite://${out}`, readPoolSize: 1, quiet: true });
  try {
    await migrateTo(db, migrations);
    // One writer connection (database.ts): every statement below runs on it, in order. trusted_schema off:
    // nothing in the attached file's schema may call a function with side effects, even if it were read.
    await db.knex.raw('PRAGMA trusted_schema = OFF');
    await db.knex.raw('PRAGMA foreign_keys = OFF');
    try {
      await db.knex.raw('ATTACH DATABASE ? AS archived', [archived]);
    } catch (error) {
      throw new ArchiveError(
        `svc.db in the archive does not open as a SQLite database (${firstLine(error)})`,
      );
    }
    try {
      await checkArchivedSqlite(db.knex);
      const tables = (await objects(db.knex, 'main')).filter(
        (o) => o.type === 'table' && !NOT_RESTORED.has(o.name),
      );
      await db.knex.transaction(async (trx) => {
        for (const table of tables) {
          const columns = (await tableColumns(trx, 'main', table.name))
            .filter((c) => c.hidden === 0)
            .map((c) => quoteIdentifier(c.name))
            .join(', ');
          const name = quoteIdentifier(table.name);
          await trx.raw(`INSERT INTO main.${name} (${columns}) SELECT ${columns} FROM archived.${name}`);
        }
      });
      const broken: unknown[] = await db.knex.raw('PRAGMA main.foreign_key_check');
      if (broken.length > 0)
        throw new ArchiveError(
          `svc.db in the archive breaks its own foreign keys (${broken.length} row(s), e.g. in ${(broken[0] as { table: string }).table})`,
        );
      await checkCounts(db.knex, 'sqlite', expectedCounts);
    } finally {
      await db.knex.raw('DETACH DATABASE archived').catch(() => undefined);
    }
  } finally {
    await db.close();
  }
}

async function objects(knex: Knex, schema: 'main' | 'archived'): Promise<SchemaObject[]> {
  return knex.raw(
    `select type, name, tbl_name, sql from ${schema}.sqlite_master where name not like 'sqlite\\_%' escape '\\' order by type, name`,
  );
}

interface ColumnInfo {
  name: string;
  type: string;
  notnull: number;
  pk: number;
  hidden: number;
}

async function tableColumns(knex: Knex, schema: 'main' | 'archived', table: string): Promise<ColumnInfo[]> {
  return knex.raw('select name, type, "notnull", pk, hidden from pragma_table_xinfo(?, ?) order by cid', [
    table,
    schema,
  ]);
}

/** The archived file's schema against the migrated one: the same objects, the same columns, nothing else. */
async function checkArchivedSqlite(knex: Knex): Promise<void> {
  let archived: SchemaObject[];
  try {
    archived = await objects(knex, 'archived');
  } catch (error) {
    throw new ArchiveError(`svc.db in the archive does not open as a SQLite database (${firstLine(error)})`);
  }
  archived = archived.filter((o) => o.tbl_name !== MIGRATOR_OWN);
  const ours = (await objects(knex, 'main')).filter((o) => o.tbl_name !== MIGRATOR_OWN);
  const key = (o: SchemaObject) => `${o.type} ${o.name}`;
  const expected = new Map(ours.map((o) => [key(o), o]));
  const foreign = archived.filter((o) => !expected.has(key(o)));
  if (foreign.length > 0)
    throw new ArchiveError(
      `svc.db in the archive holds ${foreign
        .slice(0, 3)
        .map((o) => `${o.type} ${o.name}`)
        .join(', ')}, which svc's migrations do not create (a restore loads data only into svc's own schema)`,
    );
  const present = new Set(archived.map(key));
  const missing = ours.filter((o) => !present.has(key(o)));
  if (missing.length > 0)
    throw new ArchiveError(
      `svc.db in the archive lacks ${missing
        .slice(0, 3)
        .map((o) => `${o.type} ${o.name}`)
        .join(', ')} of the schema its manifest names`,
    );
  for (const object of archived) {
    const mine = expected.get(key(object))!;
    if (object.tbl_name !== mine.tbl_name)
      throw new ArchiveError(`svc.db in the archive has ${key(object)} on another table than svc's schema`);
    if (object.type === 'table') {
      const theirs = JSON.stringify(await tableColumns(knex, 'archived', object.name));
      const wanted = JSON.stringify(await tableColumns(knex, 'main', object.name));
      if (theirs !== wanted)
        throw new ArchiveError(
          `svc.db in the archive has table ${object.name} with other columns than svc's`,
        );
    } else if (normalised(object.sql) !== normalised(mine.sql)) {
      throw new ArchiveError(`svc.db in the archive has ${key(object)} defined otherwise than svc's`);
    }
  }
}

function firstLine(error: unknown): string {
  return String((error as Error)?.message ?? error)
    .split('\n')[0]!
    .slice(0, 200);
}

/** The rebuilt database against the manifest's row counts, before it replaces anything. */
async function checkCounts(knex: Knex, engine: 'sqlite' | 'postgres', expected: Record<string, number>) {
  const counts = await rowCounts(knex, engine);
  const differing = Object.entries(expected).filter(
    ([table, n]) => !NOT_RESTORED.has(table) && counts[table] !== n,
  );
  if (differing.length > 0)
    throw new ArchiveError(
      `its database does not hold what its manifest recorded (${differing
        .slice(0, 3)
        .map(([table, n]) => `${table}: ${counts[table] ?? 'missing'} rows, expected ${n}`)
        .join('; ')})`,
    );
}

export interface PostgresLoadOptions extends ToolOptions {
  /** The dump (`pg_dump --format=custom`) in the staging directory, and a file there for its text. */
  dump: string;
  text: string;
  migrations: string[];
  expectedCounts: Record<string, number>;
  /** Drop the tables the target schema holds first. */
  force: boolean;
}

/**
 * Migrates the target schema to the archive's level and loads the dump's table data into it. Either it
 * returns with the data committed, or it throws having dropped what it created (the schema too, if it made
 * it): a refused archive leaves the target as it found it, unless --force had already cleared it.
 */
export async function loadPostgres(url: string, options: PostgresLoadOptions): Promise<void> {
  // No --dbname: pg_restore only turns the archive into text, connecting nowhere, and gets no password.
  try {
    await runTool(
      'pg_restore',
      ['--data-only', '--no-owner', '--no-privileges', `--file=${options.text}`, options.dump],
      { url: '', password: null, schema: null },
      { env: options.env },
    );
  } catch (error) {
    const message = (error as Error).message;
    if (/not installed/.test(message)) throw error;
    throw new ArchiveError(
      `postgres.dump in the archive is not a dump pg_restore reads (${message.split('\n').slice(1).join(' ').trim().slice(0, 200) || 'pg_restore failed'})`,
    );
  }
  const schema = libpqConnection(url).schema ?? 'public';
  const db = openDatabase({ url, quiet: true });
  let createdSchema = false;
  let created = false;
  try {
    const exists = await db.knex.raw('select 1 from pg_namespace where nspname = ?', [schema]);
    if (exists.rows.length === 0) {
      await db.knex.raw(`create schema ${quoteIdentifier(schema)}`);
      createdSchema = true;
    }
    if (options.force) await dropTables(db, schema);
    created = true;
    await migrateTo(db, options.migrations);
    try {
      await db.knex.transaction(async (trx) => {
        await loadCopyBlocks(trx, schema, options);
        await checkCounts(trx, 'postgres', options.expectedCounts);
      });
    } catch (error) {
      if (error instanceof ArchiveError) throw error;
      throw new ArchiveError(`the data of postgres.dump does not fit svc's schema (${firstLine(error)})`);
    }
  } catch (error) {
    if (created) {
      await dropTables(db, schema).catch(() => undefined);
      if (createdSchema)
        await db.knex.raw(`drop schema if exists ${quoteIdentifier(schema)} cascade`).catch(() => undefined);
    }
    throw error;
  } finally {
    await db.close();
  }
}

async function dropTables(db: Database, schema: string): Promise<void> {
  const tables = await db.knex.raw('select tablename from pg_tables where schemaname = ?', [schema]);
  for (const { tablename } of tables.rows as { tablename: string }[])
    await db.knex.raw(
      `drop table if exists ${quoteIdentifier(schema)}.${quoteIdentifier(tablename)} cascade`,
    );
}

/** `"a"."b"`, `a.b` or `a`: the parts of a (possibly qualified) identifier list as pg_dump writes them. */
function identifiers(text: string, separator: '.' | ','): string[] | null {
  const parts: string[] = [];
  const pattern = /\s*(?:"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_$]*))\s*/y;
  let at = 0;
  for (;;) {
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (!match) return null;
    parts.push(match[1] !== undefined ? match[1].replace(/""/g, '"') : match[2]!);
    at = pattern.lastIndex;
    if (at === text.length) return parts;
    if (text[at] !== separator) return null;
    at++;
  }
}

/** One field of COPY's text format: `\N` is null, backslash escapes as PostgreSQL writes them. */
function copyField(field: string): string | null {
  if (field === '\\N') return null;
  if (!field.includes('\\')) return field;
  return field.replace(/\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|([\s\S]))/g, (_, octal, hex, char) => {
    if (octal) return String.fromCharCode(parseInt(octal, 8));
    if (hex) return String.fromCharCode(parseInt(hex, 16));
    return { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' }[char as 'b'] ?? char;
  });
}

const COPY_LINE = /^COPY (.+?) \((.*)\) FROM stdin;$/;

async function loadCopyBlocks(trx: Knex.Transaction, schema: string, options: PostgresLoadOptions) {
  const columnRows = await trx.raw(
    'select table_name, column_name from information_schema.columns where table_schema = ? order by table_name, ordinal_position',
    [schema],
  );
  const columnsOf = new Map<string, Set<string>>();
  for (const { table_name, column_name } of columnRows.rows as {
    table_name: string;
    column_name: string;
  }[]) {
    if (!columnsOf.has(table_name)) columnsOf.set(table_name, new Set());
    columnsOf.get(table_name)!.add(column_name);
  }
  // Our own foreign keys, as the migrations defined them, are set aside while the rows go in (the dump's
  // order is not theirs) and put back after, when they check every row.
  const foreignKeys = (
    await trx.raw(
      `select c.conrelid::regclass::text as tbl, c.conname as name, pg_get_constraintdef(c.oid) as def
         from pg_constraint c join pg_namespace n on n.oid = c.connamespace
        where c.contype = 'f' and n.nspname = ?`,
      [schema],
    )
  ).rows as { tbl: string; name: string; def: string }[];
  for (const fk of foreignKeys)
    await trx.raw(`alter table ${fk.tbl} drop constraint ${quoteIdentifier(fk.name)}`);

  const loaded = new Set<string>();
  const lines = createInterface({ input: createReadStream(options.text, 'utf8'), crlfDelay: Infinity });
  let table: string | null = null;
  let columns: string[] = [];
  let batch: Record<string, string | null>[] = [];
  let perBatch = 1;
  const flush = async () => {
    if (batch.length > 0) await trx.insert(batch).into(table!);
    batch = [];
  };
  for await (const line of lines) {
    if (table === null) {
      const copy = COPY_LINE.exec(line);
      if (!copy) continue; // SET, setval, comments: statements of the dump, never run
      const name = identifiers(copy[1]!, '.');
      const names = identifiers(copy[2]!, ',');
      if (!name || !names || name.length > 2)
        throw new ArchiveError('postgres.dump in the archive has a COPY svc cannot read');
      const target = name.at(-1)!;
      if (NOT_RESTORED.has(target)) {
        table = '';
        continue;
      }
      const known = columnsOf.get(target);
      if (!known)
        throw new ArchiveError(
          `postgres.dump in the archive holds data for table ${target}, which svc's migrations do not create`,
        );
      if (loaded.has(target)) throw new ArchiveError(`postgres.dump in the archive holds ${target} twice`);
      const unknown = names.filter((column) => !known.has(column));
      if (unknown.length > 0 || new Set(names).size !== names.length)
        throw new ArchiveError(
          `postgres.dump in the archive holds column(s) ${unknown.join(', ') || '(repeated)'} of ${target}, which svc's schema does not have`,
        );
      loaded.add(target);
      table = target;
      columns = names;
      perBatch = Math.max(1, Math.min(1000, Math.floor(30_000 / names.length)));
      continue;
    }
    if (line === '\\.') {
      if (table !== '') await flush();
      table = null;
      continue;
    }
    if (table === '') continue;
    const fields = line.split('\t');
    if (fields.length !== columns.length)
      throw new ArchiveError(
        `postgres.dump in the archive has a row of ${table} with the wrong number of fields`,
      );
    const row: Record<string, string | null> = {};
    columns.forEach((column, i) => (row[column] = copyField(fields[i]!)));
    batch.push(row);
    if (batch.length >= perBatch) await flush();
  }
  if (table !== null) throw new ArchiveError('postgres.dump in the archive ends inside a table (cut short)');

  for (const fk of foreignKeys)
    await trx.raw(`alter table ${fk.tbl} add constraint ${quoteIdentifier(fk.name)} ${fk.def}`);
  // Serial columns continue after the highest id restored.
  const serials = (
    await trx.raw(
      `select table_name, column_name from information_schema.columns
        where table_schema = ? and column_default like 'nextval(%'`,
      [schema],
    )
  ).rows as { table_name: string; column_name: string }[];
  for (const { table_name, column_name } of serials) {
    if (MIGRATION_TABLES.has(table_name)) continue;
    const qualified = `${quoteIdentifier(schema)}.${quoteIdentifier(table_name)}`;
    await trx.raw(
      `select setval(pg_get_serial_sequence(?, ?), coalesce(max(${quoteIdentifier(column_name)}), 0) + 1, false) from ${qualified}`,
      [qualified, column_name],
    );
  }
}
