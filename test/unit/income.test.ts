import t from 'tap';
import {
  INCOME_THRESHOLDS,
  amountStability,
  detectSchedule,
  groupBySource,
  incomeSnapshot,
  incomeWindow,
  qualifyInflows,
  type IncomeMovement,
  type SnapshotInput,
} from '../../src/income/income.js';

const DAY = 86_400_000;
const HOLDER = 'Nicolás Silva Soto';
const ACME = { name: 'Constructora Acme SpA', rut: '76.111.111-6' };
const BETA = { name: 'Servicios Beta Ltda.', rut: '77.222.222-K' };

let sequence = 0;

/** A booked CLP movement on the checking account at noon UTC of `day` (`YYYY-MM-DD`). */
function mv(day: string, amount: number, fields: Partial<IncomeMovement> = {}): IncomeMovement {
  sequence += 1;
  return {
    id: `mov_${String(sequence).padStart(16, '0')}`,
    accountId: 'acc_checking',
    accountType: 'checking',
    amount,
    currency: 'CLP',
    description: amount > 0 ? 'TRANSFERENCIA RECIBIDA' : 'COMPRA',
    type: 'transfer',
    referenceId: `ref${sequence}`,
    counterparty: null,
    postedAt: Date.parse(`${day}T12:00:00.000Z`),
    pending: false,
    status: 'normal',
    ...fields,
  };
}

function salary(day: string, amount: number, employer = ACME): IncomeMovement {
  return mv(day, amount, {
    type: 'salary',
    description: `ABONO REMUNERACIONES ${employer.name.toUpperCase()}`,
    counterparty: employer,
  });
}

const pad = (n: number) => String(n).padStart(2, '0');

/** The last Monday-to-Friday day of a month (month0 is 0-based), as the sandbox pays salaries. */
function lastWorkingDay(year: number, month0: number): string {
  const date = new Date(Date.UTC(year, month0 + 1, 0));
  while (date.getUTCDay() === 0 || date.getUTCDay() === 6) date.setUTCDate(date.getUTCDate() - 1);
  return date.toISOString().slice(0, 10);
}

/** A few everyday outflows, so no history is only income. */
function spending(year: number, month0: number): IncomeMovement[] {
  return [
    mv(`${year}-${pad(month0 + 1)}-03`, -45_000, {
      description: 'COMPRA SUPERMERCADO',
      type: 'card_purchase',
    }),
    mv(`${year}-${pad(month0 + 1)}-12`, -120_000, {
      description: 'GIRO CAJERO AUTOMATICO',
      type: 'withdrawal',
    }),
  ];
}

/** Snapshot on 2026-07-10: with months=6 the window is January to June 2026. */
const NOW = Date.UTC(2026, 6, 10, 15);

function snapshot(movements: IncomeMovement[], over: Partial<SnapshotInput> = {}) {
  return incomeSnapshot({
    movements,
    currency: 'CLP',
    months: 6,
    now: NOW,
    ownNames: [HOLDER],
    historyStart: Date.UTC(2025, 9, 1),
    ...over,
  });
}

t.test('the window is the complete calendar months before today', async (t) => {
  const window = incomeWindow(NOW, 6);
  t.equal(new Date(window.from).toISOString(), '2026-01-01T00:00:00.000Z');
  t.equal(new Date(window.to).toISOString(), '2026-06-30T23:59:59.999Z');
  t.equal(new Date(incomeWindow(NOW, 1).detectionFrom).toISOString(), '2026-04-01T00:00:00.000Z');
  t.equal(new Date(incomeWindow(Date.UTC(2026, 0, 5), 2).from).toISOString(), '2025-11-01T00:00:00.000Z');
  const result = snapshot([], { months: 24 });
  t.equal(result.monthly_totals.length, 24);
  t.equal(result.monthly_totals[0]!.month, '2024-07');
  t.equal(result.monthly_totals.at(-1)!.month, '2026-06');
});

