import type { Knex } from 'knex';
import type { SecretBox } from '../secrets/secret-box.js';
import { openCredentials } from './links.js';
import { DIGEST_LABEL, rutDigestsOf, type RutDigests } from './rut-search.js';
import { linksWithoutCurrentRutDigest, storeRutDigests } from './store.js';

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
    await storeRutDigests(db, row.id, digests);
    filled++;
  }
  walk.afterId = rows.at(-1)?.id ?? walk.afterId;
  walk.done = rows.length < FILL_BATCH;
  return { filled, unreadable: rows.length - filled };
}
