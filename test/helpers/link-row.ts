import type { LinkRow } from '../../src/links/store.js';

/**
 * An active, unpaused credential link as the store reads it, made and last changed at `at`: the row the
 * link's pure functions (its state moves, the sandbox's events) take. `changes` set what a test is about.
 */
export function linkRowAt(at: number, changes: Partial<LinkRow> = {}): LinkRow {
  return {
    id: 'link_0123456789abcdef',
    org_id: 'org_0123456789abcdef',
    mode: 'test',
    bank_id: 'bci',
    holder_type: 'individual',
    holder_name: 'Ana',
    status: 'active',
    paused: false,
    paused_at: null,
    external_user_id: null,
    consent_version: null,
    consent_text_hash: null,
    credentials_encrypted: 'sealed',
    refresh_status: 'idle',
    accounts_count: 2,
    new_movements_count: 0,
    consecutive_failures: 0,
    sync_attempts: 0,
    sync_successes: 0,
    last_error_code: null,
    last_synced_at: null,
    next_sync_at: null,
    expired_at: null,
    created_at: at,
    updated_at: at,
    ...changes,
  };
}
