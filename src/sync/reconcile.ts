import { createHash } from 'node:crypto';
import type { BankMovement } from '../banks/connector.js';
import type { MovementFields, ReconcilePlan, StoredMovement } from '../movements/store.js';

const DAY = 86_400_000;
/** How far apart a pending row and its posted row may be booked for the fuzzy pass to pair them. */
const FUZZY_DAYS = 5;

export function fingerprintOf(
  m: Pick<BankMovement, 'amount' | 'currency' | 'transactionDate' | 'description' | 'referenceId'>,
): string {
  return createHash('sha256')
    .update(
      [m.amount, m.currency, m.transactionDate, normalise(m.description), m.referenceId ?? ''].join('|'),
    )
    .digest('hex')
    .slice(0, 32);
}

function normalise(text: string): string {
  return text
    .toUpperCase()
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Z0-9]+/g, ' ')
    .trim();
}

/** Share of the shorter description's words that the other contains: 1 for "UBER *TRIP" against "UBER TRIP 123". */
function similarity(a: string, b: string): number {
  const left = new Set(
    normalise(a)
      .split(' ')
      .filter((w) => w.length > 1 && !/^\d+$/.test(w)),
  );
  const right = new Set(
    normalise(b)
      .split(' ')
      .filter((w) => w.length > 1 && !/^\d+$/.test(w)),
  );
  if (left.size === 0 || right.size === 0) return 0;
  let shared = 0;
  for (const word of left) if (right.has(word)) shared += 1;
  return shared / Math.min(left.size, right.size);
}

function fieldsOf(m: BankMovement): MovementFields {
  return {
    bank_ref: m.ref,
    fingerprint: fingerprintOf(m),
    amount: m.amount,
    currency: m.currency,
    description: m.description,
    type: m.type,
    reference_id: m.referenceId,
    counterparty: m.counterparty,
    posted_at: m.postedAt,
    transaction_date: m.transactionDate,
    pending: m.pending,
    status: 'normal',
    canonical_id: null,
  };
}

function changed(row: StoredMovement, next: MovementFields): Partial<MovementFields> | null {
  const changes: Partial<MovementFields> = {};
  for (const key of [
    'amount',
    'description',
    'posted_at',
    'transaction_date',
    'pending',
    'type',
    'reference_id',
  ] as const) {
    if (row[key] !== next[key]) (changes as Record<string, unknown>)[key] = next[key];
  }
  if (Object.keys(changes).length === 0) return null;
  changes.fingerprint = next.fingerprint;
  return changes;
}

/**
 * Decides what one sync of one account writes, from the rows already stored (those of the window, every
 * pending row, and any whose bank id reappears) and the rows the bank returned. In order of confidence:
 *
 * 1. the bank's own id: a known row, updated if the bank changed it;
 * 2. a posted row whose reference number matches a stored pending row: the pending row becomes the posted
 *    one and keeps its id (so a consumer's copy stays valid; its `synced_at` moves, so cursors see it);
 * 3. a bounded fuzzy pass for banks without reference numbers: a pending row with the same amount and
 *    currency, booked within 5 days, with a similar description;
 * 4. a row without a bank id whose fingerprint is stored: known;
 * 5. the same reference number, amount and day under another bank id: the bank reported the row twice;
 *    kept as `duplicated` with `canonical_id`, hidden from lists;
 * 6. the same reference number with the opposite amount: a reversal pair; both become `reversed`;
 * 7. otherwise, a new movement.
 */
