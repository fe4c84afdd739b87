/**
 * Every column sealed with the master key, with the context (AES-GCM additional data) each value was sealed
 * under, so that a value copied to another row does not open there. `svc master-key rotate` walks these
 * tables by their primary key. A column sealed elsewhere and missing here would keep its old key after a
 * rotation and make `svc master-key retire` refuse; test/e2e/secrets.test.ts checks every sealed value in
 * the database against this list.
 */
export interface SealedTable {
  table: string;
  /** The primary key's columns: the order a rotation walks the rows in, and how it updates one. */
  key: readonly string[];
  columns: readonly string[];
  /** Other columns `context` reads (a value sealed under another row's id names it here). */
  contextColumns?: readonly string[];
  /** A table may seal each column under its own context, so a value moved to another column does not open. */
  context(row: Record<string, unknown>, column: string): string;
}

/** An idempotent POST's kept answer may carry a secret shown once (a webhook secret, a widget token). */
export function idempotencyContext(row: {
  org_id: unknown;
  mode: unknown;
  idempotency_key: unknown;
}): string {
  return `idempotency_keys/${String(row.org_id)}/${String(row.mode)}/${String(row.idempotency_key)}`;
}

/** A link grant's value: its link, and the column it was sealed for. */
export function linkGrantContext(linkId: string, column: string): string {
  return `link_grants/${linkId}/${column}`;
}

/** A widget consent request's PKCE verifier: its row and column. */
export function consentRequestContext(requestId: string, column: string): string {
  return `widget_consent_requests/${requestId}/${column}`;
}

const byId = (row: Record<string, unknown>) => String(row.id);

export const SEALED_TABLES: readonly SealedTable[] = [
  { table: 'links', key: ['id'], columns: ['credentials_encrypted'], context: byId },
  {
    table: 'refresh_intents',
    key: ['id'],
    columns: ['mfa_challenge_encrypted', 'mfa_code_encrypted', 'mfa_token_encrypted'],
    context: byId,
  },
  {
    table: 'webhook_endpoints',
    key: ['id'],
    columns: ['secret_encrypted', 'previous_secret_encrypted'],
    context: byId,
  },
  {
    table: 'idempotency_keys',
    key: ['org_id', 'mode', 'idempotency_key'],
    columns: ['response_body'],
    context: idempotencyContext,
  },
  // Consent banks (docs/open-finance.md): the client's keys (TLS, and request-object signing) and registration
  // token, each grant's id and tokens, and the grant id a queued revocation still needs.
  {
    table: 'consent_clients',
    key: ['id'],
    columns: ['private_key_sealed', 'registration_access_token_sealed', 'signing_key_sealed'],
    context: byId,
  },
  {
    table: 'link_grants',
    key: ['link_id'],
    columns: ['grant_id_sealed', 'access_token_sealed', 'refresh_token_sealed'],
    context: (row, column) => linkGrantContext(String(row.link_id), column),
  },
  // Copied sealed from link_grants when the link is deleted (links/consent/revocations.ts): still its link's.
  {
    table: 'grant_revocations',
    key: ['id'],
    columns: ['grant_id_sealed'],
    contextColumns: ['link_id'],
    context: (row) => linkGrantContext(String(row.link_id), 'grant_id_sealed'),
  },
  // The PKCE verifier of a trip to a consent bank's page (widget/consent/consent-flow.ts), until its callback.
  {
    table: 'widget_consent_requests',
    key: ['id'],
    columns: ['verifier_sealed'],
    context: (row, column) => consentRequestContext(String(row.id), column),
  },
  // The console's second factor (src/console/totp.ts).
  { table: 'console_users', key: ['id'], columns: ['totp_secret_sealed'], context: byId },
];
