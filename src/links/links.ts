import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { auditChange } from '../audit/audit-log.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { linkCreated, linkDeleted } from '../events/payloads.js';
import { publishEvent } from '../webhooks/fan-out.js';
import type { SecretBox } from '../secrets/secret-box.js';
import type { HolderType, BankCredentials } from '../banks/connector.js';
import { connectionMethod, findInstitution, offers, type Institution } from '../banks/institutions.js';
import { findRegistration } from '../banks/consent/registrations.js';
import { enqueueSync } from '../jobs/jobs.js';
import { normaliseRut } from '../rut/rut.js';
import { rutDigestsOf } from './rut-search.js';
import { firstSyncAt } from './schedule.js';
import { fetchPage, NEWEST_FIRST } from '../db/paging.js';
import { markLinkPaused, markLinkResumed } from './link-states.js';
import { queueRevocation } from './consent/revocations.js';
import {
  consentsOfLinks,
  presentConsent,
  type ConsentView,
  type LinkConsent,
} from './consent/consent-life.js';
import {
  deleteLinkRow,
  findLink,
  insertLink,
  type LinkRow,
  type LinkStatus,
  type RefreshStatus,
} from './store.js';

/** `last_error_code` of a link whose stored credentials no master key opens. */
export const UNREADABLE_CREDENTIALS = 'credentials_unreadable';

export interface Link {
  object: 'link';
  id: string;
  bank_id: string;
  holder_type: HolderType;
  holder_name: string | null;
  status: LinkStatus;
  paused: boolean;
  paused_at: string | null;
  refresh_status: RefreshStatus;
  created_at: string;
  last_synced_at: string | null;
  next_sync_at: string | null;
  accounts_count: number;
  new_movements_count: number;
  last_error_code: string | null;
  expired_at: string | null;
  external_user_id: string | null;
  consent_version: string | null;
  mode: 'live' | 'test';
  /** A consent link's consent (docs/open-finance.md, "A consent's life"); null for a credential link. */
  consent: LinkConsent | null;
}

/** A link as the API shows it, with its consent (null: a credential link). Pure. */
export function presentLink(row: LinkRow, consent: LinkConsent | null): Link {
  return {
    object: 'link',
    id: row.id,
    bank_id: row.bank_id,
    holder_type: row.holder_type,
    holder_name: row.holder_name,
    status: row.status,
    paused: Boolean(row.paused),
    paused_at: toIso(row.paused_at),
    refresh_status: row.refresh_status,
    created_at: toIso(row.created_at)!,
    last_synced_at: toIso(row.last_synced_at),
    next_sync_at: toIso(row.next_sync_at),
    accounts_count: row.accounts_count,
    new_movements_count: row.new_movements_count,
    last_error_code: row.last_error_code,
    expired_at: toIso(row.expired_at),
    external_user_id: row.external_user_id,
    consent_version: row.consent_version,
    mode: row.mode,
    consent,
  };
}

/**
 * Links as the API shows them, each with its consent: one read of `link_grants` for the lot, so a page of
 * links costs one query more, not one per link.
 */
export async function presentLinks(db: Knex, rows: LinkRow[], view: ConsentView): Promise<Link[]> {
  const consents = await consentsOfLinks(
    db,
    rows.map((row) => row.id),
  );
  return rows.map((row) => {
    const facts = consents.get(row.id);
    return presentLink(row, facts ? presentConsent(facts, view, row) : null);
  });
}

/** One link as the API shows it, with its consent. */
export async function presentOneLink(db: Knex, row: LinkRow, view: ConsentView): Promise<Link> {
  return (await presentLinks(db, [row], view))[0]!;
}

export interface CreateLinkInput {
  bank_id: string;
  holder_type: HolderType;
  credentials: { rut: string; password: string; rut_empresa?: string };
  external_user_id?: string;
  consent_version: string;
  consent_text_hash: string;
}

export interface LinkPolicy {
  secrets: SecretBox;
  syncIntervalMs: number;
  /** `links.consentExpiryWarningDays`: a consent ending this soon is `expiring`. */
  consentExpiryWarningDays: number;
  /** Whether the bank has a connector in this mode (every bank has the sandbox in test mode). */
  bankAvailable(bankId: string, mode: 'live' | 'test'): boolean;
  /** The institutions a link may be with: `institutionsOf(config)` (the built-in banks when left out). */
  institutions?: readonly Institution[];
}

