import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import { randomBase62 } from '../keys/key-format.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { fetchPage, NEWEST_FIRST } from '../db/paging.js';
import type { Database } from '../db/database.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { auditChange, recordAudit } from '../audit/audit-log.js';
import { EVENT_TYPES } from '../events/catalogue.js';
import { checkWebhookUrl, mayReachPrivateAddresses, type AddressSettings } from './url-policy.js';
import {
  endBackoff,
  failEndpointDeliveries,
  holdEndpointDeliveries,
  resumeEndpointDeliveries,
} from './deliveries.js';
import { publishEvent } from './fan-out.js';
import { webhookEndpointDisabled } from '../events/payloads.js';

export interface WebhookEndpointRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  url: string;
  description: string | null;
  enabled_events: string;
  disabled: boolean | number;
  secret_encrypted: string;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: number | null;
  /** Set on a temporary endpoint (`svc webhooks listen`): it receives nothing after, and is then removed. */
  expires_at: number | null;
  /** Its latest attempts in a row that got no HTTP answer, and its back-off (endpoint-health.ts). */
  unanswered_attempts: number;
  backoff_until: number | null;
  /** When its attempts began to fail with no success since; null while its latest attempt succeeded. */
  failing_since: number | null;
  /** Why it is disabled: `requested` (its tenant or an operator) or `failing` (the dispatcher); null if enabled. */
  disabled_reason: DisabledReason | null;
  created_at: number;
  updated_at: number;
}

export type DisabledReason = 'requested' | 'failing';

export interface WebhookEndpoint {
  object: 'webhook_endpoint';
  id: string;
  url: string;
  description: string | null;
  enabled_events: string[];
  disabled: boolean;
  /** Why it is disabled, or null: `requested` by its tenant, or `failing` every attempt for too long. */
  disabled_reason: DisabledReason | null;
  /** Since when every attempt has failed (no 2xx since); null while its latest attempt succeeded. */
  failing_since: string | null;
  /** Attempts in a row that got no HTTP answer (timeouts, refused connections); 0 after a 2xx. */
  unanswered_attempts: number;
  /** While backed off, when its deliveries are attempted again; null when it is not (or no longer) backed off. */
  backoff_until: string | null;
  mode: 'live' | 'test';
  created_at: string;
  updated_at: string;
  /** Only in the responses that create or roll it. */
  secret?: string;
}

export function presentEndpoint(row: WebhookEndpointRow, secret?: string): WebhookEndpoint {
  return {
    object: 'webhook_endpoint',
    id: row.id,
    url: row.url,
    description: row.description,
    enabled_events: JSON.parse(row.enabled_events) as string[],
    disabled: Boolean(row.disabled),
    disabled_reason: row.disabled ? (row.disabled_reason ?? 'requested') : null,
    failing_since: toIso(row.failing_since ?? null),
    unanswered_attempts: Number(row.unanswered_attempts ?? 0),
    backoff_until: toIso(row.backoff_until ?? null),
    mode: row.mode,
    created_at: toIso(row.created_at)!,
    updated_at: toIso(row.updated_at)!,
    ...(secret ? { secret } : {}),
  };
}

export interface EndpointPolicy {
  secrets: SecretBox;
  addresses: AddressSettings;
}

function newSigningSecret(): string {
  return `whsec_${randomBase62(40)}`;
}

/** Every listed type must be in the catalogue; `*` alone subscribes to all, present and future. */
export function validateEnabledEvents(events: string[]): string[] {
  const unique = [...new Set(events)];
  if (unique.includes('*') && unique.length > 1) {
    throw errors.invalidParameter(
      'enabled_events',
      '"*" subscribes to every type; do not combine it with other types.',
    );
  }
  const unknown = unique.filter((type) => type !== '*' && !(EVENT_TYPES as readonly string[]).includes(type));
  if (unknown.length > 0) {
    throw errors.invalidParameter(
      'enabled_events',
      `Unknown event type${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}. Known types: ${EVENT_TYPES.join(', ')}, or "*".`,
    );
  }
  return unique;
}

async function validateUrl(
  url: string,
  mode: 'live' | 'test',
  temporary: boolean,
  policy: EndpointPolicy,
): Promise<void> {
  const verdict = await checkWebhookUrl(
    url,
    mode,
    mayReachPrivateAddresses(mode, temporary, policy.addresses),
  );
  if (!verdict.ok) throw errors.invalidParameter('url', `The webhook URL ${verdict.reason}.`);
}

