import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { errors, ApiError } from '../errors/api-error.js';
import { actedByPerson, type Principal } from '../auth/principal.js';
import { auditChange } from '../audit/audit-log.js';
import { findOwned } from '../auth/ownership.js';
import { refreshIntentFailed } from '../events/payloads.js';
import { publishEvent } from '../webhooks/fan-out.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { isUniqueViolation } from '../db/errors.js';
import { activeSyncJobOf, failJobsOfIntent, insertJobs, requeueAfterMfa, syncJob } from '../jobs/jobs.js';
import { markLinkQueued, markLinkRefreshIdle } from '../links/link-states.js';
import type { LinkRow } from '../links/store.js';
import { failMfaWait, takeMfaCode } from './intent-states.js';
import { createIntent, presentIntent, type RefreshIntent } from './intents.js';
import { expiredMfaWaits, lastRefreshAt, type IntentRow } from './store.js';

export type OnDemandType = 'only_last' | 'historical';

function cooldownMs(config: Readonly<Config>, type: OnDemandType): number {
  return (
    (type === 'only_last'
      ? config.refresh.onlyLastCooldownMinutes
      : config.refresh.historicalCooldownMinutes) * 60_000
  );
}

/** Refuses a refresh of an expired link (reconnect it) or of one already refreshing. */
export async function assertRefreshable(trx: Knex, link: LinkRow): Promise<void> {
  if (link.status === 'expired') {
    throw errors.conflict(
      'link_expired',
      `Link ${link.id} expired on ${toIso(link.expired_at)} (${link.last_error_code}). Reconnect it: create a widget token with intent "reconnect" and link_id "${link.id}".`,
    );
  }
  if (await activeSyncJobOf(trx, link.id))
    throw errors.conflict(
      'refresh_in_progress',
      `Link ${link.id} is already being refreshed; wait for its refresh intent to finish.`,
    );
}

/**
 * Queues an on-demand refresh: an intent (`refresh_intent.created`) and an interactive sync job, so the
 * bank may ask for MFA. Cooldowns apply per link and type, counted from the last refresh of that type
 * that did not fail (5 minutes for `only_last`, 60 for `historical`), independently of the rate limits.
 */
export async function requestRefresh(
  trx: Knex,
  principal: Principal,
  input: { link_id: string; refresh_type: OnDemandType },
  config: Readonly<Config>,
  now: number,
): Promise<RefreshIntent> {
  const link = await findOwned<LinkRow>(trx, 'links', input.link_id, principal, 'link');
  await assertRefreshable(trx, link);
  const last = await lastRefreshAt(trx, link.id, input.refresh_type);
  const wait = last !== null ? last + cooldownMs(config, input.refresh_type) - now : 0;
  if (wait > 0) {
    const seconds = Math.ceil(wait / 1000);
    throw errors.conflict(
      'refresh_cooldown',
      `Link ${link.id} was refreshed (${input.refresh_type}) less than ${cooldownMs(config, input.refresh_type) / 60_000} minutes ago; retry in ${seconds} s.`,
      { 'Retry-After': String(seconds) },
    );
  }
  const intent = await queueIntent(trx, link, input.refresh_type, now);
  if (actedByPerson(principal)) {
    const details = { refresh_type: input.refresh_type, intent_id: intent.id };
    await auditChange(
      trx,
      principal,
      { action: 'link.refresh', targetType: 'link', targetId: link.id, details },
      now,
    );
  }
  return intent;
}

/** The intent and its interactive job; the partial unique index turns a race into `refresh_in_progress`. */
export async function queueIntent(
  trx: Knex,
  link: LinkRow,
  type: IntentRow['refresh_type'],
  now: number,
  extra: { backfill_months?: number; force?: boolean } = {},
) {
  const intent = await createIntent(trx, link, type, now, extra);
  try {
    await insertJobs(trx, [
      syncJob(link, { refresh_type: type, interactive: type !== 'backfill' }, now, intent.id),
    ]);
  } catch (error) {
    if (isUniqueViolation(error))
      throw errors.conflict('refresh_in_progress', `Link ${link.id} is already being refreshed.`);
    throw error;
  }
  await markLinkQueued(trx, link.id, now);
  return presentIntent(intent);
}

