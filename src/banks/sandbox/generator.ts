import type { BankMovement, MovementType } from '../connector.js';
import {
  DAY_MS,
  dayOf,
  dayOfMonth,
  dayStart,
  firstDayOfMonth,
  isoDate,
  isWorkingDay,
  lastWorkingDayOfMonth,
  monthOf,
} from './calendar.js';
import {
  CITIES,
  FOREIGN_MERCHANTS,
  INSURERS,
  MERCHANTS,
  companyName,
  companyRut,
  personName,
  personRut,
} from './names.js';
import { hash32, mixSeed, mulberry32, rngFor, type Rng } from './prng.js';
import type { AccountSpec, Party, Profile } from './profile.js';
import { CREDENTIAL_BANK_IDS } from '../institutions.js';

/**
 * The sandbox's movements, generated one UTC day at a time. Each transaction is a function of the account
 * and the day it started on (its "origin day"), never of the window being asked for, so every window that
 * covers a transaction returns it identically. A few transactions produce a row on a later day (a card
 * purchase posts 2 days later, a reversal lands the next day); a window is therefore generated from
 * `MAX_SHIFT_DAYS` before its start and filtered on `postedAt`.
 */

/** No sandbox account has movements before this instant; balances are opening balances at it. */
export const HISTORY_START = Date.UTC(2020, 0, 1);
/** `listMovements` reaches back this far from `now`; older rows come only from `statements`. */
export const MOVEMENTS_REACH_MS = 90 * DAY_MS;
/** A card purchase is pending for this long, then posted with `postedAt` moved forward by as much. */
export const PENDING_DAYS = 2;
/** Duplicates: one day in each block of this many days (aligned on days since 1970) repeats a transfer. */
export const DUPLICATE_BLOCK_DAYS = 15;
/** Reversal pairs: one day in each block of this many days has a charge that is reversed the next day. */
export const REVERSAL_BLOCK_DAYS = 20;
const MAX_SHIFT_DAYS = PENDING_DAYS + 1;
const HISTORY_START_DAY = dayOf(HISTORY_START);

export interface Row {
  movement: BankMovement;
  /** For a pending row: the instant it posts; from then on only its posted row is returned. */
  postsAt: number | null;
  /** The second report of a duplicated movement: returned, but not counted in the balance. */
  repeat: boolean;
}

/**
 * Per-call memo (never module state): card statement amounts by month, counterparties by pool slot and
 * monthly running sums, all pure functions of the profile, kept only for the length of one connector call.
 */
export interface GenerationContext {
  profile: Profile;
  statementByMonth: Map<number, number>;
  parties: Map<string, Party>;
  /** `<ref>|<month>` → sum of the account's posted movements before that month began. */
  postedBefore: Map<string, number>;
}

export function generationContext(profile: Profile): GenerationContext {
  return { profile, statementByMonth: new Map(), parties: new Map(), postedBefore: new Map() };
}

/** Salts that keep the duplicate and reversal day choices of an account independent. */
const Label = { Duplicate: 1, Reversal: 2 } as const;
type Label = (typeof Label)[keyof typeof Label];

/** The draws of one account on one day. */
function dayRng(spec: AccountSpec, day: number): Rng {
  return mulberry32(mixSeed(spec.seedHash, day));
}

interface Draft {
  at: number;
  amount: number;
  description: string;
  type: MovementType;
  counterparty?: BankMovement['counterparty'];
}

/** Collects one origin day's rows and numbers its referenceIds: `<account code><YYYYMMDD><nn>`. */
class DayRows {
  readonly rows: Row[] = [];
  private index = 0;
  constructor(
    private readonly spec: AccountSpec,
    readonly day: number,
  ) {}

  nextReferenceId(): string {
    const n = String(this.index++).padStart(2, '0');
    return `${this.spec.code}${isoDate(this.day).replaceAll('-', '')}${n}`;
  }

