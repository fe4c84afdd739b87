import type { Knex } from 'knex';
import { newId } from '../ids/ids.js';

export interface AuditEntry {
  orgId: string | null;
  /** Who did it: `cli:<user>`, or `key:<key id>` for API requests. */
  actor: string;
  action: string;
  targetType?: string;
  targetId?: string;
  /** Never a secret: callers pass ids, prefixes and flags only. */
  details?: Record<string, unknown>;
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