export async function getIntent(
  db: Knex,
  principal: Principal,
  id: string,
  secrets: SecretBox,
): Promise<RefreshIntent> {
  const row = await findOwned<IntentRow>(db, 'refresh_intents', id, principal, 'refresh intent');
  return presentIntent(row, secrets);
}

/**
 * The MFA callback: stores the code (sealed) and puts the waiting sync back in the queue, where it resumes
 * from the bank's challenge without logging in again. A code after `expires_at` fails the intent; that
 * failure is committed, and the caller then answers 409 `mfa_expired` (see `mfaExpiredError`).
 */
export async function submitMfaCode(
  trx: Knex,
  principal: Principal,
  intentId: string,
  code: string,
  secrets: SecretBox,
  now: number,
): Promise<MfaOutcome> {
  const intent = await findOwned<IntentRow>(trx, 'refresh_intents', intentId, principal, 'refresh intent');
  return acceptMfaCode(trx, intent, code, secrets, now);
}

export type MfaOutcome = { accepted: RefreshIntent } | { expired: IntentRow };

export async function acceptMfaCode(
  trx: Knex,
  intent: IntentRow,
  code: string,
  secrets: SecretBox,
  now: number,
): Promise<MfaOutcome> {
  if (intent.status !== 'requires_mfa') {
    throw errors.conflict(
      'intent_not_waiting_for_mfa',
      `Refresh intent ${intent.id} is ${intent.status}, not waiting for an MFA code.`,
    );
  }
  if (intent.mfa_expires_at !== null && intent.mfa_expires_at < now) {
    await failWaitingIntent(trx, intent, 'mfa_expired', now);
    return { expired: intent };
  }
  // Taken once: a second code (from the widget or the API) while the first is being verified would replace
  // it under the worker. The intent read above may be stale; the condition is checked on the row.
  if (!(await takeMfaCode(trx, intent.id, secrets.seal(code, intent.id), now))) {
    throw errors.conflict(
      'mfa_code_in_progress',
      `A verification code for refresh intent ${intent.id} is already being checked; wait for its result.`,
    );
  }
  await requeueAfterMfa(trx, intent.id, now);
  await markLinkQueued(trx, intent.link_id, now);
  return { accepted: presentIntent({ ...intent, updated_at: now }, secrets) };
}

export function mfaExpiredError(intent: IntentRow): ApiError {
  return new ApiError(
    409,
    'invalid_request_error',
    'mfa_expired',
    `The MFA code for refresh intent ${intent.id} came after ${toIso(intent.mfa_expires_at)}; the refresh failed. Start a new one.`,
  );
}

/** Fails an intent that waits for MFA (a late code, or nobody answered in time), with its event. */
export async function failWaitingIntent(
  trx: Knex,
  intent: IntentRow,
  errorCode: string,
  now: number,
): Promise<void> {
  await failMfaWait(trx, intent.id, errorCode, now);
  await failJobsOfIntent(trx, intent.id, errorCode, now);
  await markLinkRefreshIdle(trx, intent.link_id, now);
  await publishEvent(trx, {
    orgId: intent.org_id,
    mode: intent.mode,
    type: 'refresh_intent.failed',
    linkId: intent.link_id,
    data: refreshIntentFailed({ ...intent, error_code: errorCode, completed_at: now }),
    now,
  });
}

/** Housekeeping: intents whose MFA wait passed `expires_at` unanswered fail with `mfa_expired`. */
export async function expireMfaWaits(
  db: { transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> },
  now: number,
): Promise<number> {
  return db.transaction(async (trx) => {
    const waiting = await expiredMfaWaits(trx, now, 1000);
    for (const intent of waiting) await failWaitingIntent(trx, intent, 'mfa_expired', now);
    return waiting.length;
  });
}
