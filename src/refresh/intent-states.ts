import type { Knex } from 'knex';
import type { MfaChallenge } from '../banks/connector.js';
import { generateIntentToken } from '../auth/tokens.js';
import { transition, type Transitions } from '../errors/illegal-transition.js';
import { sha256Hex, type SecretBox } from '../secrets/secret-box.js';
import type { IntentChanges, IntentRow, IntentStatus } from './store.js';

/*
 * A refresh intent's life, in one place. It is made `created` (intents.ts); a worker starts it; the bank may
 * ask for a code, and it waits (`requires_mfa`) until a code arrives (the API's callback or the widget) and
 * a worker resumes it, or until the wait ends unanswered; it ends `succeeded` or `failed`, and stays so.
 * The sync engine, the MFA callback and housekeeping say what happened through the functions below; each
 * writes on the condition of the table, so a stale read cannot revive a finished intent.
 */

export type IntentChange = 'start' | 'await_mfa' | 'complete' | 'fail' | 'fail_mfa_wait';

export const INTENT_TRANSITIONS = {
  /**
   * A worker starts the intent's sync: the first time, again after a worker that lost its lease, or to
   * resume with the code the person gave.
   */
  start: { from: ['created', 'in_progress', 'requires_mfa'], to: 'in_progress' },
  /** The bank asked for a code (or refused one, with tries left): the intent waits for the person. */
  await_mfa: { from: ['in_progress'], to: 'requires_mfa' },
  /** The sync wrote what it found. */
  complete: { from: ['in_progress'], to: 'succeeded' },
  /** The sync failed. */
  fail: { from: ['in_progress'], to: 'failed' },
  /** The wait for a code ended: the code came too late, or never. */
  fail_mfa_wait: { from: ['requires_mfa'], to: 'failed' },
} as const satisfies Transitions<IntentStatus, IntentChange>;

/** Once a refresh ends, its MFA material is of no further use and is not kept. */
export const MFA_CLEARED = {
  mfa_challenge_encrypted: null,
  mfa_code_encrypted: null,
  mfa_token_hash: null,
  mfa_token_encrypted: null,
} as const satisfies IntentChanges;

/**
 * Writes `changes` and the state `change` leads to, if the row is in a state the table allows. An intent in
 * another state throws (IllegalTransitionError); one that is gone (its link was deleted meanwhile) is left
 * gone, as the sync that found it will find its job gone too.
 */
async function move(trx: Knex, id: string, change: IntentChange, changes: IntentChanges): Promise<void> {
  const { from, to } = INTENT_TRANSITIONS[change];
  const moved = await trx('refresh_intents')
    .where({ id })
    .whereIn('status', from)
    .update({ ...changes, status: to });
  if (moved > 0) return;
  const row: Pick<IntentRow, 'status'> | undefined = await trx('refresh_intents')
    .where({ id })
    .first('status');
  if (row) transition('refresh intent', INTENT_TRANSITIONS, row.status, change, id);
}

/** A worker starts (or resumes) the intent's sync; `started_at` keeps the first start. */
export async function startIntent(
  trx: Knex,
  intent: Pick<IntentRow, 'id' | 'started_at'>,
  now: number,
): Promise<void> {
  await move(trx, intent.id, 'start', { started_at: intent.started_at ?? now, updated_at: now });
}

/**
 * The bank asked for a code: the intent waits, with a fresh `ri_…_sec_…` token the widget can be opened
 * with (only its hash is looked up; the token itself is kept sealed for the intent's owner) and the bank's
 * challenge sealed, so any worker can resume. Returns the token, for `refresh_intent.requires_mfa`.
 */
export async function awaitIntentMfa(
  trx: Knex,
  secrets: SecretBox,
  intentId: string,
  challenge: MfaChallenge,
  now: number,
): Promise<string> {
  const token = generateIntentToken(intentId);
  await move(trx, intentId, 'await_mfa', {
    mfa_token_hash: sha256Hex(token),
    mfa_token_encrypted: secrets.seal(token, intentId),
    mfa_challenge_encrypted: secrets.seal(JSON.stringify(challenge), intentId),
    mfa_code_encrypted: null,
    mfa_expires_at: challenge.expiresAt,
    mfa_attempts: 0,
    updated_at: now,
  });
  return token;
}

/** The bank refused the code, with tries left: the intent waits for the next one, same token and expiry. */
export async function awaitNextMfaCode(
  trx: Knex,
  intent: Pick<IntentRow, 'id' | 'mfa_attempts'>,
  now: number,
): Promise<void> {
  await move(trx, intent.id, 'await_mfa', {
    mfa_code_encrypted: null,
    mfa_attempts: (intent.mfa_attempts ?? 0) + 1,
    updated_at: now,
  });
}

/**
 * Stores an MFA code if the intent still waits for one and has none yet; false when another code got there
 * first. The condition is checked on the row, since the caller's read of the intent may be stale. The state
 * does not change: the intent waits until a worker resumes it.
 */
export async function takeMfaCode(trx: Knex, id: string, sealedCode: string, now: number): Promise<boolean> {
  const taken = await trx('refresh_intents')
    .where({ id, status: 'requires_mfa', mfa_code_encrypted: null })
    .update({ mfa_code_encrypted: sealedCode, updated_at: now });
  return taken === 1;
}

/** The sync wrote what it found: the intent succeeds with its summary. */
export async function completeIntent(
  trx: Knex,
  id: string,
  summary: { accountsUpdated: number; newMovements: number },
  now: number,
): Promise<void> {
  await move(trx, id, 'complete', {
    ...MFA_CLEARED,
    accounts_updated: summary.accountsUpdated,
    new_movements_count: summary.newMovements,
    completed_at: now,
    updated_at: now,
  });
}

/** The sync failed: the intent fails with the sync's error code. */
export async function failIntent(trx: Knex, id: string, errorCode: string, now: number): Promise<void> {
  await move(trx, id, 'fail', { ...MFA_CLEARED, error_code: errorCode, completed_at: now, updated_at: now });
}

/**
 * The wait for a code ended (a late code, or none in time). The challenge and any code go; the token is left
 * as it was: it is past its `mfa_expires_at`, which the widget and the API check, and opens nothing.
 */
export async function failMfaWait(trx: Knex, id: string, errorCode: string, now: number): Promise<void> {
  await move(trx, id, 'fail_mfa_wait', {
    error_code: errorCode,
    completed_at: now,
    updated_at: now,
    mfa_challenge_encrypted: null,
    mfa_code_encrypted: null,
  });
}