  movement(
    draft: Draft,
    referenceId: string,
    ref: string,
    pending: boolean,
    transactionDay: number,
  ): BankMovement {
    const party = draft.counterparty ?? null;
    return {
      ref,
      amount: draft.amount,
      currency: this.spec.currency,
      description: draft.description,
      type: draft.type,
      referenceId,
      counterparty: party && {
        name: party.name,
        rut: party.rut,
        bankId: party.bankId,
        accountLast4: party.accountLast4,
      },
      postedAt: draft.at,
      transactionDate: isoDate(transactionDay),
      pending,
    };
  }

  /** An ordinary booked movement. */
  posted(draft: Draft): string {
    const referenceId = this.nextReferenceId();
    this.rows.push({
      movement: this.movement(draft, referenceId, `M-${referenceId}`, false, this.day),
      postsAt: null,
      repeat: false,
    });
    return referenceId;
  }

  /** A movement the bank reports twice: two refs, everything else identical. */
  duplicated(draft: Draft): void {
    const referenceId = this.posted(draft);
    this.rows.push({
      movement: this.movement(draft, referenceId, `M-${referenceId}-2`, false, this.day),
      postsAt: null,
      repeat: true,
    });
  }

  /** A charge today and its reversal (`REVERSO ...`, opposite amount, same referenceId) at `reversalAt`. */
  reversed(draft: Draft, reversalAt: number): void {
    const referenceId = this.posted(draft);
    const reversal = {
      ...draft,
      at: reversalAt,
      amount: -draft.amount,
      description: `REVERSO ${draft.description}`,
    };
    this.rows.push({
      movement: this.movement(reversal, referenceId, `M-${referenceId}-R`, false, dayOf(reversalAt)),
      postsAt: null,
      repeat: false,
    });
  }

  /**
   * A card purchase: a pending row (`P-...`) at the purchase time until it posts `PENDING_DAYS` later, then
   * a posted row (`M-...`) with `postedAt` at the posting time. Both keep the purchase day as
   * `transactionDate` and share the referenceId.
   */
  cardPurchase(draft: Draft): void {
    const referenceId = this.nextReferenceId();
    const postsAt = draft.at + PENDING_DAYS * DAY_MS;
    this.rows.push({
      movement: this.movement(draft, referenceId, `P-${referenceId}`, true, this.day),
      postsAt,
      repeat: false,
    });
    this.rows.push({
      movement: this.movement({ ...draft, at: postsAt }, referenceId, `M-${referenceId}`, false, this.day),
      postsAt: null,
      repeat: false,
    });
  }
}

/** A minute between `fromHour` and `toHour` (UTC) of the day. */
function timeOn(day: number, rng: Rng, fromHour: number, toHour: number): number {
  return dayStart(day) + (fromHour * 60 + rng.int(0, (toHour - fromHour) * 60 - 1)) * 60_000;
}

function roundTo(value: number, step: number): number {
  return Math.max(step, Math.round(value / step) * step);
}

/** Whether `day` is the day of its block (blocks of `size` days since 1970) picked for an event. */
function isChosenDay(spec: AccountSpec, label: Label, size: number, day: number): boolean {
  const block = Math.floor(day / size);
  return block * size + (mixSeed(spec.seedHash, label, block) % size) === day;
}

/** A stable pool of counterparties per owner, so the same names recur as they do in a real account. */
function party(context: GenerationContext, pool: 'contact' | 'customer' | 'supplier', index: number): Party {
  const key = `${pool}|${index}`;
  const cached = context.parties.get(key);
  if (cached) return cached;
  const rng = rngFor(pool, context.profile.ownerRut, index);
  const isPerson = pool === 'contact';
  const made = {
    name: isPerson ? personName(rng) : companyName(rng),
    rut: isPerson ? personRut(rng) : companyRut(rng),
    bankId: rng.pick(CREDENTIAL_BANK_IDS),
    accountLast4: String(rng.int(0, 9999)).padStart(4, '0'),
  };
  context.parties.set(key, made);
  return made;
}

/** The salary of month `month` (months since 1970-01): the base amount within ±2%, stable per RUT. */
export function salaryAmount(profile: Profile, month: number): number {
  return Math.round(profile.monthlyIncome * (0.98 + rngFor('salary', profile.ownerRut, month).next() * 0.04));
}

