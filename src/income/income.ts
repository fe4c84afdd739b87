/**
 * The income snapshot's algorithm, as small pure functions over plain movements (no database, no clock):
 *
 *   qualifyInflows → groupBySource → detectSchedule + amountStability → describeSources → pickMain
 *   → monthlyTotals / averages
 *
 * Everything is in UTC calendar days and months, as the rest of the service. docs/income.md explains the
 * rules and the thresholds below with a worked example; change them together.
 */

const DAY_MS = 86_400_000;

export type Frequency = 'weekly' | 'biweekly' | 'monthly' | 'irregular';
type Scheduled = Exclude<Frequency, 'irregular'>;

export const INCOME_THRESHOLDS = {
  /** Paydays a source needs before its schedule is trusted; with fewer it is `irregular`, regularity 0. */
  minOccurrences: 3,
  /** Sources are judged on at least this many months, so `months=1` still sees a monthly salary repeat. */
  minDetectionMonths: 3,
  /**
   * The schedules, with the gaps (in days) that count as "on schedule". Monthly is wide because a salary
   * paid on the last working day moves between the 26th and the 31st: gaps of 26 to 33 days.
   * Biweekly covers both every-14-days pay and the Chilean quincena (15th and month end: 13 to 18 days).
   */
  schedules: {
    weekly: { days: 7, min: 5, max: 9 },
    biweekly: { days: 14, min: 12, max: 18 },
    monthly: { days: 30.44, min: 24, max: 38 },
  } satisfies Record<Scheduled, { days: number; min: number; max: number }>,
  /**
   * Share of the expected paydays that must come on schedule for a source to have a frequency at all:
   * 0.6 lets one payday in three be missed, and keeps a payer every other month from reading as monthly.
   */
  minScheduleTiming: 0.6,
  /** Amounts within this relative spread (median absolute deviation / median) are fully stable: ±5%. */
  amountTolerance: 0.05,
  /** ...and a spread of this much or more gives an amount stability of 0. */
  amountSpreadAtZero: 0.5,
  /** A scheduled source is recurring income from this regularity up. */
  minRecurringRegularity: 0.5,
  /** A recurring source must bring at least this share of the period's income (interest of 3,000 is noise). */
  minSourceShare: 0.02,
  /** A recurring source is current while its last payday is within this many periods of the window's end. */
  currentWithinPeriods: 2,
  /** An inflow matched by an outflow of the same amount on another own account within this many days. */
  internalTransferDays: 3,
  /** A month counts in the averages when the link's history starts at most this many days into it. */
  historyGraceDays: 5,
} as const;

const T = INCOME_THRESHOLDS;

/** One stored movement, as the algorithm needs it. Amounts are signed integer minor units. */
export interface IncomeMovement {
  id: string;
  accountId: string;
  accountType: string;
  amount: number;
  currency: string;
  description: string;
  type: string;
  referenceId: string | null;
  counterparty: { name: string; rut: string | null } | null;
  postedAt: number;
  pending: boolean;
  status: string;
}

// ---------------------------------------------------------------------------------------------------------
// Calendar helpers (UTC)

/** Months since year 0 (`year * 12 + month0`), so consecutive months differ by 1. */
export function monthIndex(ms: number): number {
  const date = new Date(ms);
  return date.getUTCFullYear() * 12 + date.getUTCMonth();
}

export function monthStart(index: number): number {
  return Date.UTC(Math.floor(index / 12), index % 12, 1);
}

export function monthLabel(index: number): string {
  return `${String(Math.floor(index / 12)).padStart(4, '0')}-${String((index % 12) + 1).padStart(2, '0')}`;
}

export function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

