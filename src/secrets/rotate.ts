import type { Knex } from 'knex';
import { recordAudit } from '../audit/audit-log.js';
import type { Database } from '../db/database.js';
import { addActiveKey, ENV_KEY_ID, keyRingOf, readKeyFile, removeKeys } from './master-key-file.js';
import { keyIdOf, SecretBox } from './secret-box.js';
import { SEALED_TABLES, type SealedTable } from './sealed-columns.js';

export class MasterKeyError extends Error {
  override name = 'MasterKeyError';
}

export interface KeyFileSettings {
  masterKeyFile: string;
  /** SVC_MASTER_KEY; rotation needs the key file instead. */
  masterKey: string;
}

/** A sealed value no key in the file opens: tampered with, or sealed with a key the file does not hold. */
export interface UnreadableValue {
  table: string;
  column: string;
  /** The row's primary key, its columns joined with `/`. */
  id: string;
  key_id: string | null;
  reason: string;
}

export interface KeyUsage {
  /** Sealed values by the key they name (only values that key opens). */
  byKey: Record<string, number>;
  /** Per `table.column`: values on the active key, and on older keys of the file. */
  columns: Record<string, { active: number; older: number }>;
  unreadable: UnreadableValue[];
}

export interface RotationProgress {
  table: string;
  done: number;
  total: number;
}

export interface RotationReport {
  object: 'master_key_rotation';
  /** The active key, which every readable value now names. */
  key_id: string;
  /** False when this run finished an interrupted rotation to `key_id` instead of starting another. */
  created: boolean;
  previous_key_ids: string[];
  /** Values re-sealed, per `table.column`. */
  resealed: Record<string, number>;
  resealed_total: number;
  /** Readable values still on an older key (written by a process that had not yet seen the new key). */
  remaining: number;
  unreadable: UnreadableValue[];
  /** Keys removed from the file (`--retire-old`). */
  retired: string[];
}

export interface RetireReport {
  object: 'master_key_retirement';
  key_id: string;
  retired: string[];
  unreadable: UnreadableValue[];
}

const PASSES = 3;

function requireKeyFile(settings: KeyFileSettings): void {
  if (settings.masterKey === '') return;
  throw new MasterKeyError(
    `The master key comes from SVC_MASTER_KEY, which holds one key; a rotation keeps the old key beside the new one until every row is re-sealed, which needs the key file. Move the key into ${settings.masterKeyFile} with the id ${ENV_KEY_ID} (docs/security.md, "Moving SVC_MASTER_KEY into the key file"), unset SVC_MASTER_KEY, restart, then run svc master-key rotate.`,
  );
}

function boxFromFile(path: string): SecretBox {
  const ring = keyRingOf(readKeyFile(path));
  return new SecretBox(ring.active, ring.older);
}

type Row = Record<string, string | null>;

/** Rows after `cursor` in primary-key order (a composite key compares column by column). */
function rowsAfter(db: Knex, sealed: SealedTable, cursor: Row | null, batchSize: number) {
  const { key, columns } = sealed;
  const query = db(sealed.table).where((q) => {
    for (const column of columns) q.orWhereNotNull(column);
  });
  if (cursor) {
    query.where((outer) => {
      key.forEach((column, i) => {
        outer.orWhere((inner) => {
          for (const earlier of key.slice(0, i)) inner.where(earlier, cursor[earlier]!);
          inner.where(column, '>', cursor[column]!);
        });
      });
    });
  }
  return query
    .orderBy(key.map((column) => ({ column })))
    .limit(batchSize)
    .select(...key, ...(sealed.contextColumns ?? []), ...columns) as Promise<Row[]>;
}

/** Rows of a table holding at least one sealed value, `batchSize` at a time in primary-key order. */
async function* sealedRows(db: Knex, sealed: SealedTable, batchSize: number): AsyncGenerator<Row[]> {
  let cursor: Row | null = null;
  for (;;) {
    const rows = await rowsAfter(db, sealed, cursor, batchSize);
    if (rows.length === 0) return;
    yield rows;
    cursor = rows.at(-1)!;
  }
}