export function reconcile(
  stored: StoredMovement[],
  incoming: BankMovement[],
  newId: () => string,
): ReconcilePlan {
  const plan: ReconcilePlan = { inserts: [], updates: [], newMovements: 0 };
  // The working set (stored rows as this sync leaves them, and the rows it inserts), indexed so that each
  // incoming row costs a few map lookups: a full scan per row made 20,000 rows take minutes.
  const byRef = new Map<string, StoredMovement>();
  const byReference = new Index<string>();
  const byAmount = new Index<string>();
  const byFingerprint = new Index<string>();
  const inserted = new Set<string>();
  const updates = new Map<string, Partial<MovementFields>>();
  const matched = new Set<string>();
  const track = (row: StoredMovement) => {
    if (row.bank_ref) byRef.set(row.bank_ref, row);
    if (row.reference_id) byReference.add(row.reference_id, row);
    byAmount.add(`${row.currency}|${row.amount}`, row);
    if (!row.bank_ref) byFingerprint.add(row.fingerprint, row);
  };
  for (const row of stored) track({ ...row });

  const update = (row: StoredMovement, changes: Partial<MovementFields>) => {
    if (inserted.has(row.id) && row.status === 'normal' && changes.status && changes.status !== 'normal')
      plan.newMovements -= 1;
    Object.assign(row, changes);
    if (changes.amount !== undefined) byAmount.add(`${row.currency}|${row.amount}`, row);
    if (changes.reference_id) byReference.add(changes.reference_id, row);
    if (inserted.has(row.id)) return; // the insert is this same object, so it carries the change
    updates.set(row.id, { ...(updates.get(row.id) ?? {}), ...changes });
  };
  const insert = (fields: MovementFields) => {
    const row = { ...fields, id: newId() };
    plan.inserts.push(row);
    inserted.add(row.id);
    matched.add(row.id);
    track(row);
    if (row.status === 'normal') plan.newMovements += 1;
  };

  const ordered = [...incoming].sort(
    (a, b) =>
      a.postedAt - b.postedAt ||
      Number(a.pending) - Number(b.pending) ||
      (a.ref ?? '').localeCompare(b.ref ?? ''),
  );
  for (const movement of ordered) {
    const fields = fieldsOf(movement);

    const known = movement.ref ? byRef.get(movement.ref) : undefined;
    if (known) {
      matched.add(known.id);
      const changes = known.status === 'normal' ? changed(known, fields) : null;
      if (changes) update(known, changes);
      continue;
    }

    if (!movement.pending) {
      const open = (row: StoredMovement) =>
        row.status === 'normal' && row.pending && !matched.has(row.id) && row.currency === fields.currency;
      const twin =
        // A posting keeps the sign of its pending charge; the same reference with the other sign is a reversal.
        (fields.reference_id
          ? byReference
              .get(fields.reference_id)
              .find((row) => open(row) && Math.sign(row.amount) === Math.sign(fields.amount))
          : undefined) ??
        byAmount
          .get(`${fields.currency}|${fields.amount}`)
          .find(
            (row) =>
              open(row) &&
              row.amount === fields.amount &&
              Math.abs(row.posted_at - fields.posted_at) <= FUZZY_DAYS * DAY &&
              similarity(row.description, fields.description) >= 0.5,
          );
      if (twin) {
        matched.add(twin.id);
        const { status: _status, canonical_id: _canonical, ...rest } = fields;
        update(twin, rest);
        continue;
      }
    }

    if (!movement.ref) {
      const same = byFingerprint.get(fields.fingerprint).find((row) => !row.bank_ref && !matched.has(row.id));
      if (same) {
        matched.add(same.id);
        continue;
      }
    }

    if (fields.reference_id) {
      const related = byReference.get(fields.reference_id).filter((row) => row.status === 'normal');
      const original = related.find(
        (row) =>
          row.pending === fields.pending &&
          row.amount === fields.amount &&
          sameDay(row.posted_at, fields.posted_at),
      );
      if (original) {
        insert({ ...fields, status: 'duplicated', canonical_id: original.id });
        continue;
      }
      const reversed = related.find((row) => row.amount === -fields.amount);
      if (reversed) {
        insert({ ...fields, status: 'reversed' });
        update(reversed, { status: 'reversed' });
        continue;
      }
    }

    insert(fields);
  }
  plan.updates = [...updates].map(([id, changes]) => ({ id, changes }));
  return plan;
}

/** A multimap; candidates are re-checked on lookup, so an entry may outlive a change of its row. */
class Index<K> {
  private readonly map = new Map<K, StoredMovement[]>();
  add(key: K, row: StoredMovement): void {
    const list = this.map.get(key);
    if (!list) this.map.set(key, [row]);
    else if (!list.includes(row)) list.push(row);
  }
  get(key: K): StoredMovement[] {
    return this.map.get(key) ?? [];
  }
}

function sameDay(a: number, b: number): boolean {
  return Math.floor(a / DAY) === Math.floor(b / DAY);
}