/** Checks everything a link needs, in the order a person would fix it; returns the credentials to seal. */
export function validateLinkInput(
  input: CreateLinkInput,
  mode: 'live' | 'test',
  policy: LinkPolicy,
): BankCredentials {
  const institution = findInstitution(input.bank_id, policy.institutions);
  if (!institution)
    throw errors.invalidParameter(
      'bank_id',
      `Unknown bank '${input.bank_id}'. GET /v1/institutions lists the bank codes.`,
    );
  if (!offers(institution, 'movements', input.holder_type)) {
    throw errors.invalidParameter(
      'holder_type',
      `${institution.name} does not offer ${input.holder_type} accounts.`,
    );
  }
  if (!policy.bankAvailable(institution.id, mode)) {
    throw errors.badRequest(
      'institution_unavailable',
      `${institution.name} is not available in ${mode} mode on this appliance.`,
    );
  }
  const rut = normaliseRut(input.credentials.rut);
  if (!rut)
    throw errors.invalidParameter(
      'credentials.rut',
      'The RUT is not valid: check the number and its check digit.',
    );
  let rutEmpresa: string | null = null;
  if (input.holder_type === 'business') {
    if (input.credentials.rut_empresa === undefined || input.credentials.rut_empresa === '') {
      throw errors.missingParameter(
        'credentials.rut_empresa',
        'A business link needs the company RUT in credentials.rut_empresa.',
      );
    }
    rutEmpresa = normaliseRut(input.credentials.rut_empresa);
    if (!rutEmpresa)
      throw errors.invalidParameter(
        'credentials.rut_empresa',
        'The company RUT is not valid: check the number and its check digit.',
      );
  } else if (input.credentials.rut_empresa !== undefined) {
    throw errors.invalidParameter(
      'credentials.rut_empresa',
      'credentials.rut_empresa is only for business holders.',
    );
  }
  return { rut, password: input.credentials.password, rutEmpresa };
}

/**
 * A bank that connects by consent in `mode` takes no password: its end user authorises at the bank, through
 * the widget. Checked before anything else about the credentials, and before anything is written.
 */
export async function refuseCredentialsForConsentBank(
  db: Knex,
  bankId: string,
  mode: 'live' | 'test',
  institutions?: readonly Institution[],
): Promise<void> {
  const institution = findInstitution(bankId, institutions);
  if (!institution) return; // validateLinkInput names the unknown bank
  const registered = (await findRegistration(db, bankId, mode)) !== undefined;
  if (connectionMethod(institution, mode, registered) !== 'consent') return;
  throw errors.badRequest(
    'consent_required',
    `${institution.name} connects by consent at the bank, not with a password, in ${mode} mode: link it through the widget (create a widget token with POST /v1/widget_tokens and open the widget), where the end user authorises at the bank. No link was created.`,
  );
}

export interface CreateLinkOptions {
  /**
   * Emit `link.created` now (server-side creation). The widget passes false: its link is announced when
   * its exchange token is exchanged (see src/exchange/exchange.ts).
   */
  announce?: boolean;
  /** A person is there to type an MFA code during the first sync (the widget). */
  interactive?: boolean;
  /** Which door the link came through, for the audit log: the API (the default) or the widget. */
  via?: LinkDoor;
  /** More of who, for the audit row: the widget's token and the key that issued it. Never a secret. */
  auditDetails?: Record<string, unknown>;
}

export type LinkDoor = 'api' | 'widget';

/**
 * The audit row of a new link (issue 44, item 9), in its creating transaction: who (`key:<id>` through the
 * API, `widget_session:<id>` through the widget) and how (the door, and whether a password or a consent at
 * the bank logs it in). The README promises every link change whichever door it came through.
 */
export async function auditLinkCreated(
  trx: Knex,
  principal: Pick<Principal, 'orgId' | 'actor'>,
  row: Pick<LinkRow, 'id' | 'bank_id' | 'holder_type' | 'mode'>,
  login: 'credentials' | 'consent',
  options: Pick<CreateLinkOptions, 'via' | 'auditDetails'>,
  now: number,
): Promise<void> {
  await auditChange(
    trx,
    principal,
    {
      action: 'link.create',
      targetType: 'link',
      targetId: row.id,
      details: {
        via: options.via ?? 'api',
        login,
        bank_id: row.bank_id,
        holder_type: row.holder_type,
        mode: row.mode,
        ...options.auditDetails,
      },
    },
    now,
  );
}

