import type { Knex } from 'knex';

/** A place in a walk of an index on `(key, id)`: the walk goes on after it. */
export interface WalkPosition {
  key: number;
  id: string;
}

/** A walk is started again from the beginning at least this often, whatever happened meanwhile. */
export const WALK_RESTART_MS = 86_400_000;

interface WalkRow {
  walk: string;
  after_key: number | string;
  after_id: string;
  started_at: number | string;
}

/**
 * Where a retention walk stopped, or null to start from the beginning: no walk yet, or it began more than
 * WALK_RESTART_MS ago (whatever a walk passed by mistake is found again within a day), or its place is
 * past `restartBelow`, the end of what it may read now (the events' cut-off moved back: retention was
 * lengthened, and held events younger than the new cut-off went back to the walk behind its place).
 */
export async function walkPosition(
  trx: Knex,
  walk: string,
  now: number,
  restartBelow: number = Number.POSITIVE_INFINITY,
): Promise<{ after: WalkPosition | null; startedAt: number }> {
  const row: WalkRow | undefined = await trx('retention_walks').where({ walk }).first();
  if (!row) return { after: null, startedAt: now };
  const startedAt = Number(row.started_at);
  const key = Number(row.after_key);
  if (now - startedAt > WALK_RESTART_MS || key > restartBelow) return { after: null, startedAt: now };
  return { after: { key, id: row.after_id }, startedAt };
}

/** Records where the walk stopped, in the transaction of the batch that read up to there. */
export async function saveWalkPosition(
  trx: Knex,
  walk: string,
  position: WalkPosition,
  startedAt: number,
): Promise<void> {
  await trx('retention_walks')
    .insert({ walk, after_key: position.key, after_id: position.id, started_at: startedAt })
    .onConflict('walk')
    .merge();
}