/** Spending scale: card and checking amounts grow with the holder's income. */
function spendingScale(profile: Profile): number {
  return profile.holder.holderType === 'business'
    ? profile.monthlyIncome / 15_000_000
    : profile.monthlyIncome / 1_800_000;
}

function cardOf(profile: Profile): AccountSpec {
  const card = profile.accounts.find((account) => account.kind === 'card');
  if (!card) throw new Error('sandbox profile without a card');
  return card;
}

/** Every row that starts on `day`, in a fixed order. */
export function rowsOfDay(context: GenerationContext, spec: AccountSpec, day: number): Row[] {
  if (day < HISTORY_START_DAY) return [];
  const out = new DayRows(spec, day);
  const rng = dayRng(spec, day);
  if (SWEPT_KINDS.has(spec.kind) && dayOfMonth(day) === 1) sweep(context, spec, out, rng);
  switch (spec.kind) {
    case 'checking':
      checkingDay(context, spec, out, rng);
      break;
    case 'card':
      cardCharges(context.profile, spec, out, rng);
      cardPayment(context, spec, out, rng);
      break;
    case 'savings':
      savingsDay(context.profile, spec, out, rng);
      break;
    case 'usd':
      usdDay(context.profile, out, rng);
      break;
    case 'vista':
      vistaDay(context, out, rng);
      break;
    case 'vivienda':
      viviendaDay(spec, out, rng);
      break;
  }
  return out.rows;
}

/**
 * The accounts whose balance would otherwise wander (their daily movements are independent draws, so the
 * balance is a random walk: in a first version half the individual checking accounts ended six years
 * negative). On the 1st of each month a mutual-fund sweep brings a balance above 1.6x its target back to
 * the target, and one below the target up to it.
 */
const SWEPT_KINDS: ReadonlySet<AccountSpec['kind']> = new Set(['checking', 'usd', 'vista']);

export function sweepTarget(profile: Profile, spec: AccountSpec): number {
  const u = rngFor(spec.seed, 'target').next();
  switch (spec.kind) {
    case 'usd':
      return Math.round(2_000 + u * 4_000) * 100;
    case 'vista':
      return Math.round(300 + u * 700) * 1_000;
    default:
      return (
        Math.round(
          (profile.monthlyIncome * (profile.holder.holderType === 'business' ? 1 + u : 1.2 + u * 0.8)) /
            1_000,
        ) * 1_000
      );
  }
}

function sweep(context: GenerationContext, spec: AccountSpec, out: DayRows, rng: Rng): void {
  const target = sweepTarget(context.profile, spec);
  const balance = spec.opening + postedBefore(context, spec, monthOf(out.day));
  const step = spec.currency === 'USD' ? 100 : 1_000;
  const at = timeOn(out.day, rng, 1, 3);
  if (balance > target * 1.6) {
    const amount = Math.floor((balance - target) / step) * step;
    out.posted({ at, amount: -amount, description: 'INVERSION FONDO MUTUO', type: 'transfer' });
  } else if (balance < target) {
    const amount = Math.ceil((target - balance) / step) * step;
    out.posted({ at, amount, description: 'RESCATE FONDO MUTUO', type: 'transfer' });
  }
}

/**
 * The sum of the account's posted movements booked before `month` began (a repeated report counted
 * once), computed month by month from `HISTORY_START` and memoised in the context: a month's sweep needs
 * the previous month's closing balance, which needs that month's sweep, and so on back to the start.
 */
export function postedBefore(context: GenerationContext, spec: AccountSpec, month: number): number {
  const startMonth = monthOf(HISTORY_START_DAY);
  const key = (m: number): string => `${spec.ref}|${m}`;
  let m = month;
  while (m > startMonth && !context.postedBefore.has(key(m))) m -= 1;
  let total = m > startMonth ? (context.postedBefore.get(key(m)) ?? 0) : 0;
  for (m = Math.max(m, startMonth); m < month; m++) {
    const from = dayStart(firstDayOfMonth(m));
    const to = dayStart(firstDayOfMonth(m + 1));
    total += sumPosted(context, spec, from, to);
    context.postedBefore.set(key(m + 1), total);
  }
  return total;
}