function dayNumber(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

export interface IncomeWindow {
  /** The requested months: the `months` complete calendar months before the month of `now`. */
  firstMonth: number;
  lastMonth: number;
  /** First instant of the window and last instant of it (inclusive). */
  from: number;
  to: number;
  /** Sources are detected from here (at least `minDetectionMonths` months back) to `to`. */
  detectionFrom: number;
}

/**
 * Complete months only: the current month is left out, so a month's figures do not change as it goes on
 * and a salary due at its end does not read as missing.
 */
export function incomeWindow(now: number, months: number): IncomeWindow {
  const lastMonth = monthIndex(now) - 1;
  const firstMonth = lastMonth - months + 1;
  const detectionFirst = lastMonth - Math.max(months, T.minDetectionMonths) + 1;
  return {
    firstMonth,
    lastMonth,
    from: monthStart(firstMonth),
    to: monthStart(lastMonth + 1) - 1,
    detectionFrom: monthStart(detectionFirst),
  };
}

// ---------------------------------------------------------------------------------------------------------
// What counts as income

export type Exclusion =
  | 'not_inflow'
  | 'other_currency'
  | 'not_booked'
  | 'credit_card'
  | 'refund'
  | 'reversal'
  | 'credit'
  | 'own_money'
  | 'own_account'
  | 'internal_transfer';

/** Positive rows of these types give money back (a refunded purchase, a waived fee, a cancelled withdrawal). */
const REFUND_TYPES: ReadonlySet<string> = new Set(['card_purchase', 'fee', 'withdrawal']);
/** Types that are never a transfer between the holder's own accounts. */
const EARNED_TYPES: ReadonlySet<string> = new Set(['salary', 'interest']);

const REVERSAL_WORDS = /\b(REVERSO|REVERSA|REVERSION|ANULACION|DEVOLUCION|REEMBOLSO|REINTEGRO|CONTRACARGO)\b/;
const CREDIT_WORDS =
  /\b(PRESTAMO|AVANCE|CREDITO DE CONSUMO|CREDITO CONSUMO|CREDITO HIPOTECARIO|LINEA DE CREDITO|OTORGAMIENTO)\b/;
const OWN_MONEY_WORDS =
  /\b(FONDOS? MUTUOS?|RESCATE|TRASPASO|ENTRE CUENTAS|CUENTAS? PROPIAS?|DESDE (LA |SU )?CUENTA|AHORRO PROGRAMADO|DEPOSITO A PLAZO|PAGO (DE )?TARJETA)\b/;

/** Upper case, no accents, letters and digits only, single spaces. */
export function normaliseText(text: string): string {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toUpperCase()
    .replace(/[^A-Z0-9]+/g, ' ')
    .trim();
}

/** A description without its variable parts (numbers, dates, references), to group payments by it. */
export function normaliseDescription(description: string): string {
  return normaliseText(description)
    .split(' ')
    .filter((word) => word !== '' && !/\d/.test(word))
    .join(' ');
}

function normaliseRut(rut: string): string {
  return rut
    .replace(/[^0-9kK]/g, '')
    .toUpperCase()
    .replace(/^0+/, '');
}

/** The rules that look at one movement alone; `null` when it may be income. */
export function exclusionOf(
  movement: IncomeMovement,
  currency: string,
  ownNames: ReadonlySet<string>,
): Exclusion | null {
  if (!(movement.amount > 0)) return 'not_inflow';
  if (movement.currency !== currency) return 'other_currency';
  if (movement.pending || movement.status !== 'normal') return 'not_booked';
  // Money into a card pays it off (from the holder's own account) or refunds a purchase.
  if (movement.accountType === 'credit_card') return 'credit_card';
  if (REFUND_TYPES.has(movement.type)) return 'refund';
  const text = normaliseText(movement.description);
  if (REVERSAL_WORDS.test(text)) return 'reversal';
  if (movement.type !== 'salary' && CREDIT_WORDS.test(text)) return 'credit';
  if (movement.type !== 'salary' && OWN_MONEY_WORDS.test(text)) return 'own_money';
  if (movement.counterparty && ownNames.has(normaliseText(movement.counterparty.name))) return 'own_account';
  return null;
}

export interface Qualified {
  income: IncomeMovement[];
  excluded: Map<string, Exclusion>;
}

/**
 * The inflows that count as income. Besides the single-movement rules, two pairings:
 * - an inflow with the `reference_id` of an outflow of the same amount on the same account offsets it
 *   (a reversal the bank did not label);
 * - an inflow matched by an outflow of the same amount on another account of the link within
 *   `internalTransferDays` is a transfer between the holder's own accounts. Salaries, interest and inflows
 *   from a named third party are never matched: a salary that happens to equal a transfer out stays income.
 */
export function qualifyInflows(
  movements: readonly IncomeMovement[],
  currency: string,
  ownNames: Iterable<string>,
): Qualified {
  const own = new Set([...ownNames].map(normaliseText).filter((name) => name !== ''));
  const excluded = new Map<string, Exclusion>();
  const candidates: IncomeMovement[] = [];
  for (const movement of movements) {
    const reason = exclusionOf(movement, currency, own);
    if (reason) excluded.set(movement.id, reason);
    else candidates.push(movement);
  }

  const outflowsByAmount = new Map<number, IncomeMovement[]>();
  for (const movement of movements) {
    if (
      movement.amount < 0 &&
      movement.currency === currency &&
      !movement.pending &&
      movement.status === 'normal'
    ) {
      const list = outflowsByAmount.get(-movement.amount) ?? [];
      list.push(movement);
      outflowsByAmount.set(-movement.amount, list);
    }
  }
  const used = new Set<string>();
  const income: IncomeMovement[] = [];
  for (const inflow of [...candidates].sort((a, b) => a.postedAt - b.postedAt || (a.id < b.id ? -1 : 1))) {
    const outflows = (outflowsByAmount.get(inflow.amount) ?? []).filter((o) => !used.has(o.id));
    const offset =
      inflow.referenceId !== null &&
      outflows.find((o) => o.accountId === inflow.accountId && o.referenceId === inflow.referenceId);
    if (offset) {
      used.add(offset.id);
      excluded.set(inflow.id, 'reversal');
      continue;
    }
    if (!EARNED_TYPES.has(inflow.type) && !inflow.counterparty) {
      const window = T.internalTransferDays * DAY_MS;
      const pair = outflows
        .filter((o) => o.accountId !== inflow.accountId && Math.abs(o.postedAt - inflow.postedAt) <= window)
        .sort((a, b) => Math.abs(a.postedAt - inflow.postedAt) - Math.abs(b.postedAt - inflow.postedAt))[0];
      if (pair) {
        used.add(pair.id);
        excluded.set(inflow.id, 'internal_transfer');
        continue;
      }
    }
    income.push(inflow);
  }
  return { income, excluded };
}

// ---------------------------------------------------------------------------------------------------------
// Sources

/** One payday of a source: its movements on one UTC day, summed (a salary split in two is one payday). */
export interface Payment {
  day: number;
  postedAt: number;
  amount: number;
}

export interface SourceGroup {
  key: string;
  name: string;
  rut: string | null;
  payments: Payment[];
  movements: IncomeMovement[];
}

/**
 * Who paid: the counterparty's RUT when the bank gives one, else its name, else the description without
 * its numbers (`ABONO REMUNERACIONES ACME 0425` and `... 0525` are one source).
 */
export function sourceKey(movement: IncomeMovement): string {
  const party = movement.counterparty;
  if (party?.rut && normaliseRut(party.rut) !== '') return `rut:${normaliseRut(party.rut)}`;
  if (party?.name && normaliseText(party.name) !== '') return `name:${normaliseText(party.name)}`;
  return `desc:${normaliseDescription(movement.description)}`;
}

export function groupBySource(income: readonly IncomeMovement[]): SourceGroup[] {
  const groups = new Map<string, SourceGroup>();
  const ordered = [...income].sort((a, b) => a.postedAt - b.postedAt || (a.id < b.id ? -1 : 1));
  for (const movement of ordered) {
    const key = sourceKey(movement);
    const group = groups.get(key) ?? { key, name: '', rut: null, payments: [], movements: [] };
    // The latest movement names the source (a company may change how it writes its name).
    group.name = movement.counterparty?.name?.trim() || normaliseDescription(movement.description);
    group.rut = movement.counterparty?.rut ?? group.rut;
    group.movements.push(movement);
    const day = dayNumber(movement.postedAt);
    const last = group.payments.at(-1);
    if (last && last.day === day) {
      last.amount += movement.amount;
      last.postedAt = movement.postedAt;
    } else group.payments.push({ day, postedAt: movement.postedAt, amount: movement.amount });
    groups.set(key, group);
  }
  return [...groups.values()];
}

// ---------------------------------------------------------------------------------------------------------
// Schedule and regularity

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export interface Schedule {
  frequency: Frequency;
  /** The typical gap in days (the median on-schedule gap), or 0 when there are too few paydays. */
  periodDays: number;
  /** Share of the expected paydays that came on schedule, 0..1. */
  timing: number;
}

/**
 * The schedule of a source from its paydays (UTC day numbers). The median gap picks the nearest standard
 * schedule. Each gap stands for `k = round(gap / period)` expected paydays (at least 1); its payday came on
 * schedule when `gap / k` is inside the schedule's band, so a payday after a missed one still counts and
 * the missed one does not. `timing` = on-schedule paydays / expected paydays: one missed month out of six
 * gives 4/5 = 0.8, an extra payment in one month (two gaps of 15 days) gives 4/6 = 0.67. Below
 * `minScheduleTiming` the source is `irregular`.
 */
export function detectSchedule(days: readonly number[]): Schedule {
  const sorted = [...new Set(days)].sort((a, b) => a - b);
  if (sorted.length < T.minOccurrences) return { frequency: 'irregular', periodDays: 0, timing: 0 };
  const gaps = sorted.slice(1).map((day, i) => day - sorted[i]!);
  const typical = median(gaps);
  const [name, band] = (
    Object.entries(T.schedules) as [Scheduled, { days: number; min: number; max: number }][]
  )
    .map((entry) => [entry, Math.abs(Math.log(typical / entry[1].days))] as const)
    .sort((a, b) => a[1] - b[1])[0]![0];
  const inBand = (gap: number) => gap >= band.min && gap <= band.max;
  const single = gaps.filter(inBand);
  const periodDays = single.length ? median(single) : band.days;
  let expected = 0;
  let onSchedule = 0;
  for (const gap of gaps) {
    const k = Math.max(1, Math.round(gap / periodDays));
    expected += k;
    if (inBand(gap / k)) onSchedule += 1;
  }
  const timing = onSchedule / expected;
  return { frequency: timing >= T.minScheduleTiming ? name : 'irregular', periodDays, timing };
}

/**
 * How stable the amounts are, 0..1, from their relative median absolute deviation: a spread within
 * `amountTolerance` (±5%) is 1, `amountSpreadAtZero` (50%) or more is 0, linear in between. The median
 * keeps one bonus month from spoiling a steady salary.
 */
export function amountStability(amounts: readonly number[]): number {
  if (amounts.length === 0) return 0;
  const middle = median(amounts);
  if (!(middle > 0)) return 0;
  const spread = median(amounts.map((amount) => Math.abs(amount - middle))) / middle;
  return clamp01(1 - (spread - T.amountTolerance) / (T.amountSpreadAtZero - T.amountTolerance));
}

function clamp01(value: number): number {
  return Math.min(1, Math.max(0, value));
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/** Regularity 0..1: how reliably the source paid on schedule, times how stable its amount was. */
export function regularityOf(schedule: Schedule, amounts: readonly number[]): number {
  if (schedule.periodDays === 0) return 0;
  return round2(schedule.timing * amountStability(amounts));
}

// ---------------------------------------------------------------------------------------------------------
// The snapshot

export interface IncomeSource {
  source: string;
  source_rut: string | null;
  average_amount: number;
  frequency: Frequency;
  regularity: number;
  last_seen: string;
  occurrences: number;
}

export interface DescribedSource {
  key: string;
  public: IncomeSource;
  total: number;
  recurring: boolean;
  current: boolean;
  movementIds: Set<string>;
}

/**
 * Each source's figures over the detection period, and whether it is recurring (a schedule, regularity of
 * at least `minRecurringRegularity`, at least `minSourceShare` of the income) and current (last paid within
 * `currentWithinPeriods` periods of `asOf`).
 */
export function describeSources(groups: readonly SourceGroup[], asOf: number): DescribedSource[] {
  const allIncome = groups.reduce((sum, g) => sum + g.payments.reduce((s, p) => s + p.amount, 0), 0);
  return groups.map((group) => {
    const amounts = group.payments.map((p) => p.amount);
    const total = amounts.reduce((sum, amount) => sum + amount, 0);
    const schedule = detectSchedule(group.payments.map((p) => p.day));
    const regularity = regularityOf(schedule, amounts);
    const last = group.payments.at(-1)!;
    const recurring =
      schedule.frequency !== 'irregular' &&
      regularity >= T.minRecurringRegularity &&
      total >= T.minSourceShare * allIncome;
    const current = dayNumber(asOf) - last.day <= T.currentWithinPeriods * (schedule.periodDays || 0);
    return {
      key: group.key,
      total,
      recurring,
      current: recurring && current,
      movementIds: new Set(group.movements.map((m) => m.id)),
      public: {
        source: group.name,
        source_rut: group.rut,
        average_amount: Math.round(total / amounts.length),
        frequency: schedule.frequency,
        regularity,
        last_seen: isoDay(last.postedAt),
        occurrences: group.payments.length,
      },
    };
  });
}

/** Largest total first, then the more regular, the more recent, and the key, so the order is stable. */
function byWeight(a: DescribedSource, b: DescribedSource): number {
  return (
    b.total - a.total ||
    b.public.regularity - a.public.regularity ||
    b.public.last_seen.localeCompare(a.public.last_seen) ||
    (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
  );
}

/**
 * The main income is the current recurring source with the largest total; a recurring source that stopped
 * paying (a previous employer) is listed among the others but never main, so a lender never reads a lost
 * job as today's income. Irregular sources count in the totals only.
 */
export function pickMain(sources: readonly DescribedSource[]): {
  main: DescribedSource | null;
  others: DescribedSource[];
} {
  const recurring = sources.filter((s) => s.recurring).sort(byWeight);
  const main = recurring.find((s) => s.current) ?? null;
  return { main, others: recurring.filter((s) => s !== main) };
}

export interface MonthlyTotal {
  month: string;
  income: number;
  recurring_income: number;
  /** Whether the link's stored history covers the month (a zero before it is "no data", not "no income"). */
  covered: boolean;
}

export interface SnapshotInput {
  movements: readonly IncomeMovement[];
  currency: string;
  months: number;
  now: number;
  /** The holder's names (link and accounts): money from them is the holder's own. */
  ownNames: Iterable<string>;
  /** The earliest `posted_at` stored for the link, any account; null when it has none. */
  historyStart: number | null;
}

export interface Snapshot {
  window: { from: string; to: string };
  main_income: IncomeSource | null;
  other_recurring_income: IncomeSource[];
  monthly_totals: MonthlyTotal[];
  averages: { monthly_income: number; monthly_recurring_income: number; months_counted: number };
}

export function incomeSnapshot(input: SnapshotInput): Snapshot {
  const window = incomeWindow(input.now, input.months);
  // Inflows of the detection period; outflows from anywhere given, so one just outside still pairs.
  const { income } = qualifyInflows(
    input.movements.filter(
      (m) => m.amount < 0 || (m.postedAt >= window.detectionFrom && m.postedAt <= window.to),
    ),
    input.currency,
    input.ownNames,
  );
  const sources = describeSources(groupBySource(income), window.to);
  const { main, others } = pickMain(sources);
  const recurringIds = new Set<string>();
  for (const source of sources)
    if (source.recurring) for (const id of source.movementIds) recurringIds.add(id);

  const totals: MonthlyTotal[] = [];
  for (let month = window.firstMonth; month <= window.lastMonth; month++) {
    const covered =
      input.historyStart !== null && input.historyStart <= monthStart(month) + T.historyGraceDays * DAY_MS;
    totals.push({ month: monthLabel(month), income: 0, recurring_income: 0, covered });
  }
  for (const movement of income) {
    if (movement.postedAt < window.from || movement.postedAt > window.to) continue;
    const entry = totals[monthIndex(movement.postedAt) - window.firstMonth]!;
    entry.income += movement.amount;
    if (recurringIds.has(movement.id)) entry.recurring_income += movement.amount;
  }
  const counted = totals.filter((t) => t.covered);
  const average = (pick: (t: MonthlyTotal) => number) =>
    counted.length ? Math.round(counted.reduce((sum, t) => sum + pick(t), 0) / counted.length) : 0;

  return {
    window: { from: isoDay(window.from), to: isoDay(window.to) },
    main_income: main?.public ?? null,
    other_recurring_income: others.map((s) => s.public),
    monthly_totals: totals,
    averages: {
      monthly_income: average((t) => t.income),
      monthly_recurring_income: average((t) => t.recurring_income),
      months_counted: counted.length,
    },
  };
}
