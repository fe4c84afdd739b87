import type { Knex } from 'knex';
import type { Principal } from '../../auth/principal.js';
import type { GrantCredentials, HolderType } from '../../banks/connector.js';
import type { AuthorizationDetail } from '../../banks/consent/authorization-details.js';
import { enqueueSync } from '../../jobs/jobs.js';
import { newId } from '../../ids/ids.js';
import { normaliseRut } from '../../rut/rut.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { linkGrantContext } from '../../secrets/sealed-columns.js';
import { auditChange } from '../../audit/audit-log.js';
import {
  auditLinkCreated,
  emitLinkCreated,
  newLinkRow,
  presentLink,
  type CreateLinkOptions,
  type Link,
  type LinkPolicy,
} from '../links.js';
import { markConsentRenewed } from '../link-states.js';
import { rutDigestsOf } from '../rut-search.js';
import { presentConsent } from './consent-life.js';
import { queueRevocation } from './revocations.js';
import { insertLink, type LinkRow } from '../store.js';

/*
 * The only code that writes `link_grants`: the grant behind a consent link (docs/open-finance.md). The grant
 * id and the tokens are sealed, each under its link and column, so a sealed value copied to another row or
 * column does not open; what was authorised and when it ends are not secrets and stay readable for
 * `svc links inspect`.
 */

export interface LinkGrantRow {
  link_id: string;
  consent_client_id: string;
  client_id: string;
  grant_id_sealed: string;
  /** JSON: the `authorization_details` the bank confirmed. */
  authorization_details: string;
  expires_at: number | null;
  access_token_sealed: string;
  access_token_expires_at: number | null;
  refresh_token_sealed: string | null;
  /** When a sync last read every list and every account's movements (migration 30); null: never. */
  full_sync_at?: number | null;
  /** When a sync last read the holder's name at the bank (migration link_grant_holder_read); null: never, or not since a renewal. */
  holder_read_at?: number | null;
  created_at: number;
  updated_at: number;
}

/** The tokens of a grant as a token endpoint answers them (the code exchange or a refresh). */
export interface GrantTokens {
  accessToken: string;
  /** Ms since the epoch; null when the bank did not say. */
  accessTokenExpiresAt: number | null;
  /** Null keeps the one held (a bank that does not rotate refresh tokens sends none on refresh). */
  refreshToken: string | null;
}

/** A grant as the code exchange leaves it, before it belongs to a link. */
export interface NewGrant extends GrantTokens {
  /** The `consent_clients` row the grant was obtained with, and its client id at the bank. */
  consentClientId: string;
  clientId: string;
  grantId: string;
  authorizationDetails: AuthorizationDetail[];
  /** When the consent ends (the earliest `validTo`), or null: until revoked. */
  expiresAt: number | null;
  /**
   * The holder's name as the code exchange gave it (Chile: the ID token's `name`; null: it named no one), when
   * the consent asked for it there: the link is named at once, and its first sync does not ask again.
   */
  holder?: { name: string | null };
}

/** A link's grant, opened: what the consent connector logs in with, and which registration it belongs to. */
export interface OpenedGrant extends GrantCredentials {
  linkId: string;
  consentClientId: string;
  clientId: string;
  expiresAt: number | null;
}

const sealContext = (linkId: string, value: 'grant_id' | 'access_token' | 'refresh_token') =>
  linkGrantContext(linkId, `${value}_sealed`);

function sealedTokens(secrets: SecretBox, linkId: string, tokens: GrantTokens) {
  return {
    access_token_sealed: secrets.seal(tokens.accessToken, sealContext(linkId, 'access_token')),
    access_token_expires_at: tokens.accessTokenExpiresAt,
    ...(tokens.refreshToken === null
      ? {}
      : { refresh_token_sealed: secrets.seal(tokens.refreshToken, sealContext(linkId, 'refresh_token')) }),
  };
}

export async function insertGrant(
  trx: Knex,
  secrets: SecretBox,
  linkId: string,
  grant: NewGrant,
  now: number,
): Promise<void> {
  const row: LinkGrantRow = {
    link_id: linkId,
    consent_client_id: grant.consentClientId,
    client_id: grant.clientId,
    grant_id_sealed: secrets.seal(grant.grantId, sealContext(linkId, 'grant_id')),
    authorization_details: JSON.stringify(grant.authorizationDetails),
    expires_at: grant.expiresAt,
    refresh_token_sealed: null,
    ...sealedTokens(secrets, linkId, grant),
    holder_read_at: grant.holder ? now : null,
    created_at: now,
    updated_at: now,
  };
  await trx('link_grants').insert(row);
}

export async function findGrantRow(db: Knex, linkId: string): Promise<LinkGrantRow | undefined> {
  return db<LinkGrantRow>('link_grants').where({ link_id: linkId }).first();
}