/** The sum of posted rows (no pending row, no repeated report) with `postedAt` in [from, to). */
function sumPosted(context: GenerationContext, spec: AccountSpec, from: number, to: number): number {
  let total = 0;
  for (let day = dayOf(from) - MAX_SHIFT_DAYS; day <= dayOf(to - 1); day++)
    for (const row of rowsOfDay(context, spec, day)) {
      const m = row.movement;
      if (row.postsAt === null && !row.repeat && m.postedAt >= from && m.postedAt < to) total += m.amount;
    }
  return total;
}

function checkingDay(context: GenerationContext, spec: AccountSpec, out: DayRows, rng: Rng): void {
  const { profile } = context;
  const day = out.day;
  const month = monthOf(day);
  const dom = dayOfMonth(day);
  const income = profile.monthlyIncome;
  const business = profile.holder.holderType === 'business';

  if (dom === 1) {
    const fee = (4_900 + (hash32(spec.seed, 'fee') % 6) * 1_000) * (business ? 3 : 1);
    out.posted({
      at: timeOn(day, rng, 4, 6),
      amount: -fee,
      description: 'COMISION MANTENCION CUENTA CORRIENTE',
      type: 'fee',
    });
  }
  if (dom === 5) {
    const card = cardOf(profile);
    const amount = cardStatement(context, card, month - 1);
    if (amount > 0)
      out.posted({
        at: timeOn(day, rng, 9, 12),
        amount: -amount,
        description: `PAGO TARJETA DE CREDITO ${card.last4}`,
        type: 'transfer',
        counterparty: {
          name: profile.holderName,
          rut: profile.ownerRut,
          bankId: profile.holder.bankId,
          accountLast4: card.last4,
        },
      });
  }

  if (business) {
    if (isWorkingDay(day)) {
      const payments = rng.chance(0.5) ? (rng.chance(0.3) ? 2 : 1) : 0;
      for (let i = 0; i < payments; i++) {
        const customer = party(context, 'customer', rng.int(0, 11));
        const amount = roundTo(income * (0.03 + rng.next() * 0.08), 1);
        out.posted({
          at: timeOn(day, rng, 9, 19),
          amount,
          description: `TRANSFERENCIA DE ${customer.name}`,
          type: 'transfer',
          counterparty: customer,
        });
      }
      if (rng.chance(0.4)) {
        const supplier = party(context, 'supplier', rng.int(0, 9));
        const amount = roundTo(income * (0.02 + rng.next() * 0.06), 1);
        out.posted({
          at: timeOn(day, rng, 9, 19),
          amount: -amount,
          description: `TRANSFERENCIA A ${supplier.name}`,
          type: 'transfer',
          counterparty: supplier,
        });
      }
    }
    if (day === lastWorkingDayOfMonth(month)) {
      const payroll = Math.round(income * 0.3 * (0.98 + rngFor(spec.seed, 'payroll', month).next() * 0.04));
      out.posted({
        at: timeOn(day, rng, 8, 10),
        amount: -payroll,
        description: 'PAGO REMUNERACIONES',
        type: 'transfer',
      });
    }
    if (dom === 12) {
      const tax = Math.round(income * (0.06 + rngFor(spec.seed, 'tax', month).next() * 0.04));
      out.posted({
        at: timeOn(day, rng, 9, 18),
        amount: -tax,
        description: 'PAGO F29 TESORERIA GENERAL DE LA REPUBLICA',
        type: 'other',
      });
    }
  } else {
    if (day === lastWorkingDayOfMonth(month) && profile.employer) {
      const employer = profile.employer;
      out.posted({
        at: timeOn(day, rng, 8, 11),
        amount: salaryAmount(profile, month),
        description: `ABONO REMUNERACIONES ${employer.name.toUpperCase()}`,
        type: 'salary',
        counterparty: employer,
      });
    }
    everydayDraws(context, out, rng);
  }

  if (isChosenDay(spec, Label.Duplicate, DUPLICATE_BLOCK_DAYS, day)) {
    const payee = business
      ? party(context, 'supplier', rng.int(0, 9))
      : party(context, 'contact', rng.int(0, 9));
    const amount = roundTo(income * (0.01 + rng.next() * 0.03), 100);
    out.duplicated({
      at: timeOn(day, rng, 9, 20),
      amount: -amount,
      description: `TRANSFERENCIA A ${payee.name}`,
      type: 'transfer',
      counterparty: payee,
    });
  }
  if (isChosenDay(spec, Label.Reversal, REVERSAL_BLOCK_DAYS, day)) {
    const amount = roundTo(rng.int(8_000, 45_000) * (business ? 3 : 1), 10);
    out.reversed(
      {
        at: timeOn(day, rng, 6, 10),
        amount: -amount,
        description: `CARGO PAC ${rng.pick(INSURERS)}`,
        type: 'other',
      },
      timeOn(day + 1, rng, 10, 16),
    );
  }
}

