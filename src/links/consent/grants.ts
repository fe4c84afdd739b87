import type { Knex } from 'knex';
import type { Principal } from '../../auth/principal.js';
import type { GrantCredentials, HolderType } from '../../banks/connector.js';
import type { AuthorizationDetail } from '../../banks/consent/authorization-details.js';
import { enqueueSync } from '../../jobs/jobs.js';
import { newId } from '../../ids/ids.js';
import { normaliseRut } from '../../rut/rut.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { linkGrantContext } from '../../secrets/sealed-columns.js';
import {
  emitLinkCreated,
  newLinkRow,
  presentLink,
  type CreateLinkOptions,
  type Link,
  type LinkPolicy,
} from '../links.js';
import { rutDigestsOf } from '../rut-search.js';
import { presentConsent } from './consent-life.js';
import { insertLink } from '../store.js';

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
    created_at: now,
    updated_at: now,
  };
  await trx('link_grants').insert(row);
}

export async function findGrantRow(db: Knex, linkId: string): Promise<LinkGrantRow | undefined> {
  return db<LinkGrantRow>('link_grants').where({ link_id: linkId }).first();
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

/** Keeps the tokens a refresh returned; the next sync, in any process, starts from them. */
export async function saveGrantTokens(
  db: Knex,
  secrets: SecretBox,
  linkId: string,
  tokens: GrantTokens,
  now: number,
): Promise<void> {
  await db('link_grants')
    .where({ link_id: linkId })
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

/**
 * A link whose login is a grant: the link, its grant and its first (interactive) sync in the caller's
 * transaction. Like a credential link it is announced (`link.created`) when its exchange token is
 * exchanged, unless `announce` says now.
 */
export async function createConsentLink(
  trx: Knex,
  principal: Pick<Principal, 'orgId' | 'mode'>,
  input: CreateConsentLinkInput,
  grant: NewGrant,
  policy: Pick<LinkPolicy, 'secrets' | 'syncIntervalMs' | 'consentExpiryWarningDays'>,
  now: number,
  options: CreateLinkOptions = {},
): Promise<Link> {
  const id = newId('link');
  const rut = normaliseRut(input.subject);
  const row = newLinkRow(id, principal, input, policy, now, {
    credentials_encrypted: policy.secrets.seal(
      JSON.stringify({ connection: 'consent', subject: input.subject }),
      id,
    ),
    ...(rut
      ? rutDigestsOf(policy.secrets, { rut, password: '', rutEmpresa: null })
      : { rut_digest: null, company_rut_digest: null }),
  });
  await insertLink(trx, row);
  await insertGrant(trx, policy.secrets, id, grant, now);
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
