import { createHmac } from 'node:crypto';
import type { BankCredentials } from '../banks/connector.js';
import { normaliseRut } from '../rut/rut.js';
import type { SecretBox } from '../secrets/secret-box.js';

/*
 * Finding a link by its holder's RUT without storing the RUT in the clear: each link keeps an HMAC of its
 * RUTs under a key derived from the master key, named by that key's id (`mk_x:…`). A search computes the
 * digest under every master key the process holds, so a link still matches between a master-key rotation
 * and housekeeping's re-digesting it under the new key (rut-digest-fill.ts).
 */

export const DIGEST_LABEL = 'link-rut-search';
/** 128 bits of the HMAC: collisions among a few million RUTs are out of reach, and the index stays small. */
const DIGEST_HEX_CHARS = 32;

export interface RutDigests {
  rut_digest: string;
  company_rut_digest: string | null;
}

function digestUnder(secrets: SecretBox, rut: string, keyId?: string): string | null {
  const derived = secrets.derivedKey(DIGEST_LABEL, keyId);
  if (!derived) return null;
  const mac = createHmac('sha256', derived.key).update(rut).digest('hex').slice(0, DIGEST_HEX_CHARS);
  return `${derived.keyId}:${mac}`;
}

/** The digests a link's row stores for its credentials, under the active master key. */
export function rutDigestsOf(secrets: SecretBox, credentials: BankCredentials): RutDigests {
  return {
    rut_digest: digestUnder(secrets, credentials.rut)!,
    company_rut_digest: credentials.rutEmpresa ? digestUnder(secrets, credentials.rutEmpresa) : null,
  };
}

/** What a search for `text` compares with, or null when the text is no valid RUT. */
export function rutSearchDigests(secrets: SecretBox, text: string): string[] | null {
  const rut = normaliseRut(text);
  if (!rut) return null;
  return secrets.keyIds.map((keyId) => digestUnder(secrets, rut, keyId)).filter((d) => d !== null);
}