/**
 * An individual's everyday checking rows of a day: transfers to and from contacts, ATM withdrawals.
 * `activity` rounds of the same draws (one for everyone but a busy holder), each round's amounts that
 * fraction of the usual, so a busy holder's month moves as much money in more rows.
 */
function everydayDraws(context: GenerationContext, out: DayRows, rng: Rng): void {
  const { profile } = context;
  const day = out.day;
  const income = profile.monthlyIncome / profile.activity;
  const scale = spendingScale(profile) / profile.activity;
  for (let round = 0; round < profile.activity; round++) {
    if (rng.chance(0.3)) {
      const contact = party(context, 'contact', rng.int(0, 9));
      const amount = roundTo(income * (0.02 + rng.next() * 0.08), 100);
      out.posted({
        at: timeOn(day, rng, 8, 23),
        amount: -amount,
        description: `TRANSFERENCIA A ${contact.name}`,
        type: 'transfer',
        counterparty: contact,
      });
    }
    if (rng.chance(0.06)) {
      const contact = party(context, 'contact', rng.int(0, 9));
      const amount = roundTo(income * (0.01 + rng.next() * 0.07), 100);
      out.posted({
        at: timeOn(day, rng, 8, 23),
        amount,
        description: `TRANSFERENCIA DE ${contact.name}`,
        type: 'transfer',
        counterparty: contact,
      });
    }
    if (rng.chance(0.1)) {
      const amount = roundTo(rng.pick([20_000, 40_000, 50_000, 60_000, 100_000, 200_000]) * scale, 10_000);
      out.posted({
        at: timeOn(day, rng, 7, 23),
        amount: -amount,
        description: `GIRO CAJERO AUTOMATICO ${rng.pick(CITIES)}`,
        type: 'withdrawal',
      });
    }
  }
}

/** Purchases and fees of a card on one day (not its payment, which depends on the previous month). */
function cardCharges(profile: Profile, spec: AccountSpec, out: DayRows, rng: Rng): void {
  const day = out.day;
  const business = profile.holder.holderType === 'business';
  if (dayOfMonth(day) === 1) {
    const fee = 2_990 + (hash32(spec.seed, 'fee') % 3) * 1_000;
    out.posted({
      at: timeOn(day, rng, 3, 5),
      amount: -fee,
      description: 'COMISION ADMINISTRACION TARJETA',
      type: 'fee',
    });
  }
  // A busy holder (profile.activity > 1) draws the day's purchases that many times, each smaller.
  const scale = spendingScale(profile) / profile.activity;
  for (let round = 0; round < profile.activity; round++) {
    const purchases = (rng.chance(business ? 0.4 : 0.45) ? 1 : 0) + (rng.chance(0.15) ? 1 : 0);
    for (let i = 0; i < purchases; i++) {
      const merchant = rng.pick(MERCHANTS);
      const amount = roundTo(rng.int(merchant.min, merchant.max) * scale, 10);
      out.cardPurchase({
        at: timeOn(day, rng, 10, 23),
        amount: -amount,
        description: `${merchant.name} ${rng.pick(CITIES)}`,
        type: 'card_purchase',
      });
    }
  }
}