t.test('one employer: monthly, fully regular, every month counted', async (t) => {
  const amounts = [1_500_000, 1_512_000, 1_495_000, 1_508_000, 1_500_000, 1_490_000];
  const movements = amounts.flatMap((amount, i) => [
    salary(`2026-${pad(i + 1)}-25`, amount),
    ...spending(2026, i),
  ]);
  const result = snapshot(movements);
  t.same(result.window, { from: '2026-01-01', to: '2026-06-30' });
  t.match(result.main_income, {
    source: ACME.name,
    source_rut: ACME.rut,
    frequency: 'monthly',
    regularity: 1,
    last_seen: '2026-06-25',
    occurrences: 6,
  });
  t.equal(result.main_income!.average_amount, Math.round(amounts.reduce((a, b) => a + b) / 6));
  t.same(result.other_recurring_income, []);
  t.same(
    result.monthly_totals.map((m) => [m.month, m.income, m.recurring_income, m.covered]),
    amounts.map((amount, i) => [`2026-${pad(i + 1)}`, amount, amount, true]),
  );
  t.same(result.averages, {
    monthly_income: Math.round(amounts.reduce((a, b) => a + b) / 6),
    monthly_recurring_income: Math.round(amounts.reduce((a, b) => a + b) / 6),
    months_counted: 6,
  });
});

t.test('a salary on the last working day (gaps of 26 to 33 days) reads as monthly and regular', async (t) => {
  const days: string[] = [];
  for (let month0 = 0; month0 < 12; month0++) days.push(lastWorkingDay(2025, month0));
  const movements = days.map((day, i) => salary(day, Math.round(1_800_000 * (1 + ((i % 5) - 2) / 100))));
  const dayNumbers = days.map((day) => Date.parse(day) / DAY);
  const gaps = dayNumbers.slice(1).map((d, i) => d - dayNumbers[i]!);
  t.ok(Math.min(...gaps) <= 28 && Math.max(...gaps) >= 33, `the gaps vary: ${gaps.join(', ')}`);
  t.match(detectSchedule(dayNumbers), { frequency: 'monthly', timing: 1 });
  const result = snapshot(movements, { now: Date.UTC(2026, 0, 3), months: 12 });
  t.equal(result.main_income?.frequency, 'monthly');
  t.equal(result.main_income?.occurrences, 12);
  t.ok(
    result.main_income!.regularity >= 0.95,
    `regularity ${result.main_income!.regularity} with ±2% amounts`,
  );
});

t.test('two employers at once: the larger is main, the other is listed, both are recurring', async (t) => {
  const movements: IncomeMovement[] = [];
  for (let i = 0; i < 6; i++) {
    movements.push(
      salary(`2026-${pad(i + 1)}-28`, 1_400_000),
      salary(`2026-${pad(i + 1)}-10`, 450_000, BETA),
    );
  }
  const result = snapshot(movements);
  t.equal(result.main_income?.source, ACME.name);
  t.equal(result.other_recurring_income.length, 1);
  t.match(result.other_recurring_income[0], {
    source: BETA.name,
    frequency: 'monthly',
    average_amount: 450_000,
  });
  t.ok(result.monthly_totals.every((m) => m.income === 1_850_000 && m.recurring_income === 1_850_000));
  t.equal(result.averages.monthly_recurring_income, 1_850_000);
});

t.test('a job change: the current employer is main even with a smaller total; both show', async (t) => {
  const movements: IncomeMovement[] = [];
  for (let month = 1; month <= 3; month++)
    movements.push(salary(`2026-${pad(month)}-30`.replace('02-30', '02-27'), 2_000_000));
  for (let month = 4; month <= 6; month++) movements.push(salary(`2026-${pad(month)}-05`, 1_600_000, BETA));
  const result = snapshot(movements);
  t.match(result.main_income, {
    source: BETA.name,
    source_rut: BETA.rut,
    frequency: 'monthly',
    occurrences: 3,
  });
  t.same(
    result.other_recurring_income.map((s) => [s.source, s.frequency, s.last_seen]),
    [[ACME.name, 'monthly', '2026-03-30']],
    'the previous employer is listed, with the day it last paid',
  );
  t.same(
    result.monthly_totals.map((m) => m.recurring_income),
    [2_000_000, 2_000_000, 2_000_000, 1_600_000, 1_600_000, 1_600_000],
  );
});