/**
 * A tenant's endpoint, or with `expiresAt` a temporary one: only `svc webhooks listen` makes those, for its
 * own receiver on loopback, which the address policy lets it reach (url-policy.ts).
 */
export async function createEndpoint(
  trx: Knex,
  principal: Principal,
  input: { url: string; enabled_events: string[]; description?: string | null },
  policy: EndpointPolicy,
  now: number,
  expiresAt: number | null = null,
): Promise<WebhookEndpoint> {
  await validateUrl(input.url, principal.mode, expiresAt !== null, policy);
  const enabled = validateEnabledEvents(input.enabled_events);
  const id = newId('we');
  const secret = newSigningSecret();
  const row: WebhookEndpointRow = {
    id,
    org_id: principal.orgId,
    mode: principal.mode,
    url: input.url,
    description: input.description ?? null,
    enabled_events: JSON.stringify(enabled),
    disabled: false,
    secret_encrypted: policy.secrets.seal(secret, id),
    previous_secret_encrypted: null,
    previous_secret_expires_at: null,
    expires_at: expiresAt,
    unanswered_attempts: 0,
    backoff_until: null,
    failing_since: null,
    disabled_reason: null,
    created_at: now,
    updated_at: now,
  };
  await trx('webhook_endpoints').insert(row);
  await auditChange(
    trx,
    principal,
    {
      action: 'webhook_endpoint.create',
      targetType: 'webhook_endpoint',
      targetId: id,
      details: { url: row.url, enabled_events: enabled, ...(expiresAt !== null && { temporary: true }) },
    },
    now,
  );
  return presentEndpoint(row, secret);
}

export async function listEndpoints(db: Knex, principal: Principal, offset: number, limit: number) {
  const scoped = () => db('webhook_endpoints').where({ org_id: principal.orgId, mode: principal.mode });
  const { rows, total } = await fetchPage<WebhookEndpointRow>(scoped, NEWEST_FIRST, offset, limit);
  return { data: rows.map((row) => presentEndpoint(row)), total };
}

/** The caller's endpoint: 404 for another organisation's, 403 `wrong_mode` for the other mode's. */
function loadEndpoint(db: Knex, principal: Principal, id: string): Promise<WebhookEndpointRow> {
  return findOwned<WebhookEndpointRow>(db, 'webhook_endpoints', id, principal, 'webhook endpoint');
}

export async function getEndpoint(db: Knex, principal: Principal, id: string): Promise<WebhookEndpoint> {
  return presentEndpoint(await loadEndpoint(db, principal, id));
}

export async function updateEndpoint(
  trx: Knex,
  principal: Principal,
  id: string,
  patch: { url?: string; enabled_events?: string[]; disabled?: boolean; description?: string | null },
  policy: EndpointPolicy,
  now: number,
): Promise<WebhookEndpoint> {
  const row = await loadEndpoint(trx, principal, id);
  if (patch.url !== undefined && row.expires_at !== null) {
    // It may reach its listener on loopback; another URL would inherit that.
    throw errors.conflict(
      'endpoint_temporary',
      'This temporary endpoint belongs to `svc webhooks listen` and points at its receiver; its URL cannot change. Create an endpoint of your own instead.',
    );
  }
  if (patch.url !== undefined) await validateUrl(patch.url, principal.mode, false, policy);
  const changes: Partial<WebhookEndpointRow> = { updated_at: now };
  if (patch.url !== undefined) changes.url = patch.url;
  if (patch.enabled_events !== undefined)
    changes.enabled_events = JSON.stringify(validateEnabledEvents(patch.enabled_events));
  if (patch.disabled !== undefined && patch.disabled !== Boolean(row.disabled)) {
    changes.disabled = patch.disabled;
    changes.disabled_reason = patch.disabled ? 'requested' : null;
    // Enabled again: the tenant says it works now, so failing starts again from its next failure.
    if (!patch.disabled) changes.failing_since = null;
  }
  if (patch.description !== undefined) changes.description = patch.description;
  await trx('webhook_endpoints').where({ id: row.id }).update(changes);
  // An update is the tenant's word that the endpoint is worth trying again: a back-off ends.
  await endBackoff(trx, row.id, now);
  if (patch.disabled !== undefined && patch.disabled !== Boolean(row.disabled)) {
    if (patch.disabled) await holdEndpointDeliveries(trx, row.id, now);
    else await resumeEndpointDeliveries(trx, row.id, now);
  }
  await auditChange(trx, principal, endpointUpdate(row.id, patch), now);
  return presentEndpoint({ ...row, ...changes, unanswered_attempts: 0, backoff_until: null });
}