const rowName = (sealed: SealedTable, row: Row) => sealed.key.map((column) => row[column]).join('/');

function openOrNull(box: SecretBox, sealed: string, context: string): string | null {
  try {
    return box.open(sealed, context);
  } catch {
    return null;
  }
}

/** Null when `sealed` opens; otherwise why not. */
function whyUnreadable(box: SecretBox, sealed: string, context: string): string | null {
  try {
    box.open(sealed, context);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Which key every sealed value names, and which values no key opens. Reads only. */
export async function keyUsage(db: Database, box: SecretBox, batchSize = 500): Promise<KeyUsage> {
  const usage: KeyUsage = { byKey: {}, columns: {}, unreadable: [] };
  for (const sealed of SEALED_TABLES) {
    const { table, columns } = sealed;
    for (const column of columns) usage.columns[`${table}.${column}`] = { active: 0, older: 0 };
    for await (const rows of sealedRows(db.reader, sealed, batchSize)) {
      for (const row of rows) {
        for (const column of columns) {
          const value = row[column];
          if (!value) continue;
          const keyId = keyIdOf(value);
          const failure = whyUnreadable(box, value, sealed.context(row, column));
          if (failure) {
            usage.unreadable.push({
              table,
              column,
              id: rowName(sealed, row),
              key_id: keyId,
              reason: failure,
            });
            continue;
          }
          usage.byKey[keyId!] = (usage.byKey[keyId!] ?? 0) + 1;
          usage.columns[`${table}.${column}`]![box.isStale(value) ? 'older' : 'active'] += 1;
        }
      }
    }
  }
  return usage;
}

function olderCount(usage: KeyUsage): number {
  return Object.values(usage.columns).reduce((sum, c) => sum + c.older, 0);
}

/**
 * One pass over every sealed column: each value on an older key is opened and sealed again with the active
 * key, a batch per transaction. The update is conditional on the value read, so a value the application
 * changed meanwhile (a rolled webhook secret) is left to the next pass rather than overwritten.
 */
async function resealPass(
  db: Database,
  box: SecretBox,
  batchSize: number,
  resealed: Record<string, number>,
  onProgress: (progress: RotationProgress) => void,
): Promise<void> {
  for (const sealed of SEALED_TABLES) {
    const { table, columns } = sealed;
    const [counted] = await db
      .reader(table)
      .where((q) => {
        for (const column of columns) q.orWhereNotNull(column);
      })
      .count({ n: '*' });
    const total = Number((counted as { n: number | string }).n);
    let done = 0;
    let cursor: Row | null = null;
    onProgress({ table, done, total });
    for (;;) {
      const after: Row | null = cursor;
      const rows = await db.transaction(async (trx) => {
        const batch = await rowsAfter(trx, sealed, after, batchSize);
        for (const row of batch) {
          const changes: Record<string, string> = {};
          for (const column of columns) {
            const value = row[column];
            if (!value || !box.isStale(value)) continue;
            const context = sealed.context(row, column);
            const plaintext = openOrNull(box, value, context);
            // One no key opens stays as it is; keyUsage reports it.
            if (plaintext !== null) changes[column] = box.seal(plaintext, context);
          }
          if (Object.keys(changes).length === 0) continue;
          const unchanged = Object.fromEntries(
            [...sealed.key, ...Object.keys(changes)].map((column) => [column, row[column]]),
          );
          const updated = await trx(table).where(unchanged).update(changes);
          if (updated === 1) for (const column of Object.keys(changes)) resealed[`${table}.${column}`]! += 1;
        }
        return batch;
      });
      if (rows.length === 0) break;
      cursor = rows.at(-1)!;
      done += rows.length;
      onProgress({ table, done: Math.min(done, total), total });
    }
  }
}

/**
 * `svc master-key rotate`: adds a new active key to the key file (keeping the older ones, so a crash at any
 * point loses nothing), then re-seals every stored secret with it. When readable values are still on an
 * older key (a rotation was interrupted), it finishes that rotation instead of adding another key, so
 * running it again is safe and skips what is done.
 */
export async function rotateMasterKey(
  db: Database,
  settings: KeyFileSettings,
  options: {
    actor: string;
    now: () => number;
    batchSize?: number;
    retireOld?: boolean;
    onProgress?: (progress: RotationProgress) => void;
  },
): Promise<RotationReport> {
  requireKeyFile(settings);
  const path = settings.masterKeyFile;
  const batchSize = options.batchSize ?? 200;
  const onProgress = options.onProgress ?? (() => undefined);
  const previous = readKeyFile(path);
  const unfinished = olderCount(await keyUsage(db, boxFromFile(path), batchSize)) > 0;
  let created = false;
  if (!unfinished) {
    const key = addActiveKey(path, new Date(options.now()));
    created = true;
    await db.transaction((trx) =>
      recordAudit(
        trx,
        {
          orgId: null,
          actor: options.actor,
          action: 'master_key.created',
          targetType: 'master_key',
          targetId: key.id,
          details: { previous_active: previous.active },
        },
        options.now(),
      ),
    );
  }
  const box = boxFromFile(path);
  const resealed: Record<string, number> = Object.fromEntries(
    SEALED_TABLES.flatMap(({ table, columns }) => columns.map((column) => [`${table}.${column}`, 0])),
  );
  let usage = await keyUsage(db, box, batchSize);
  for (let pass = 0; pass < PASSES && olderCount(usage) > 0; pass++) {
    await resealPass(db, box, batchSize, resealed, onProgress);
    usage = await keyUsage(db, box, batchSize);
  }
  const report: RotationReport = {
    object: 'master_key_rotation',
    key_id: box.activeKeyId,
    created,
    previous_key_ids: box.keyIds.filter((id) => id !== box.activeKeyId),
    resealed,
    resealed_total: Object.values(resealed).reduce((sum, n) => sum + n, 0),
    remaining: olderCount(usage),
    unreadable: usage.unreadable,
    retired: [],
  };
  await db.transaction((trx) =>
    recordAudit(
      trx,
      {
        orgId: null,
        actor: options.actor,
        action: 'master_key.rotated',
        targetType: 'master_key',
        targetId: report.key_id,
        details: {
          created,
          resealed: report.resealed,
          remaining: report.remaining,
          unreadable: report.unreadable.length,
        },
      },
      options.now(),
    ),
  );
  if (options.retireOld) report.retired = (await retireOldKeys(db, settings, options)).retired;
  return report;
}

/**
 * Removes from the key file every key but the active one, once no readable value names them: a retired
 * key takes with it exactly the values only it opens, so any such value makes this refuse. Values no key
 * opens are reported and do not block (removing a key cannot make them any less readable).
 */
export async function retireOldKeys(
  db: Database,
  settings: KeyFileSettings,
  options: { actor: string; now: () => number; batchSize?: number },
): Promise<RetireReport> {
  requireKeyFile(settings);
  const path = settings.masterKeyFile;
  const box = boxFromFile(path);
  const usage = await keyUsage(db, box, options.batchSize ?? 500);
  const older = box.keyIds.filter((id) => id !== box.activeKeyId);
  const inUse = older.filter((id) => (usage.byKey[id] ?? 0) > 0);
  if (inUse.length > 0) {
    const where = Object.entries(usage.columns)
      .filter(([, counts]) => counts.older > 0)
      .map(([column, counts]) => `${column}: ${counts.older}`)
      .join(', ');
    throw new MasterKeyError(
      `${inUse.join(', ')} still seal${inUse.length === 1 ? 's' : ''} stored values (${where}); run svc master-key rotate to re-seal them with ${box.activeKeyId}, then retire.`,
    );
  }
  if (older.length > 0) {
    removeKeys(path, older);
    await db.transaction((trx) =>
      recordAudit(
        trx,
        {
          orgId: null,
          actor: options.actor,
          action: 'master_key.retired',
          targetType: 'master_key',
          targetId: box.activeKeyId,
          details: { retired: older, unreadable: usage.unreadable.length },
        },
        options.now(),
      ),
    );
  }
  return {
    object: 'master_key_retirement',
    key_id: box.activeKeyId,
    retired: older,
    unreadable: usage.unreadable,
  };
}
