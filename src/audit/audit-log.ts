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
