import t from 'tap';
import type { BankMovement } from '../../src/banks/connector.js';
import type { ReconcilePlan, StoredMovement } from '../../src/movements/store.js';
import { reconcile } from '../../src/sync/reconcile.js';

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 5, 1, 12);

function bank(overrides: Partial<BankMovement> = {}): BankMovement {
  return {
    ref: 'r1',
    amount: -15_990,
    currency: 'CLP',
    description: 'COMPRA SUPERMERCADO LIDER',
    type: 'card_purchase',
    referenceId: 'ref-1',
    counterparty: null,
    postedAt: T0,
    transactionDate: '2026-06-01',
    pending: false,
    ...overrides,
  };
}

let counter = 0;
const ids = () => `mov_${String(++counter).padStart(16, '0')}`;

/** Applies a plan to a stored set, as the engine's writes would. */
function apply(stored: StoredMovement[], plan: ReconcilePlan): StoredMovement[] {
  const next = stored.map((row) => ({ ...row }));
  for (const { id, changes } of plan.updates)
    Object.assign(
      next.find((row) => row.id === id)!,
      changes,
    );
  for (const { counterparty: _c, ...row } of plan.inserts) next.push(row);
  return next;
}

function sync(stored: StoredMovement[], incoming: BankMovement[]) {
  const plan = reconcile(stored, incoming, ids);
  return { plan, stored: apply(stored, plan) };
}

t.test('new rows are inserted once; the same answer again writes nothing', async (t) => {
  const answer = () => [
    bank(),
    bank({
      ref: 'r2',
      referenceId: 'ref-2',
      amount: 1_500_000,
      description: 'REMUNERACION ACME',
      type: 'salary',
    }),
  ];
  const first = sync([], answer());
  t.equal(first.plan.inserts.length, 2);
  t.equal(first.plan.newMovements, 2);
  const again = sync(first.stored, answer());
  t.same(again.plan, { inserts: [], updates: [], newMovements: 0 });
});

t.test('a pending row that posts becomes the posted row and keeps its id', async (t) => {
  const first = sync([], [bank({ ref: 'P-r1', pending: true })]);
  const pendingId = first.plan.inserts[0]!.id;
  const posted = sync(first.stored, [
    bank({ ref: 'r1', postedAt: T0 + 2 * DAY, transactionDate: '2026-06-01' }),
  ]);
  t.equal(posted.plan.inserts.length, 0, 'no second row');
  t.equal(posted.plan.newMovements, 0);
  t.same(
    posted.plan.updates.map((u) => u.id),
    [pendingId],
  );
  const row = posted.stored.find((r) => r.id === pendingId)!;
  t.equal(row.pending, false);
  t.equal(row.bank_ref, 'r1');
  t.equal(row.posted_at, T0 + 2 * DAY);
  t.equal(row.status, 'normal');
});

t.test('the fuzzy pass pairs a pending row without a reference number, and only a close one', async (t) => {
  const first = sync(
    [],
    [bank({ ref: 'P-9', referenceId: null, pending: true, description: 'UBER *TRIP HELP.UBER.COM' })],
  );
  const pendingId = first.plan.inserts[0]!.id;
  const far = sync(first.stored, [
    bank({ ref: '9', referenceId: null, description: 'UBER TRIP', postedAt: T0 + 9 * DAY }),
  ]);
  t.equal(far.plan.inserts.length, 1, 'nine days apart is a different movement');
  const otherAmount = sync(first.stored, [
    bank({ ref: '9', referenceId: null, description: 'UBER TRIP', amount: -16_000, postedAt: T0 + DAY }),
  ]);
  t.equal(otherAmount.plan.inserts.length, 1, 'another amount is a different movement');
  const otherMerchant = sync(first.stored, [
    bank({ ref: '9', referenceId: null, description: 'FARMACIA CRUZ VERDE', postedAt: T0 + DAY }),
  ]);
  t.equal(otherMerchant.plan.inserts.length, 1, 'another description is a different movement');
  const close = sync(first.stored, [
    bank({ ref: '9', referenceId: null, description: 'UBER TRIP', postedAt: T0 + 2 * DAY }),
  ]);
  t.same(
    close.plan.updates.map((u) => u.id),
    [pendingId],
  );
  t.equal(close.plan.inserts.length, 0);
});