/** How the audit log names an update: disabling or enabling alone is said so; any other, with what changed. */
function endpointUpdate(id: string, patch: Record<string, unknown>) {
  const changed = Object.keys(patch).filter((field) => patch[field] !== undefined);
  const target = { targetType: 'webhook_endpoint', targetId: id };
  if (changed.length === 1 && changed[0] === 'disabled')
    return { ...target, action: patch.disabled ? 'webhook_endpoint.disable' : 'webhook_endpoint.enable' };
  const events = patch.enabled_events !== undefined && { enabled_events: patch.enabled_events };
  return { ...target, action: 'webhook_endpoint.update', details: { changed, ...events } };
}

export async function deleteEndpoint(trx: Knex, principal: Principal, id: string, now: number) {
  const row = await loadEndpoint(trx, principal, id);
  await deleteEndpointRows(trx, [row.id]);
  await auditChange(
    trx,
    principal,
    {
      action: 'webhook_endpoint.delete',
      targetType: 'webhook_endpoint',
      targetId: row.id,
      ...(row.expires_at !== null && { details: { temporary: true } }),
    },
    now,
  );
  return { object: 'webhook_endpoint' as const, id: row.id, deleted: true };
}

/**
 * Deletes endpoints with their deliveries, the deliveries first: the dispatcher records a result on a
 * delivery and then on its endpoint in one transaction, so deleting the endpoint first (and its deliveries
 * by the cascade) took the two locks in the other order. On PostgreSQL that was a deadlock, which aborted
 * the housekeeping pass or the tenant's DELETE (seen in CI).
 */
async function deleteEndpointRows(trx: Knex, ids: string[]): Promise<void> {
  await trx('webhook_deliveries').whereIn('endpoint_id', ids).delete();
  await trx('webhook_delivery_tallies').whereIn('endpoint_id', ids).delete();
  await trx('webhook_endpoints').whereIn('id', ids).delete();
}

/** How long a temporary endpoint lives without a renewal from its listener. */
export const TEMPORARY_ENDPOINT_TTL_MS = 120_000;

/** Keeps a temporary endpoint alive until `until`; false when it is gone (expired and removed, or deleted). */
export async function renewTemporaryEndpoint(trx: Knex, id: string, until: number): Promise<boolean> {
  const renewed = await trx('webhook_endpoints')
    .where({ id })
    .whereNotNull('expires_at')
    .update({ expires_at: until });
  return renewed > 0;
}

/**
 * Deletes the temporary endpoints that were not renewed in time (their listener was killed, or its machine
 * slept), with their deliveries, each with an audit entry. Emitting skips them as soon as they expire.
 */
export async function removeExpiredEndpoints(db: Database, now: number): Promise<number> {
  return db.transaction((trx) => removeExpired(trx, now));
}

async function removeExpired(trx: Knex, now: number): Promise<number> {
  const expired: Pick<WebhookEndpointRow, 'id' | 'org_id'>[] = await trx('webhook_endpoints')
    .where('expires_at', '<', now)
    .select('id', 'org_id');
  if (expired.length === 0) return 0;
  await deleteEndpointRows(
    trx,
    expired.map((endpoint) => endpoint.id),
  );
  for (const endpoint of expired) {
    await recordAudit(
      trx,
      {
        orgId: endpoint.org_id,
        actor: 'housekeeping',
        action: 'webhook_endpoint.delete',
        targetType: 'webhook_endpoint',
        targetId: endpoint.id,
        details: { temporary: true, expired: true },
      },
      now,
    );
  }
  return expired.length;
}

/**
 * A new secret signs from now on; the current one keeps signing beside it (one `v1` each) for
 * `graceSeconds`, so receivers can deploy the new secret without dropping deliveries.
 */
