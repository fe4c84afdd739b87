import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { newId } from '../ids/ids.js';
import { refreshIntentCreated } from '../events/payloads.js';
import { publishEvent } from '../webhooks/fan-out.js';
import { insertIntent, type IntentRow, type IntentStatus, type RefreshType } from './store.js';
import { SecretError, type SecretBox } from '../secrets/secret-box.js';

export interface RefreshIntent {
  object: 'refresh_intent';
  id: string;
  link_id: string;
  status: IntentStatus;
  refresh_type: RefreshType;
  created_at: string;
  completed_at: string | null;
  error_code: string | null;
  summary: { accounts_updated: number; new_movements_count: number } | null;
  requires_mfa: { widget_token: string; expires_at: string } | null;
  mode: 'live' | 'test';
}

/** `secrets` opens the MFA token for the intent's owner; without it `requires_mfa` carries only the expiry. */
export function presentIntent(row: IntentRow, secrets?: SecretBox): RefreshIntent {
  return {
    object: 'refresh_intent',
    id: row.id,
    link_id: row.link_id,
    status: row.status,
    refresh_type: row.refresh_type,
    created_at: toIso(row.created_at)!,
    completed_at: toIso(row.completed_at),
    error_code: row.error_code,
    summary:
      row.status === 'succeeded'
        ? { accounts_updated: row.accounts_updated ?? 0, new_movements_count: row.new_movements_count ?? 0 }
        : null,
    requires_mfa:
      row.status === 'requires_mfa' && row.mfa_expires_at !== null
        ? {
            widget_token:
              secrets && row.mfa_token_encrypted ? openOrBlank(secrets, row.mfa_token_encrypted, row.id) : '',
            expires_at: toIso(row.mfa_expires_at)!,
          }
        : null,
    mode: row.mode,
  };
}

/**
 * A token that no longer opens (tampered with, or sealed with a master key this host lacks) reads as blank
 * rather than failing the request: the sync that resumes the intent fails it with `credentials_unreadable`.
 */
function openOrBlank(secrets: SecretBox, sealed: string, context: string): string {
  try {
    return secrets.open(sealed, context);
  } catch (error) {
    if (error instanceof SecretError) return '';
    throw error;
  }
}

export async function createIntent(
  trx: Knex,
  link: { id: string; org_id: string; mode: 'live' | 'test' },
  refreshType: RefreshType,
  now: number,
  extra: { backfill_months?: number; force?: boolean } = {},
): Promise<IntentRow> {
  const row: IntentRow = {
    id: newId('ri'),
    org_id: link.org_id,
    mode: link.mode,
    link_id: link.id,
    refresh_type: refreshType,
    status: 'created',
    error_code: null,
    accounts_updated: null,
    new_movements_count: null,
    mfa_token_hash: null,
    mfa_expires_at: null,
    mfa_code_encrypted: null,
    backfill_months: extra.backfill_months ?? null,
    force: extra.force ?? false,
    started_at: null,
    completed_at: null,
    created_at: now,
    updated_at: now,
  };
  await insertIntent(trx, row);
  await publishEvent(trx, {
    orgId: row.org_id,
    mode: row.mode,
    type: 'refresh_intent.created',
    linkId: link.id,
    data: refreshIntentCreated(row),
    now,
  });
  return row;
}
