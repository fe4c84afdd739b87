import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { fetchPage, NEWEST_FIRST, type PageWindow } from '../db/paging.js';
import { newId } from '../ids/ids.js';

export interface AuditEntry {
  orgId: string | null;
  /** Who did it: a principal's `actor` (`key:<key id>`, `console:<user>`, `cli:<user>`), or a process. */
  actor: string;
  action: string;
  targetType?: string;
  targetId?: string;
  /** Never a secret: callers pass ids, prefixes and flags only. */
  details?: Record<string, unknown>;
}

/**
 * A change `principal` made to one of its organisation's resources. The service that makes the change
 * writes it, in the change's transaction, whoever called (the API, the console or the CLI): one row, one
 * place, and a refused change writes none.
 */
export function auditChange(
  trx: Knex,
  principal: { orgId: string; actor: string },
  change: { action: string; targetType: string; targetId: string; details?: Record<string, unknown> },
  now: number,
): Promise<void> {
  return recordAudit(trx, { orgId: principal.orgId, actor: principal.actor, ...change }, now);
}

export async function recordAudit(trx: Knex, entry: AuditEntry, now: number): Promise<void> {
  await trx('audit_log').insert({
    id: newId('aud'),
    org_id: entry.orgId,
    actor: entry.actor,
    action: entry.action,
    target_type: entry.targetType ?? null,
    target_id: entry.targetId ?? null,
    details: entry.details ? JSON.stringify(entry.details) : null,
    created_at: now,
  });
}

/**
 * Retention (off by default: `retention.auditLogDays` 0): removes up to `limit` entries written before
 * `cutoff`, oldest first. Walks `audit_log_created_at_idx`.
 */
export async function pruneAuditLog(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const ids = trx('audit_log')
    .select('id')
    .where('created_at', '<', cutoff)
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .limit(limit);
  return trx('audit_log').whereIn('id', ids).delete();
}

export interface AuditRecord {
  id: string;
  actor: string;
  action: string;
  target_type: string | null;
  target_id: string | null;
  details: Record<string, unknown> | null;
  created_at: string;
}

/**
 * One page of an organisation's audit log, newest first, narrowed to an action and an actor when given
 * (exact values). Walks `audit_log(org_id, created_at)`.
 */
export async function pageAuditLog(
  db: Knex,
  filter: { orgId: string; action?: string; actor?: string },
  window: PageWindow,
): Promise<{ data: AuditRecord[]; total: number }> {
  const scoped = () => {
    const query = db('audit_log').where('org_id', filter.orgId);
    if (filter.action) query.where('action', filter.action);
    if (filter.actor) query.where('actor', filter.actor);
    return query;
  };
  const { rows, total } = await fetchPage<{
    id: string;
    actor: string;
    action: string;
    target_type: string | null;
    target_id: string | null;
    details: string | null;
    created_at: number;
  }>(scoped, NEWEST_FIRST, window.offset, window.limit);
  return {
    data: rows.map((row) => ({
      ...row,
      details: row.details ? (JSON.parse(row.details) as Record<string, unknown>) : null,
      created_at: toIso(Number(row.created_at))!,
    })),
    total,
  };
}

/**
 * The latest entry of one action on one target (a deleted link's `link.delete`, which keeps its last state),
 * with its organisation. Walks `audit_log`'s target index when there is one; a target has few entries.
 */
export async function latestAuditOf(
  db: Knex,
  filter: { action: string; targetType: string; targetId: string },
): Promise<(AuditRecord & { org_id: string | null }) | undefined> {
  const row:
    | {
        id: string;
        org_id: string | null;
        actor: string;
        action: string;
        target_type: string | null;
        target_id: string | null;
        details: string | null;
        created_at: number;
      }
    | undefined = await db('audit_log')
    .where({ action: filter.action, target_type: filter.targetType, target_id: filter.targetId })
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .first();
  if (!row) return undefined;
  return {
    ...row,
    details: row.details ? (JSON.parse(row.details) as Record<string, unknown>) : null,
    created_at: toIso(Number(row.created_at))!,
  };
}
