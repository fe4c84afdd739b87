import { createHmac } from 'node:crypto';
import type { Knex } from 'knex';
import type { BankCredentials } from '../banks/connector.js';
import { normaliseRut } from '../rut/rut.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { openCredentials } from './links.js';
import { linksWithoutCurrentRutDigest, updateLink } from './store.js';

/*
 * Finding a link by its holder's RUT without storing the RUT in the clear: each link keeps an HMAC of its
 * RUTs under a key derived from the master key, named by that key's id (`mk_x:…`). A search computes the
 * digest under every master key the process holds, so a link still matches between a master-key rotation
 * and housekeeping's re-digesting it under the new key (fillRutDigests).
 */

const DIGEST_LABEL = 'link-rut-search';
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

const FILL_BATCH = 500;
/**
 * How far this process's filling has gone under the active key: links are walked in id order, a batch per
 * housekeeping pass, so a link whose credentials cannot be opened is passed over instead of blocking the
 * rest. New links are digested when made, so once the walk ends nothing is left until the key changes.
 */
const walks = new WeakMap<Knex, { keyId: string; afterId: string; done: boolean }>();

/**
 * Gives links made before the digests existed, or digested under an older master key, their digests under
 * the active key: one batch per call (housekeeping's pass), each link's credentials opened one at a time.
 */
export async function fillRutDigests(
  db: Knex,
  secrets: SecretBox,
): Promise<{ filled: number; unreadable: number }> {
  const keyId = secrets.derivedKey(DIGEST_LABEL)!.keyId;
  let walk = walks.get(db);
  if (walk?.keyId !== keyId) walks.set(db, (walk = { keyId, afterId: '', done: false }));
  if (walk.done) return { filled: 0, unreadable: 0 };
  const rows = await linksWithoutCurrentRutDigest(db, `${keyId}:`, walk.afterId, FILL_BATCH);
  let filled = 0;
  for (const row of rows) {
    let digests: RutDigests;
    try {
      digests = rutDigestsOf(secrets, openCredentials(row, secrets));
    } catch {
      continue; // sealed under a key this process lacks: `svc doctor` reports those; nothing to find it by
    }
    await updateLink(db, row.id, digests);
    filled++;
  }
  walk.afterId = rows.at(-1)?.id ?? walk.afterId;
  walk.done = rows.length < FILL_BATCH;
  return { filled, unreadable: rows.length - filled };
}