t.test('irregular freelance income counts in the totals but is not recurring income', async (t) => {
  // One client paying invoices at random days and amounts.
  const paid: [string, number][] = [
    ['2026-01-08', 350_000],
    ['2026-01-29', 900_000],
    ['2026-03-14', 120_000],
    ['2026-03-19', 640_000],
    ['2026-05-27', 1_300_000],
    ['2026-06-02', 280_000],
  ];
  const client = { name: 'Agencia Creativa Delta SpA', rut: '76.333.333-3' };
  const movements = paid.map(([day, amount]) => mv(day, amount, { counterparty: client }));
  const schedule = detectSchedule(movements.map((m) => Math.floor(m.postedAt / DAY)));
  t.equal(schedule.frequency, 'irregular');
  t.ok(schedule.timing < INCOME_THRESHOLDS.minScheduleTiming);
  const [group] = groupBySource(movements);
  t.ok(amountStability(group!.payments.map((p) => p.amount)) < 0.2, 'amounts all over the place');
  const result = snapshot(movements);
  t.equal(result.main_income, null, 'no recurring income: a lender must not read invoices as a salary');
  t.same(result.other_recurring_income, []);
  t.same(
    result.monthly_totals.map((m) => [m.income, m.recurring_income]),
    [
      [1_250_000, 0],
      [0, 0],
      [760_000, 0],
      [0, 0],
      [1_300_000, 0],
      [280_000, 0],
    ],
  );
  t.equal(result.averages.monthly_income, Math.round(3_590_000 / 6));
  t.equal(result.averages.monthly_recurring_income, 0);
});

t.test('no income at all: main_income null and every month zero', async (t) => {
  const movements = [0, 1, 2, 3, 4, 5].flatMap((month0) => spending(2026, month0));
  const result = snapshot(movements);
  t.equal(result.main_income, null);
  t.same(result.other_recurring_income, []);
  t.equal(result.monthly_totals.length, 6);
  t.ok(result.monthly_totals.every((m) => m.income === 0 && m.recurring_income === 0 && m.covered));
  t.same(result.averages, { monthly_income: 0, monthly_recurring_income: 0, months_counted: 6 });
  t.same(snapshot([]).averages, { monthly_income: 0, monthly_recurring_income: 0, months_counted: 6 });
  t.same(
    snapshot([], { historyStart: null }).averages,
    { monthly_income: 0, monthly_recurring_income: 0, months_counted: 0 },
    'a link with no stored movement has no month of data',
  );
});

