import type { Knex } from 'knex';
import { errors } from '../errors/api-error.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { BACKFILL_BANK, findInstitution } from '../banks/institutions.js';
import { assertRefreshable, queueIntent } from '../refresh/refresh.js';
import type { RefreshIntent } from '../refresh/intents.js';
import type { LinkRow } from '../links/store.js';

/**
 * Queues a backfill: statements for the `months` before the 90 days the movements API covers. The period
 * already covered is recorded on the link, so a repeat downloads nothing (the intent succeeds at once) and a
 * longer one downloads only the extension; `force` downloads the whole period again.
 */
export async function requestBackfill(
  trx: Knex,
  principal: Principal,
  linkId: string,
  input: { months: number; force: boolean },
  now: number,
): Promise<RefreshIntent> {
  const link = await findOwned<LinkRow>(trx, 'links', linkId, principal, 'link');
  if (link.bank_id !== BACKFILL_BANK || link.holder_type !== 'business') {
    throw errors.badRequest(
      'backfill_unavailable',
      `Backfill is available only for business links of ${findInstitution(BACKFILL_BANK)!.name} (${BACKFILL_BANK}); link ${link.id} is a ${link.holder_type} link of ${link.bank_id}.`,
    );
  }
  await assertRefreshable(trx, link);
  return queueIntent(trx, link, 'backfill', now, { backfill_months: input.months, force: input.force });
}