/**
 * Creates the link `active` with its credentials sealed, emits `link.created` (unless `announce` is false),
 * and queues the first sync as a refresh intent of type `full` (with its `refresh_intent.created`), all in
 * the caller's transaction.
 */
export async function createLink(
  trx: Knex,
  principal: Pick<Principal, 'orgId' | 'mode' | 'actor'>,
  input: CreateLinkInput,
  policy: LinkPolicy,
  now: number,
  options: CreateLinkOptions = {},
): Promise<Link> {
  await refuseCredentialsForConsentBank(trx, input.bank_id, principal.mode, policy.institutions);
  const credentials = validateLinkInput(input, principal.mode, policy);
  const id = newId('link');
  const row = newLinkRow(id, principal, input, policy, now, {
    credentials_encrypted: policy.secrets.seal(JSON.stringify(credentials), id),
    ...rutDigestsOf(policy.secrets, credentials),
  });
  await insertLink(trx, row);
  await auditLinkCreated(trx, principal, row, 'credentials', options, now);
  if (options.announce ?? true) await emitLinkCreated(trx, row, now);
  await enqueueSync(trx, { link: row, refreshType: 'full', now, interactive: options.interactive ?? false });
  return presentLink(row, null); // a credential link
}

/** What a new link is before its first sync, whichever way it logs in (a password here, a grant in consent/). */
export function newLinkRow(
  id: string,
  principal: Pick<Principal, 'orgId' | 'mode'>,
  input: Pick<
    CreateLinkInput,
    'bank_id' | 'holder_type' | 'external_user_id' | 'consent_version' | 'consent_text_hash'
  >,
  policy: Pick<LinkPolicy, 'syncIntervalMs'>,
  now: number,
  login: Pick<LinkRow, 'credentials_encrypted' | 'rut_digest' | 'company_rut_digest'>,
): LinkRow {
  return {
    id,
    org_id: principal.orgId,
    mode: principal.mode,
    bank_id: input.bank_id,
    holder_type: input.holder_type,
    holder_name: null,
    status: 'active',
    paused: false,
    paused_at: null,
    external_user_id: input.external_user_id ?? null,
    consent_version: input.consent_version,
    consent_text_hash: input.consent_text_hash,
    ...login,
    refresh_status: 'queued',
    accounts_count: 0,
    new_movements_count: 0,
    consecutive_failures: 0,
    sync_attempts: 0,
    sync_successes: 0,
    last_error_code: null,
    last_synced_at: null,
    next_sync_at: firstSyncAt(id, now, policy.syncIntervalMs),
    expired_at: null,
    created_at: now,
    updated_at: now,
  };
}

/** `link.created` with the spec's fields, as the link is now (the widget's has its holder name by then). */
export async function emitLinkCreated(trx: Knex, row: LinkRow, now: number): Promise<void> {
  await publishEvent(trx, {
    orgId: row.org_id,
    mode: row.mode,
    type: 'link.created',
    linkId: row.id,
    data: linkCreated(row),
    now,
  });
}

/**
 * Whether `next` logs in as the holder a link was created for: the same RUT and, for a business link, the
 * same company. Replacing a link's credentials with another person's would hand that person's accounts to
 * the customer's `external_user_id` under the old link.
 */
export function isSameHolder(current: BankCredentials, next: BankCredentials): boolean {
  return current.rut === next.rut && (current.rutEmpresa ?? null) === (next.rutEmpresa ?? null);
}

export function openCredentials(
  row: Pick<LinkRow, 'id' | 'credentials_encrypted'>,
  secrets: SecretBox,
): BankCredentials {
  return JSON.parse(secrets.open(row.credentials_encrypted, row.id)) as BankCredentials;
}

export async function getLink(db: Knex, principal: Principal, id: string, view: ConsentView): Promise<Link> {
  return presentOneLink(db, await findOwned<LinkRow>(db, 'links', id, principal, 'link'), view);
}

export async function listLinks(
  db: Knex,
  principal: Principal,
  filter: { status?: LinkStatus; external_user_id?: string },
  offset: number,
  limit: number,
  view: ConsentView,
): Promise<{ data: Link[]; total: number }> {
  const scoped = () => {
    const query = db<LinkRow>('links').where({ org_id: principal.orgId, mode: principal.mode });
    if (filter.status) query.where('status', filter.status);
    if (filter.external_user_id !== undefined) query.where('external_user_id', filter.external_user_id);
    return query;
  };
  const { rows, total } = await fetchPage<LinkRow>(scoped, NEWEST_FIRST, offset, limit);
  return { data: await presentLinks(db, rows, view), total };
}