t.test('internal transfers, reversals, refunds and own money are not income', async (t) => {
  const salaryRow = salary('2026-03-31', 1_700_000);
  const notIncome: [IncomeMovement, string][] = [
    [
      mv('2026-03-10', 300_000, { accountId: 'acc_savings', accountType: 'savings', description: 'ABONO' }),
      'internal_transfer',
    ],
    [
      mv('2026-03-12', 250_000, { counterparty: { name: 'NICOLAS SILVA SOTO', rut: '11.111.111-1' } }),
      'own_account',
    ],
    [mv('2026-03-13', 80_000, { status: 'reversed', description: 'CARGO PAC SEGUROS' }), 'not_booked'],
    [mv('2026-03-14', 15_000, { description: 'REVERSO CARGO PAC SEGUROS', type: 'other' }), 'reversal'],
    [mv('2026-03-15', 22_000, { description: 'Devolución compra', type: 'other' }), 'reversal'],
    [mv('2026-03-16', 9_990, { description: 'FALABELLA SANTIAGO', type: 'card_purchase' }), 'refund'],
    [mv('2026-03-17', 5_900, { description: 'COMISION MANTENCION', type: 'fee' }), 'refund'],
    [
      mv('2026-03-05', 410_000, {
        accountId: 'acc_card',
        accountType: 'credit_card',
        description: 'PAGO TARJETA - GRACIAS',
      }),
      'credit_card',
    ],
    [mv('2026-03-01', 500_000, { description: 'RESCATE FONDO MUTUO' }), 'own_money'],
    [
      mv('2026-03-06', 60_000, {
        accountType: 'savings',
        description: 'DEPOSITO DESDE CUENTA CORRIENTE',
        type: 'deposit',
      }),
      'own_money',
    ],
    [
      mv('2026-03-10', 100_000, {
        accountType: 'savings',
        description: 'DEPOSITO AHORRO PROGRAMADO',
        type: 'deposit',
      }),
      'own_money',
    ],
    [
      mv('2026-03-20', 2_000_000, { description: 'OTORGAMIENTO CREDITO DE CONSUMO', type: 'deposit' }),
      'credit',
    ],
    [mv('2026-03-21', 70_000, { pending: true }), 'not_booked'],
    [mv('2026-03-22', 70_000, { status: 'duplicated' }), 'not_booked'],
    [mv('2026-03-23', 50_000, { currency: 'USD' }), 'other_currency'],
    [mv('2026-03-24', 12_000, { description: 'ABONO', referenceId: 'pair-1' }), 'reversal'],
  ];
  const outflows = [
    // The savings inflow above is this transfer out of checking, a day earlier.
    mv('2026-03-09', -300_000, { description: 'TRANSFERENCIA A CUENTA AHORRO' }),
    // An unlabelled reversal: the same reference on the same account.
    mv('2026-03-23', -12_000, { description: 'CARGO', referenceId: 'pair-1' }),
    // A transfer out of savings of exactly the salary, the same day: the salary stays income.
    mv('2026-03-31', -1_700_000, { accountId: 'acc_savings', accountType: 'savings', description: 'RETIRO' }),
  ];
  const kept = mv('2026-03-18', 40_000, { counterparty: { name: 'Pedro Rojas Díaz', rut: '12.345.678-5' } });
  const all = [salaryRow, kept, ...notIncome.map(([m]) => m), ...outflows];
  const { income, excluded } = qualifyInflows(all, 'CLP', [HOLDER]);
  t.same(
    income.map((m) => m.id).sort(),
    [salaryRow.id, kept.id].sort(),
    'only the salary and a third-party transfer count',
  );
  for (const [movement, reason] of notIncome)
    t.equal(excluded.get(movement.id), reason, `${movement.description}: ${reason}`);
  const result = snapshot(all);
  t.equal(result.monthly_totals[2]!.income, 1_740_000);
});

t.test('a month without income is a zero entry and costs regularity', async (t) => {
  const movements = [1, 2, 3, 5, 6].map((month) => salary(`2026-${pad(month)}-20`, 1_500_000));
  const result = snapshot(movements);
  t.same(
    result.monthly_totals.map((m) => m.income),
    [1_500_000, 1_500_000, 1_500_000, 0, 1_500_000, 1_500_000],
  );
  t.equal(result.monthly_totals[3]!.month, '2026-04');
  t.equal(result.main_income?.frequency, 'monthly');
  t.equal(result.main_income?.regularity, 0.8, 'four of five expected paydays on time');
  t.equal(result.averages.monthly_income, 1_250_000, 'the empty month counts in the average');
});

t.test('months before the stored history are not averaged', async (t) => {
  const movements = [3, 4, 5, 6].map((month) => salary(`2026-${pad(month)}-27`, 1_000_000));
  const result = snapshot(movements, { historyStart: Date.UTC(2026, 1, 17) });
  t.same(
    result.monthly_totals.map((m) => m.covered),
    [false, false, true, true, true, true],
  );
  t.same(result.averages, {
    monthly_income: 1_000_000,
    monthly_recurring_income: 1_000_000,
    months_counted: 4,
  });
  const early = snapshot(movements, { historyStart: Date.UTC(2026, 1, 4) });
  t.equal(early.averages.months_counted, 5, 'history starting on the 4th still covers the month');
});

t.test('months=1 still judges the schedule on three months', async (t) => {
  const movements = [3, 4, 5, 6].map((month) => salary(`2026-${pad(month)}-27`, 1_000_000));
  const result = snapshot(movements, { months: 1 });
  t.same(result.window, { from: '2026-06-01', to: '2026-06-30' });
  t.match(result.main_income, { frequency: 'monthly', occurrences: 3, regularity: 1 });
  t.same(result.monthly_totals, [
    { month: '2026-06', income: 1_000_000, recurring_income: 1_000_000, covered: true },
  ]);
});