/** On the 5th the holder pays what the card booked (posted) in the previous calendar month. */
function cardPayment(context: GenerationContext, spec: AccountSpec, out: DayRows, rng: Rng): void {
  const day = out.day;
  if (dayOfMonth(day) !== 5) return;
  const amount = cardStatement(context, spec, monthOf(day) - 1);
  if (amount > 0)
    out.posted({
      at: timeOn(day, rng, 9, 12),
      amount,
      description: 'PAGO TARJETA - GRACIAS',
      type: 'transfer',
    });
}

/** What the card booked in `month`: the sum of its posted charges, as a positive amount. */
export function cardStatement(context: GenerationContext, card: AccountSpec, month: number): number {
  const cached = context.statementByMonth.get(month);
  if (cached !== undefined) return cached;
  const first = firstDayOfMonth(month);
  const last = firstDayOfMonth(month + 1) - 1;
  let total = 0;
  for (let day = first - MAX_SHIFT_DAYS; day <= last; day++) {
    if (day < HISTORY_START_DAY) continue;
    const out = new DayRows(card, day);
    cardCharges(context.profile, card, out, dayRng(card, day));
    for (const row of out.rows) {
      const m = row.movement;
      if (!m.pending && m.amount < 0 && dayOf(m.postedAt) >= first && dayOf(m.postedAt) <= last)
        total -= m.amount;
    }
  }
  context.statementByMonth.set(month, total);
  return total;
}

function savingsDay(profile: Profile, spec: AccountSpec, out: DayRows, rng: Rng): void {
  const day = out.day;
  const month = monthOf(day);
  const dom = dayOfMonth(day);
  if (dom === 1) {
    const interest = rngFor(spec.seed, 'interest', month).int(500, 5_000);
    out.posted({
      at: timeOn(day, rng, 2, 4),
      amount: interest,
      description: 'INTERESES GANADOS',
      type: 'interest',
    });
  }
  if (dom === 6) {
    const monthly = rngFor(spec.seed, 'deposit', month);
    if (monthly.chance(0.7)) {
      const amount = roundTo(profile.monthlyIncome * (0.03 + monthly.next() * 0.07), 1_000);
      out.posted({
        at: timeOn(day, rng, 9, 18),
        amount,
        description: 'DEPOSITO DESDE CUENTA CORRIENTE',
        type: 'deposit',
      });
    }
  }
  if (rng.chance(0.008)) {
    const amount = rng.int(50, 400) * 1_000;
    out.posted({
      at: timeOn(day, rng, 9, 21),
      amount: -amount,
      description: 'RETIRO A CUENTA CORRIENTE',
      type: 'transfer',
    });
  }
}

/** A USD account: amounts in cents, with cents. */
function usdDay(profile: Profile, out: DayRows, rng: Rng): void {
  const day = out.day;
  const business = profile.holder.holderType === 'business';
  if (dayOfMonth(day) === 1)
    out.posted({
      at: timeOn(day, rng, 3, 5),
      amount: business ? -1_500 : -500,
      description: 'COMISION MANTENCION CUENTA USD',
      type: 'fee',
    });
  if (rng.chance(0.02)) {
    const payer = `${rng.pick(['ACME TRADING', 'NORTHWIND', 'GLOBEX', 'INITECH'])} LLC`;
    out.posted({
      at: timeOn(day, rng, 12, 20),
      amount: rng.int(15_000, 300_000),
      description: `TRANSFERENCIA RECIBIDA DEL EXTERIOR ${payer}`,
      type: 'transfer',
      counterparty: { name: payer, rut: null, bankId: null, accountLast4: null },
    });
  }
  if (rng.chance(0.08))
    out.posted({
      at: timeOn(day, rng, 0, 23),
      amount: -rng.int(999, 40_000),
      description: `COMPRA INTERNACIONAL ${rng.pick(FOREIGN_MERCHANTS)}`,
      type: 'card_purchase',
    });
  if (rng.chance(0.01))
    out.posted({
      at: timeOn(day, rng, 9, 18),
      amount: -rng.int(20_000, 150_000),
      description: 'TRASPASO A CUENTA CORRIENTE PESOS',
      type: 'transfer',
    });
}