t.test('a row the bank reports twice is kept as duplicated, pointing at the original', async (t) => {
  const both = sync([], [bank(), bank({ ref: 'r1-dup' })]);
  const [original, duplicate] = both.plan.inserts;
  t.equal(original!.status, 'normal');
  t.equal(duplicate!.status, 'duplicated');
  t.equal(duplicate!.canonical_id, original!.id);
  t.equal(both.plan.newMovements, 1, 'only the original is new');

  const later = sync(
    both.stored.filter((r) => r.status === 'normal'),
    [bank(), bank({ ref: 'r1-late' })],
  );
  t.equal(later.plan.inserts.length, 1);
  t.equal(later.plan.inserts[0]!.status, 'duplicated', 'a repeat in a later sync points at the stored row');
  t.equal(later.plan.inserts[0]!.canonical_id, original!.id);
  t.equal(later.plan.newMovements, 0);
});

t.test('two identical purchases without a reference number are two movements', async (t) => {
  const coffees = sync(
    [],
    [
      bank({ ref: 'c1', referenceId: null, amount: -2_500, description: 'CAFE' }),
      bank({ ref: 'c2', referenceId: null, amount: -2_500, description: 'CAFE' }),
    ],
  );
  t.equal(coffees.plan.newMovements, 2);
  t.ok(coffees.plan.inserts.every((row) => row.status === 'normal'));
});

t.test('a reversal pair becomes reversed on both sides, in one sync or across two', async (t) => {
  const same = sync(
    [],
    [
      bank(),
      bank({
        ref: 'rv',
        amount: 15_990,
        description: 'REVERSO COMPRA SUPERMERCADO LIDER',
        postedAt: T0 + DAY,
      }),
    ],
  );
  t.same(
    same.plan.inserts.map((row) => row.status),
    ['reversed', 'reversed'],
  );
  t.equal(same.plan.newMovements, 0, 'neither is shown as new');

  const first = sync([], [bank()]);
  const originalId = first.plan.inserts[0]!.id;
  const later = sync(first.stored, [
    bank(),
    bank({ ref: 'rv', amount: 15_990, description: 'REVERSO COMPRA', postedAt: T0 + DAY }),
  ]);
  t.same(
    later.plan.updates,
    [{ id: originalId, changes: { status: 'reversed' } }],
    'the delivered original leaves the list',
  );
  t.equal(later.plan.inserts[0]!.status, 'reversed');
});

t.test('a correction by the bank updates the known row', async (t) => {
  const first = sync([], [bank()]);
  const fixed = sync(first.stored, [bank({ amount: -15_000 })]);
  t.same(fixed.plan.updates, [
    {
      id: first.plan.inserts[0]!.id,
      changes: { amount: -15_000, fingerprint: fixed.plan.updates[0]!.changes.fingerprint },
    },
  ]);
});

t.test('a row without a bank id is recognised by its fingerprint', async (t) => {
  const first = sync([], [bank({ ref: null })]);
  const again = sync(first.stored, [bank({ ref: null })]);
  t.same(again.plan, { inserts: [], updates: [], newMovements: 0 });
});

t.test('a reversal of a pending charge reverses it rather than posting it', async (t) => {
  const first = sync([], [bank({ ref: 'P-r1', pending: true })]);
  const reversal = sync(first.stored, [
    bank({ ref: 'P-r1', pending: true }),
    bank({
      ref: 'r1-R',
      amount: 15_990,
      description: 'REVERSO COMPRA SUPERMERCADO LIDER',
      postedAt: T0 + DAY,
    }),
  ]);
  t.same(reversal.plan.updates, [{ id: first.plan.inserts[0]!.id, changes: { status: 'reversed' } }]);
  t.equal(reversal.plan.inserts[0]!.status, 'reversed');
  t.equal(reversal.plan.newMovements, 0);
});