t.test('a stopped salary is listed but never main; two paydays are not a schedule yet', async (t) => {
  const old = [1, 2, 3].map((month) => salary(`2026-${pad(month)}-25`, 1_900_000));
  const fresh = [5, 6].map((month) => salary(`2026-${pad(month)}-02`, 1_200_000, BETA));
  const result = snapshot([...old, ...fresh]);
  t.equal(result.main_income, null, 'the old job ended and the new one has paid only twice');
  t.same(
    result.other_recurring_income.map((s) => s.source),
    [ACME.name],
  );
  t.same(
    result.monthly_totals.map((m) => m.recurring_income),
    [1_900_000, 1_900_000, 1_900_000, 0, 0, 0],
  );
  t.equal(result.monthly_totals[4]!.income, 1_200_000, 'the new salary still counts as income');
});

t.test('weekly, biweekly (including the quincena) and bonus months', async (t) => {
  const start = Date.UTC(2026, 0, 2) / DAY;
  t.match(detectSchedule([0, 1, 2, 3, 4, 5, 6, 7].map((w) => start + 7 * w + (w % 2))), {
    frequency: 'weekly',
    timing: 1,
  });
  t.match(detectSchedule([0, 1, 2, 3, 4, 5].map((n) => start + 14 * n)), {
    frequency: 'biweekly',
    timing: 1,
  });
  const quincena: number[] = [];
  for (let month0 = 0; month0 < 6; month0++) {
    quincena.push(Date.UTC(2026, month0, 15) / DAY, Date.UTC(2026, month0 + 1, 0) / DAY);
  }
  t.match(detectSchedule(quincena), { frequency: 'biweekly', timing: 1 });
  t.match(detectSchedule([start, start + 3, start + 50, start + 51]), { frequency: 'irregular' });
  t.equal(detectSchedule([start, start + 30]).frequency, 'irregular', 'two paydays are too few');
  t.equal(amountStability([1_000_000, 1_020_000, 980_000, 1_000_000]), 1, '±2% is stable');
  t.equal(amountStability([1_000_000, 1_000_000, 2_000_000, 1_000_000, 1_000_000]), 1, 'one bonus month');
  t.equal(amountStability([100, 400, 900, 150]), 0, 'a spread of 55%');
  // Same-day payments of one source are one payday: a salary paid in two parts.
  const split = [3, 4, 5, 6].flatMap((month) => [
    salary(`2026-${pad(month)}-26`, 1_000_000),
    salary(`2026-${pad(month)}-26`, 200_000),
  ]);
  const result = snapshot(split);
  t.match(result.main_income, { occurrences: 4, average_amount: 1_200_000, frequency: 'monthly' });
});

t.test('small regular sources (interest) count as income but are not listed', async (t) => {
  const movements: IncomeMovement[] = [];
  for (let month = 1; month <= 6; month++) {
    movements.push(salary(`2026-${pad(month)}-25`, 1_500_000));
    movements.push(
      mv(`2026-${pad(month)}-01`, 3_000, {
        accountType: 'savings',
        type: 'interest',
        description: 'INTERESES GANADOS',
      }),
    );
  }
  const result = snapshot(movements);
  t.equal(result.main_income?.source, ACME.name);
  t.same(result.other_recurring_income, [], 'below the 2% share');
  t.ok(result.monthly_totals.every((m) => m.income === 1_503_000 && m.recurring_income === 1_500_000));
  const pensioner = snapshot(movements.filter((m) => m.type === 'interest'));
  t.match(pensioner.main_income, { source: 'INTERESES GANADOS', frequency: 'monthly', source_rut: null });
});

t.test('sources without a counterparty are grouped by their description without numbers', async (t) => {
  const movements = [3, 4, 5, 6].map((month) =>
    mv(`2026-${pad(month)}-10`, 400_000, { description: `ARRIENDO DEPTO 0${month}/2026 Nº ${1000 + month}` }),
  );
  const groups = groupBySource(movements);
  t.equal(groups.length, 1);
  t.equal(groups[0]!.name, 'ARRIENDO DEPTO N');
  t.match(snapshot(movements).main_income, {
    source: 'ARRIENDO DEPTO N',
    frequency: 'monthly',
    occurrences: 4,
  });
});