/** Pausing stops the 4-hour scheduler; on-demand refreshes keep working. */
export async function pauseLink(
  trx: Knex,
  principal: Principal,
  id: string,
  view: ConsentView,
): Promise<Link> {
  const { now } = view;
  const row = await findOwned<LinkRow>(trx, 'links', id, principal, 'link');
  if (row.paused) return presentOneLink(trx, row, view);
  const paused = await presentOneLink(trx, { ...row, ...(await markLinkPaused(trx, id, now)) }, view);
  await auditChange(trx, principal, { action: 'link.pause', targetType: 'link', targetId: id }, now);
  return paused;
}

/** Resuming clears the flag and sets `next_sync_at` to now, so the next scheduler tick picks the link up. */
export async function resumeLink(
  trx: Knex,
  principal: Principal,
  id: string,
  view: ConsentView,
): Promise<Link> {
  const { now } = view;
  const row = await findOwned<LinkRow>(trx, 'links', id, principal, 'link');
  const resumed = await presentOneLink(trx, { ...row, ...(await markLinkResumed(trx, id, now)) }, view);
  await auditChange(trx, principal, { action: 'link.resume', targetType: 'link', targetId: id }, now);
  return resumed;
}

/**
 * A link the widget made whose first sync failed: never announced (no exchange token, no `link.created`),
 * so it goes without an event; a consent link's grant is still revoked at the bank.
 */
export async function discardUnannouncedLink(
  trx: Knex,
  id: string,
  principal: Pick<Principal, 'orgId' | 'actor'>,
  now: number,
): Promise<void> {
  const row = await findLink(trx, id);
  if (!row || row.org_id !== principal.orgId) return;
  await queueRevocation(trx, row, principal.actor, now);
  await deleteLinkRow(trx, id, principal.orgId);
  await auditChange(
    trx,
    principal,
    { action: 'link.discard', targetType: 'link', targetId: id, details: { via: 'widget' } },
    now,
  );
}

/**
 * Irreversible: accounts, movements, refresh intents, jobs and tokens go with the link (foreign keys cascade);
 * the `link.deleted` event stays, so receivers learn of it.
 */
export async function deleteLink(
  trx: Knex,
  principal: Principal,
  id: string,
  now: number,
): Promise<{ object: 'link'; id: string; deleted: true; deleted_at: string }> {
  const row = await findOwned<LinkRow>(trx, 'links', id, principal, 'link');
  await queueRevocation(trx, row, principal.actor, now); // a consent link's grant is revoked at the bank after
  await deleteLinkRow(trx, id);
  const data = linkDeleted(row, now);
  await publishEvent(trx, { orgId: row.org_id, mode: row.mode, type: 'link.deleted', linkId: id, data, now });
  await auditChange(
    trx,
    principal,
    { action: 'link.delete', targetType: 'link', targetId: id, details: { last_state: lastStateOf(row) } },
    now,
  );
  return { object: 'link', id, deleted: true, deleted_at: data.deleted_at };
}

/**
 * What a link was when it was deleted, kept in the `link.delete` audit row so support can still answer for it
 * (issue 44, item 9: `svc links inspect` and the console show it). The link's facts, not its holder: no name,
 * no RUT, no credential; the customer's own `external_user_id` stays, as support looks links up by it.
 */
export interface DeletedLinkState {
  bank_id: string;
  mode: 'live' | 'test';
  holder_type: string;
  status: string;
  paused: boolean;
  external_user_id: string | null;
  accounts_count: number;
  last_synced_at: string | null;
  last_error_code: string | null;
  expired_at: string | null;
  created_at: string | null;
}

export function lastStateOf(row: LinkRow): DeletedLinkState {
  return {
    bank_id: row.bank_id,
    mode: row.mode,
    holder_type: row.holder_type,
    status: row.status,
    paused: Boolean(row.paused),
    external_user_id: row.external_user_id,
    accounts_count: Number(row.accounts_count),
    last_synced_at: toIso(row.last_synced_at),
    last_error_code: row.last_error_code,
    expired_at: toIso(row.expired_at),
    created_at: toIso(row.created_at),
  };
}
