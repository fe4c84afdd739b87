import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import type { Logger } from '../logging/logger.js';
import { expireMfaWaits } from '../refresh/refresh.js';
import { removeExpiredEndpoints } from '../webhooks/endpoints.js';
import { addRetentionTotals } from './retention-totals.js';
import { pruneByAge } from './retention.js';

/** What housekeeping uses of a process's services (the API's AppServices, the scheduler's). */
export interface HousekeepingServices {
  db: Database;
  clock: Clock;
  config: Readonly<Config>;
  logger: Logger;
}

/**
 * Periodic clean-up that any scheduler may run: whichever wins the tick (a conditional update of its
 * `cron_ticks` row) does the work, so several schedulers never repeat it.
 */
export async function runHousekeeping(services: HousekeepingServices, tickPeriodMs = 60_000): Promise<void> {
  const now = services.clock.now();
  const won = await winTick(services, 'housekeeping', now, tickPeriodMs / 2);
  if (!won) return;
  const mfaExpired = await expireMfaWaits(services.db, now);
  const endpointsRemoved = await removeExpiredEndpoints(services.db, now);
  const pruned = await pruneByAge(services, now);
  await addRetentionTotals(services.db, pruned, now);
  services.logger.info(
    {
      idempotency_keys_removed: pruned.idempotency_keys,
      mfa_waits_expired: mfaExpired,
      widget_sessions_removed: pruned.widget_sessions,
      temporary_endpoints_removed: endpointsRemoved,
      retention_pruned: pruned,
    },
    'housekeeping done',
  );
}

/** True for exactly one caller per `minIntervalMs`, across processes. */
export async function winTick(
  services: Pick<HousekeepingServices, 'db'>,
  name: string,
  now: number,
  minIntervalMs: number,
): Promise<boolean> {
  return services.db.transaction(async (trx) => {
    const updated = await trx('cron_ticks')
      .where({ name })
      .where('last_run_at', '<=', now - minIntervalMs)
      .update({ last_run_at: now });
    if (updated > 0) return true;
    const exists = await trx('cron_ticks').where({ name }).first('name');
    if (exists) return false;
    await trx('cron_ticks').insert({ name, last_run_at: now }).onConflict('name').ignore();
    const row = await trx('cron_ticks').where({ name }).first('last_run_at');
    return row?.last_run_at === now;
  });
}
