import type { Knex } from 'knex';
import type { SecretBox } from '../../secrets/secret-box.js';
import { certificateFacts } from './certificates.js';

/*
 * The only code that writes `consent_clients`: the appliance's registration as an OAuth client of a consent
 * bank, one per bank and mode (`svc banks register`). The private key and the registration access token
 * are sealed under the row's id; everything else is public (the certificate is presented in every TLS
 * handshake; the client id is in every request).
 */

export interface ConsentClientRow {
  id: string;
  bank_id: string;
  mode: 'live' | 'test';
  issuer: string;
  api_base: string;
  client_id: string;
  registration_access_token_sealed: string | null;
  registration_client_uri: string | null;
  private_key_sealed: string;
  /**
   * The PS256 key that signs request objects (FAPI 1.0 Advanced §5.2.2 clause 10) and `private_key_jwt`
   * assertions (RFC 7523 §2.2), PKCS#8 PEM sealed under the row's id; its public half is the registration's
   * `jwks`. Null when the profile signs nothing (Chile) or the row predates it (absent in older rows).
   */
  signing_key_sealed?: string | null;
  certificate_pem: string;
  /** The CA of the bank's TLS server certificate when it is not publicly trusted; null: the system's. */
  server_ca_pem: string | null;
  /** The bank's registration answer as JSON, its secrets removed (`publicRegistration`). */
  registration: string;
  registered_at: number;
  updated_at: number;
}

/** A registration as operators see it (`svc banks registrations`): no secret, not even sealed. */
export interface ConsentClientView {
  id: string;
  bank_id: string;
  mode: 'live' | 'test';
  issuer: string;
  api_base: string;
  client_id: string;
  registration_client_uri: string | null;
  /** Whether a registration access token is held (RFC 7592 management); never the token. */
  manageable: boolean;
  /** The client certificate's subject DN (RFC 4514) and when it ends (ms); null when it does not parse. */
  certificate_subject_dn: string | null;
  certificate_expires_at: number | null;
  registered_at: number;
}

export function viewOf(row: ConsentClientRow): ConsentClientView {
  return {
    id: row.id,
    bank_id: row.bank_id,
    mode: row.mode,
    issuer: row.issuer,
    api_base: row.api_base,
    client_id: row.client_id,
    registration_client_uri: row.registration_client_uri,
    manageable: row.registration_access_token_sealed !== null,
    ...certificateOf(row.certificate_pem),
    registered_at: Number(row.registered_at),
  };
}

function certificateOf(
  pem: string,
): Pick<ConsentClientView, 'certificate_subject_dn' | 'certificate_expires_at'> {
  try {
    const facts = certificateFacts(pem, null);
    return { certificate_subject_dn: facts.subjectDn, certificate_expires_at: facts.notAfter };
  } catch {
    return { certificate_subject_dn: null, certificate_expires_at: null };
  }
}

/** Fields of a registration answer that are secrets (RFC 7591 §3.2.1, RFC 7592 §3): never stored in clear. */
const SECRET_FIELDS = ['registration_access_token', 'client_secret'];

/** The registration answer without its secrets, for the `registration` column. */
export function publicRegistration(answer: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(answer).filter(([key]) => !SECRET_FIELDS.includes(key)));
}

/** The private key (PEM) of a registration; the context binds it to its row. */
export function openPrivateKey(
  row: Pick<ConsentClientRow, 'id' | 'private_key_sealed'>,
  secrets: SecretBox,
): string {
  return secrets.open(row.private_key_sealed, row.id);
}

/** The request-object signing key (PKCS#8 PEM) of a registration, or null when it has none. */
export function openSigningKey(
  row: Pick<ConsentClientRow, 'id' | 'signing_key_sealed'>,
  secrets: SecretBox,
): string | null {
  return row.signing_key_sealed ? secrets.open(row.signing_key_sealed, row.id) : null;
}

/** Registering again for the same bank and mode replaces the row: the bank issued a new client. */
export async function saveRegistration(trx: Knex, row: ConsentClientRow): Promise<void> {
  await trx('consent_clients').where({ bank_id: row.bank_id, mode: row.mode }).delete();
  await trx('consent_clients').insert(row);
}

export async function findRegistration(
  db: Knex,
  bankId: string,
  mode: 'live' | 'test',
): Promise<ConsentClientRow | undefined> {
  return db<ConsentClientRow>('consent_clients').where({ bank_id: bankId, mode }).first();
}

export async function listRegistrations(db: Knex): Promise<ConsentClientRow[]> {
  return db<ConsentClientRow>('consent_clients').orderBy([{ column: 'bank_id' }, { column: 'mode' }]);
}

/** The banks with a consent client in `mode`: they connect by consent there (institutions.ts). */
export async function registeredBanks(db: Knex, mode: 'live' | 'test'): Promise<Set<string>> {
  const rows: { bank_id: string }[] = await db('consent_clients').where({ mode }).select('bank_id');
  return new Set(rows.map((row) => row.bank_id));
}

/**
 * What `svc banks rotate-certificate` writes on a registration's row after the bank answered an RFC 7592
 * update: the certificate and its sealed key, and what the bank returned (a registration access token it
 * may have rotated, the client URI, its answer without secrets). Same row, same id, same client id: every
 * grant issued to the client stays usable. `updated_at` must move (client.ts reopens its client on it).
 */
export interface CertificateChange {
  certificate_pem: string;
  private_key_sealed: string;
  registration_access_token_sealed: string | null;
  registration_client_uri: string | null;
  registration: string;
  updated_at: number;
}

/** Records a certificate rotation (or its undoing) on the row `id`; false when that row is gone. */
export async function recordCertificateChange(
  trx: Knex,
  id: string,
  change: CertificateChange,
): Promise<boolean> {
  const updated = await trx('consent_clients').where({ id }).update(change);
  return Number(updated) === 1;
}