function vistaDay(context: GenerationContext, out: DayRows, rng: Rng): void {
  const day = out.day;
  if (rng.chance(0.05)) {
    const contact = party(context, 'contact', rng.int(0, 9));
    out.posted({
      at: timeOn(day, rng, 8, 22),
      amount: roundTo(rng.int(5_000, 80_000), 100),
      description: `TRANSFERENCIA DE ${contact.name}`,
      type: 'transfer',
      counterparty: contact,
    });
  }
  if (rng.chance(0.12)) {
    const merchant = rng.pick(MERCHANTS);
    out.posted({
      at: timeOn(day, rng, 9, 22),
      amount: -roundTo(rng.int(2_000, 30_000), 10),
      description: `COMPRA REDCOMPRA ${merchant.name}`,
      type: 'card_purchase',
    });
  }
}

function viviendaDay(spec: AccountSpec, out: DayRows, rng: Rng): void {
  const day = out.day;
  const dom = dayOfMonth(day);
  if (dom === 1) {
    const interest = rngFor(spec.seed, 'interest', monthOf(day)).int(500, 5_000);
    out.posted({
      at: timeOn(day, rng, 2, 4),
      amount: interest,
      description: 'INTERESES GANADOS',
      type: 'interest',
    });
  }
  if (dom === 10) {
    const deposit = rngFor(spec.seed, 'deposit').int(5, 20) * 10_000;
    out.posted({
      at: timeOn(day, rng, 9, 12),
      amount: deposit,
      description: 'DEPOSITO AHORRO PROGRAMADO',
      type: 'deposit',
    });
  }
}

/**
 * The rows the bank shows at `now` with `postedAt` in [lower, upper): a pending row until it posts, its
 * posted row from then on. Sorted by `postedAt`, then `ref`.
 */
export function rowsBetween(
  context: GenerationContext,
  spec: AccountSpec,
  lower: number,
  upper: number,
  now: number,
): BankMovement[] {
  const start = Math.max(lower, HISTORY_START);
  const end = Math.min(upper, now);
  if (!(end > start)) return [];
  const movements: BankMovement[] = [];
  for (let day = dayOf(start) - MAX_SHIFT_DAYS; day <= dayOf(end - 1); day++) {
    for (const row of rowsOfDay(context, spec, day)) {
      const m = row.movement;
      if (m.postedAt < start || m.postedAt >= end) continue;
      if (row.postsAt !== null && now > row.postsAt) continue;
      movements.push(m);
    }
  }
  return movements.sort((a, b) => a.postedAt - b.postedAt || (a.ref ?? '').localeCompare(b.ref ?? ''));
}

/**
 * The account's balance at `now`: the opening balance plus every posted movement since `HISTORY_START`
 * (a repeated report counted once), and the sum of pending rows (card holds).
 */
export function balanceAt(
  context: GenerationContext,
  spec: AccountSpec,
  now: number,
): { posted: number; pending: number } {
  const month = monthOf(dayOf(now));
  const monthStart = dayStart(firstDayOfMonth(month));
  let posted = postedBefore(context, spec, month) + sumPosted(context, spec, monthStart, now);
  let pending = 0;
  for (let day = dayOf(now) - MAX_SHIFT_DAYS; day <= dayOf(now); day++)
    for (const row of rowsOfDay(context, spec, day)) {
      const m = row.movement;
      if (row.postsAt !== null && m.postedAt < now && now <= row.postsAt) pending += m.amount;
    }
  if (now <= HISTORY_START) posted = 0;
  return { posted, pending };
}