export async function rollEndpointSecret(
  trx: Knex,
  principal: Principal,
  id: string,
  graceSeconds: number,
  policy: EndpointPolicy,
  now: number,
): Promise<WebhookEndpoint> {
  const row = await loadEndpoint(trx, principal, id);
  const secret = newSigningSecret();
  const changes: Partial<WebhookEndpointRow> = {
    secret_encrypted: policy.secrets.seal(secret, row.id),
    previous_secret_encrypted: graceSeconds > 0 ? row.secret_encrypted : null,
    previous_secret_expires_at: graceSeconds > 0 ? now + graceSeconds * 1000 : null,
    updated_at: now,
  };
  await trx('webhook_endpoints').where({ id: row.id }).update(changes);
  await auditChange(
    trx,
    principal,
    {
      action: 'webhook_endpoint.roll_secret',
      targetType: 'webhook_endpoint',
      targetId: row.id,
      details: { grace_seconds: graceSeconds },
    },
    now,
  );
  return presentEndpoint({ ...row, ...changes }, secret);
}

/**
 * Until when an endpoint's previous secret still signs beside the current one (after a roll with a grace
 * period), or null: no previous secret, or its grace is over. Never the secret itself.
 */
export async function previousSecretSignsUntil(db: Knex, id: string, now: number): Promise<number | null> {
  const row: Pick<WebhookEndpointRow, 'previous_secret_expires_at'> | undefined = await db(
    'webhook_endpoints',
  )
    .where({ id })
    .first('previous_secret_expires_at');
  const until = Number(row?.previous_secret_expires_at ?? 0);
  return until > now ? until : null;
}

export type EndpointSecrets = Pick<
  WebhookEndpointRow,
  'id' | 'secret_encrypted' | 'previous_secret_encrypted' | 'previous_secret_expires_at'
>;

/** The secrets that sign a delivery now: the current one, and the previous one during its grace. */
export function signingSecrets(
  row: EndpointSecrets,
  secrets: Pick<SecretBox, 'open'>,
  now: number,
): string[] {
  const active = [secrets.open(row.secret_encrypted, row.id)];
  if (row.previous_secret_encrypted && (row.previous_secret_expires_at ?? 0) > now) {
    active.push(secrets.open(row.previous_secret_encrypted, row.id));
  }
  return active;
}

/**
 * `open` remembered by ciphertext: each opening is an AES-GCM decryption, and the dispatcher signs every
 * attempt. A ciphertext (with its context) always opens to the same secret, so nothing can go stale: a
 * rolled secret is a new ciphertext. At most `limit` are kept.
 */
export function rememberingOpener(secrets: Pick<SecretBox, 'open'>, limit = 1000): Pick<SecretBox, 'open'> {
  const opened = new Map<string, string>();
  return {
    open(sealed: string, context = ''): string {
      const key = `${context} ${sealed}`;
      let secret = opened.get(key);
      if (secret === undefined) {
        secret = secrets.open(sealed, context);
        if (opened.size >= limit) opened.clear();
        opened.set(key, secret);
      }
      return secret;
    },
  };
}

/**
 * The dispatcher found that every attempt to this endpoint has failed since `failing_since`, for longer than
 * `webhooks.disableAfterFailingDays`: it is disabled (`disabled_reason` `failing`), its pending deliveries end
 * `failed` (a receiver gone for days would get them late or never; its tenant can redeliver once it is back),
 * and a `webhook_endpoint.disabled` event goes to the organisation's other endpoints that subscribe to it.
 * In the transaction that recorded the failure. False when it was disabled already.
 */
export async function disableFailingEndpoint(trx: Knex, endpointId: string, now: number): Promise<boolean> {
  const row: WebhookEndpointRow | undefined = await trx('webhook_endpoints')
    .where({ id: endpointId, disabled: false })
    .first();
  if (!row) return false;
  await trx('webhook_endpoints')
    .where({ id: row.id })
    .update({ disabled: true, disabled_reason: 'failing', updated_at: now });
  const failing = row.failing_since === null ? null : Number(row.failing_since);
  const days = failing === null ? 0 : Math.floor((now - failing) / 86_400_000);
  await failEndpointDeliveries(
    trx,
    row.id,
    `endpoint_disabled: every attempt failed for ${days} days; the endpoint was disabled`,
    now,
  );
  await recordAudit(
    trx,
    {
      orgId: row.org_id,
      actor: 'dispatcher',
      action: 'webhook_endpoint.disable',
      targetType: 'webhook_endpoint',
      targetId: row.id,
      details: { reason: 'failing', failing_since: toIso(failing) },
    },
    now,
  );
  await publishEvent(trx, {
    orgId: row.org_id,
    mode: row.mode,
    type: 'webhook_endpoint.disabled',
    linkId: null,
    data: webhookEndpointDisabled({ id: row.id, url: row.url, failing_since: failing }, now),
    now,
  });
  return true;
}