/** When the link's last full pass was (a consent link's grant keeps it); null: never, or no grant. */
export async function lastFullSyncOf(db: Knex, linkId: string): Promise<number | null> {
  const row = await db<LinkGrantRow>('link_grants').where({ link_id: linkId }).first('full_sync_at');
  return row?.full_sync_at == null ? null : Number(row.full_sync_at);
}

/** When a sync last read the link's holder's name at the bank; null: never, or no grant. */
export async function lastHolderReadOf(db: Knex, linkId: string): Promise<number | null> {
  const row = await db<LinkGrantRow>('link_grants').where({ link_id: linkId }).first('holder_read_at');
  return row?.holder_read_at == null ? null : Number(row.holder_read_at);
}

/** Opens a grant row; a row sealed under another link or column does not open (SecretError). */
export function openGrant(row: LinkGrantRow, secrets: SecretBox): OpenedGrant {
  return {
    kind: 'grant',
    linkId: row.link_id,
    consentClientId: row.consent_client_id,
    clientId: row.client_id,
    grantId: openGrantId(row, secrets),
    accessToken: secrets.open(row.access_token_sealed, sealContext(row.link_id, 'access_token')),
    accessTokenExpiresAt: row.access_token_expires_at === null ? null : Number(row.access_token_expires_at),
    refreshToken:
      row.refresh_token_sealed === null
        ? null
        : secrets.open(row.refresh_token_sealed, sealContext(row.link_id, 'refresh_token')),
    authorizationDetails: JSON.parse(row.authorization_details) as AuthorizationDetail[],
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

/** The grant id alone (the revoke outbox copies it, re-sealed, before the link and its grant go). */
export function openGrantId(
  row: Pick<LinkGrantRow, 'link_id' | 'grant_id_sealed'>,
  secrets: SecretBox,
): string {
  return secrets.open(row.grant_id_sealed, sealContext(row.link_id, 'grant_id'));
}

/**
 * Keeps the tokens a refresh returned; the next sync, in any process, starts from them. Given the grant
 * they belong to (`grantIdSealed`, as the sync read it), only onto that grant: one renewed meanwhile by the
 * widget keeps its own tokens.
 */
export async function saveGrantTokens(
  db: Knex,
  secrets: SecretBox,
  linkId: string,
  tokens: GrantTokens,
  now: number,
  grantIdSealed?: string,
): Promise<void> {
  await db('link_grants')
    .where({ link_id: linkId, ...(grantIdSealed === undefined ? {} : { grant_id_sealed: grantIdSealed }) })
    .update({ ...sealedTokens(secrets, linkId, tokens), updated_at: now });
}

export interface CreateConsentLinkInput {
  bank_id: string;
  holder_type: HolderType;
  external_user_id?: string;
  consent_version: string;
  consent_text_hash: string;
  /**
   * Who authorised at the bank: the ID token's `sub`. Sealed on the link where a credential link keeps its
   * password, so a renewal can check it is the same person; when it is a RUT (as at the simulated bank)
   * the link can be found by it like any other.
   */
  subject: string;
}

/** What a consent link's sealed login holds: who authorised at the bank (see `subject` above). */
interface SealedConsentLogin {
  connection: 'consent';
  subject: string;
}

function sealedLogin(secrets: SecretBox, linkId: string, subject: string) {
  const rut = normaliseRut(subject);
  return {
    credentials_encrypted: secrets.seal(
      JSON.stringify({ connection: 'consent', subject } satisfies SealedConsentLogin),
      linkId,
    ),
    ...(rut
      ? rutDigestsOf(secrets, { rut, password: '', rutEmpresa: null })
      : { rut_digest: null, company_rut_digest: null }),
  };
}

/**
 * Who authorised the link's consent at the bank, or null when its sealed login does not open (a master key
 * lost: there is no holder left to compare with, as for a credential link; docs/security.md).
 */
export function consentSubjectOf(
  link: Pick<LinkRow, 'id' | 'credentials_encrypted'>,
  secrets: SecretBox,
): string | null {
  try {
    const login = JSON.parse(
      secrets.open(link.credentials_encrypted, link.id),
    ) as Partial<SealedConsentLogin>;
    return typeof login.subject === 'string' ? login.subject : null;
  } catch {
    return null;
  }
}

/** Whether two ID-token subjects name one person: a RUT with or without dots is the same RUT. */
export function isSameSubject(held: string, given: string): boolean {
  return (normaliseRut(held) ?? held) === (normaliseRut(given) ?? given);
}

/**
 * Renews a consent link in place with a new grant of the same holder (the caller checked it): the link keeps
 * its id, so its accounts and movements stay (account ids are stable from the bank's ids, and the first sync
 * reconciles movements rather than adding them); the old grant's revoke is queued before its row is
 * replaced, in this transaction; the warning markers are cleared so the new consent is warned of and ended
 * in its turn; a `full` sync is queued (the window a reconnect reads: 90 days), interactive, remembering
 * when an expired link expired, so a refused first sync does not announce the expiry twice.
 */
export async function renewConsentLink(
  trx: Knex,
  link: LinkRow,
  input: { consent_version: string; consent_text_hash: string; subject: string },
  grant: NewGrant,
  secrets: SecretBox,
  /** Who renewed it (the widget session), with the widget's token and its issuer for the audit row. */
  by: { actor: string; details?: Record<string, unknown> },
  now: number,
): Promise<{ intentId: string }> {
  await queueRevocation(trx, link, by.actor, now);
  await auditConsentGranted(trx, { orgId: link.org_id, actor: by.actor }, link, grant, true, by.details, now);
  await trx('link_grants')
    .where({ link_id: link.id })
    .update({
      consent_client_id: grant.consentClientId,
      client_id: grant.clientId,
      grant_id_sealed: secrets.seal(grant.grantId, sealContext(link.id, 'grant_id')),
      authorization_details: JSON.stringify(grant.authorizationDetails),
      expires_at: grant.expiresAt,
      refresh_token_sealed: null,
      ...sealedTokens(secrets, link.id, grant),
      expiry_warned_at: null,
      consent_ended_at: null,
      // The new consent may name the holder where the old one did not: read now, or at its first sync.
      holder_read_at: grant.holder ? now : null,
      updated_at: now,
    });
  await markConsentRenewed(
    trx,
    link.id,
    {
      ...sealedLogin(secrets, link.id, input.subject),
      consent_version: input.consent_version,
      consent_text_hash: input.consent_text_hash,
      ...(grant.holder?.name ? { holder_name: grant.holder.name } : {}),
    },
    now,
  );
  const intent = await enqueueSync(trx, {
    link,
    refreshType: 'full',
    now,
    interactive: true,
    reconnectOf: link.status === 'expired' ? link.expired_at : null,
  });
  return { intentId: intent.id };
}

/**
 * A link whose login is a grant: the link, its grant and its first (interactive) sync in the caller's
 * transaction. Like a credential link it is announced (`link.created`) when its exchange token is
 * exchanged, unless `announce` says now.
 */
export async function createConsentLink(
  trx: Knex,
  principal: Pick<Principal, 'orgId' | 'mode' | 'actor'>,
  input: CreateConsentLinkInput,
  grant: NewGrant,
  policy: Pick<LinkPolicy, 'secrets' | 'syncIntervalMs' | 'consentExpiryWarningDays'>,
  now: number,
  options: CreateLinkOptions = {},
): Promise<Link> {
  const id = newId('link');
  const row = {
    ...newLinkRow(id, principal, input, policy, now, sealedLogin(policy.secrets, id, input.subject)),
    holder_name: grant.holder?.name ?? null,
  };
  await insertLink(trx, row);
  await insertGrant(trx, policy.secrets, id, grant, now);
  await auditLinkCreated(trx, principal, row, 'consent', { ...options, via: options.via ?? 'widget' }, now);
  await auditConsentGranted(trx, principal, row, grant, false, options.auditDetails, now);
  if (options.announce ?? true) await emitLinkCreated(trx, row, now);
  await enqueueSync(trx, { link: row, refreshType: 'full', now, interactive: options.interactive ?? false });
  const consent = {
    expires_at: grant.expiresAt,
    authorization_details: JSON.stringify(grant.authorizationDetails),
  };
  return presentLink(
    row,
    presentConsent(consent, { now, warningDays: policy.consentExpiryWarningDays }, row),
  );
}

/**
 * A consent granted at the bank, in the audit log (issue 44, item 9): the link it logs in, the bank, when it
 * ends, and whether it renewed the link's earlier one. Never the grant id or a token.
 */
async function auditConsentGranted(
  trx: Knex,
  principal: Pick<Principal, 'orgId' | 'actor'>,
  link: Pick<LinkRow, 'id' | 'bank_id' | 'mode'>,
  grant: Pick<NewGrant, 'clientId' | 'expiresAt'>,
  renewal: boolean,
  details: Record<string, unknown> | undefined,
  now: number,
): Promise<void> {
  await auditChange(
    trx,
    principal,
    {
      action: 'link.consent_granted',
      targetType: 'link',
      targetId: link.id,
      details: {
        bank_id: link.bank_id,
        mode: link.mode,
        client_id: grant.clientId,
        expires_at: grant.expiresAt === null ? null : new Date(grant.expiresAt).toISOString(),
        renewal,
        ...details,
      },
    },
    now,
  );
}
