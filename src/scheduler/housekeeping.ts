import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { fillRutDigests } from '../links/rut-digest-fill.js';
import type { Logger } from '../logging/logger.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { expireMfaWaits } from '../refresh/refresh.js';
import { compactEventTallies } from '../events/store.js';
import { compactDeliveryTallies } from '../webhooks/deliveries.js';
import { removeExpiredEndpoints } from '../webhooks/endpoints.js';
import { pruneIdleBuckets } from '../ratelimit/limiter.js';
import { abandonExpiredTrips } from '../widget/consent/abandoned-trips.js';
import { SESSION_STARTS_BUCKET } from '../widget/consent/consent-starts.js';
import { addRetentionTotals } from './retention-totals.js';
import { pruneByAge } from './retention.js';

/** What housekeeping uses of a process's services (the API's AppServices, the scheduler's). */
export interface HousekeepingServices {
  db: Database;
  clock: Clock;
  config: Readonly<Config>;
  logger: Logger;
  /** To digest older links' RUTs for the console's search (links/rut-search.ts). */
  secrets: SecretBox;
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
  const tallies = await foldTallies(services.db);
  const rutDigests = await fillRutDigests(services.db.knex, services.secrets);
  // Trips past their wait that never came back: their consents at a Brazilian bank go to the revoke outbox.
  const trips = await abandonExpiredTrips(services, now);
  // A widget session lives at most a day (`widget.sessionTtlMinutes`): its consent-start bucket is spent.
  const startBuckets = await pruneIdleBuckets(services.db.knex, SESSION_STARTS_BUCKET, now - DAY_MS, 1_000);
  services.logger.info(
    {
      idempotency_keys_removed: pruned.idempotency_keys,
      mfa_waits_expired: mfaExpired,
      widget_sessions_removed: pruned.widget_sessions,
      temporary_endpoints_removed: endpointsRemoved,
      retention_pruned: pruned,
      tally_rows_folded: tallies,
      rut_digests_filled: rutDigests.filled,
      rut_digests_unreadable: rutDigests.unreadable,
      consent_trips_abandoned: trips.abandoned,
      abandoned_consents_queued: trips.consentsQueued,
      session_start_buckets_removed: startBuckets,
    },
    'housekeeping done',
  );
}

const DAY_MS = 86_400_000;

/** Rows of changes folded per transaction, and at most per pass and table (about a minute's is hundreds). */
const TALLY_BATCH = 2_000;
const TALLY_ROWS_PER_PASS = 20_000;

/**
 * The lists' counts: the changes recorded since the last pass folded into one row per key, so a list's
 * total reads a few rows (src/db/tallies.ts). In batches, each its own short transaction, so that a backlog
 * (housekeeping stopped for a day) never holds SQLite's writer for long. Returns the rows folded.
 */
async function foldTallies(db: Database): Promise<number> {
  let folded = 0;
  for (const compact of [compactEventTallies, compactDeliveryTallies]) {
    for (let seen = 0; seen < TALLY_ROWS_PER_PASS;) {
      const removed = await db.transaction((trx) => compact(trx, TALLY_BATCH));
      seen += removed;
      folded += removed;
      if (removed < TALLY_BATCH) break;
    }
  }
  return folded;
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
