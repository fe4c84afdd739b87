import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import type { AccountRow } from '../accounts/store.js';
import type { MovementRow } from './store.js';
import { countWhere, fetchPageByDeferredJoin, type Order, type PageWindow } from '../db/paging.js';
import type { MovementQuery } from './schemas.js';

/** The columns `presentMovement` reads: turning unused columns into JS values is most of a page's cost. */
const PRESENTED_COLUMNS = [
  'id',
  'mode',
  'account_id',
  'amount',
  'currency',
  'description',
  'type',
  'reference_id',
  'counterparty',
  'posted_at',
  'transaction_date',
  'pending',
  'status',
  'canonical_id',
  'synced_at',
] as const satisfies readonly (keyof MovementRow)[];

/** A movement as read for presenting: the columns in PRESENTED_COLUMNS. */
export type PresentedMovementRow = Pick<MovementRow, (typeof PRESENTED_COLUMNS)[number]>;

export function presentMovement(row: PresentedMovementRow) {
  const counterparty = row.counterparty
    ? (JSON.parse(row.counterparty) as {
        name: string;
        rut: string | null;
        bankId: string | null;
        accountLast4: string | null;
      })
    : null;
  return {
    object: 'movement' as const,
    id: row.id,
    account_id: row.account_id,
    amount: row.amount,
    currency: row.currency,
    description: row.description,
    type: row.type,
    reference_id: row.reference_id,
    counterparty: counterparty
      ? {
          name: counterparty.name,
          rut: counterparty.rut,
          bank_id: counterparty.bankId,
          account_last_4: counterparty.accountLast4,
        }
      : null,
    posted_at: toIso(row.posted_at)!,
    transaction_date: row.transaction_date,
    pending: Boolean(row.pending),
    status: row.status,
    canonical_id: row.canonical_id,
    synced_at: toIso(row.synced_at)!,
    mode: row.mode,
  };
}

export type { MovementQuery };

const DAY = 86_400_000;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const TIME_FIELDS =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/**
 * Whether every field of a date or ISO 8601 time exists on the calendar and the clock. `Date.parse` rolls
 * `2026-02-31` over into March on V8, which made a filter mean a day nobody asked for.
 */
export function isCalendarTime(value: string): boolean {
  const fields = TIME_FIELDS.exec(value);
  if (!fields) return false;
  const [year, month, day, hour = 0, minute = 0, second = 0, offsetHours = 0, offsetMinutes = 0] = fields
    .slice(1)
    .map((field) => (field === undefined ? undefined : Number(field)));
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  return (
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    offsetHours <= 23 &&
    offsetMinutes <= 59
  );
}

/** A date (`2026-01-31`) or an ISO 8601 time; a date as an upper bound covers its whole day. */
export function parseTime(param: string, value: string, upperBound = false): number {
  const ms = isCalendarTime(value)
    ? Date.parse(DATE_ONLY.test(value) ? `${value}T00:00:00.000Z` : value)
    : NaN;
  if (Number.isNaN(ms)) {
    throw errors.invalidParameter(
      param,
      `Invalid ${param}: use a date (2026-01-31) or an ISO 8601 time (2026-01-31T12:00:00.000Z).`,
    );
  }
  return DATE_ONLY.test(value) && upperBound ? ms + DAY - 1 : ms;
}

/**
 * The movement list, as the spec's rules say: internal rows (`duplicated`, `reversed`) only in the
 * removals feed; pending rows only with `confirmed_only=false`; `since`/`until` on `posted_at`, newest first;
 * `synced_since` as a forward cursor on `synced_at`, oldest first. Pages are found by id in the index first
 * and joined back (a deferred join), so a deep page costs about what the first one does; the total comes
 * from the counters the sync engine keeps when no filter narrows the list.
 */
export async function listMovements(
  db: Knex,
  principal: Principal,
  accountId: string,
  query: MovementQuery,
  window: PageWindow,
) {
  const account = await findOwned<AccountRow>(db, 'accounts', accountId, principal, 'account');
  if (query.include_removals && query.synced_since === undefined) {
    throw errors.invalidParameter(
      'include_removals',
      'include_removals works with synced_since: ask for the feed of changes since a cursor.',
    );
  }
  const since = query.since !== undefined ? parseTime('since', query.since) : undefined;
  const until = query.until !== undefined ? parseTime('until', query.until, true) : undefined;
  const syncedSince =
    query.synced_since !== undefined ? parseTime('synced_since', query.synced_since) : undefined;
  if (since !== undefined && until !== undefined && since > until)
    throw errors.invalidParameter('until', 'until is before since.');
  const confirmedOnly = query.confirmed_only !== false;

  // Written as SQL, so that the page's statement is built once per shape of filter (paging.ts).
  const where = ['account_id = ?'];
  const bindings: (string | number | boolean)[] = [account.id];
  if (query.include_removals) {
    where.push('status IN (?, ?, ?)');
    bindings.push('normal', 'duplicated', 'reversed');
  } else {
    where.push('status = ?');
    bindings.push('normal');
  }
  if (confirmedOnly) {
    where.push('pending = ?');
    bindings.push(false);
  }
  if (since !== undefined) {
    where.push('posted_at >= ?');
    bindings.push(since);
  }
  if (until !== undefined) {
    where.push('posted_at <= ?');
    bindings.push(until);
  }
  if (syncedSince !== undefined) {
    where.push('synced_at > ?');
    bindings.push(syncedSince);
  }
  const filter = { sql: where.join(' AND '), bindings };
  const order: Order =
    syncedSince !== undefined
      ? [
          ['synced_at', 'asc'],
          ['id', 'asc'],
        ]
      : [
          ['posted_at', 'desc'],
          ['id', 'desc'],
        ];

  const rows = fetchPageByDeferredJoin<PresentedMovementRow>(
    db,
    'movements',
    filter,
    order,
    PRESENTED_COLUMNS,
    window,
  );

  const unfiltered =
    since === undefined && until === undefined && syncedSince === undefined && !query.include_removals;
  const total = unfiltered
    ? Promise.resolve(account.visible_count + (confirmedOnly ? 0 : account.pending_count))
    : countWhere(db, 'movements', filter);
  const [data, count] = await Promise.all([rows, total]);
  return { data: data.map(presentMovement), total: count };
}
