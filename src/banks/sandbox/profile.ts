import type { AccountType, HolderType } from '../connector.js';
import { CREDENTIAL_BANK_IDS } from '../institutions.js';
import { companyName, companyRut, personName } from './names.js';
import { hash32, hashHex, rngFor } from './prng.js';

/**
 * Who a sandbox holder is and which accounts they have: a pure function of bank, holder type and RUTs.
 * A person's name, employer and salary depend on the RUT alone (the same person is the same at every
 * bank); a company's on `rutEmpresa` alone. Accounts depend on the bank too.
 */
export interface Holder {
  bankId: string;
  holderType: HolderType;
  /** Normalised RUT of the person logging in. */
  rut: string;
  /** Normalised company RUT, business holders only. */
  rutEmpresa: string | null;
}

export interface Party {
  name: string;
  rut: string;
  bankId: string;
  accountLast4: string;
}

export interface Profile {
  holder: Holder;
  /** The RUT the accounts belong to: `rut` for individuals, `rutEmpresa` for businesses. */
  ownerRut: string;
  holderName: string;
  /**
   * CLP a month: the salary of an individual (1,200,000 to 2,500,000 in steps of 1,000) or the sales of a
   * business (6 to 40 million).
   */
  monthlyIncome: number;
  /** The employer paying the salary; null for businesses. */
  employer: Party | null;
  /**
   * How many times a day's everyday draws run (an individual's checking transfers and withdrawals, card
   * purchases), each for that fraction of the usual amount: 1, or more for a busy holder (`BUSY_HOLDERS`).
   */
  activity: number;
  /** Every account the holder can ever have, present or not at a given point of the link's history. */
  accounts: AccountSpec[];
}

/**
 * `checking` and `card` always; `savings` and `usd` by RUT (see `hasSavings`, `hasUsd`); `vista` only
 * until the link's second successful sync and `vivienda` only from it (the accounts that disappear and
 * appear).
 */
export type AccountKind = 'checking' | 'card' | 'savings' | 'usd' | 'vista' | 'vivienda';
export const ACCOUNT_KINDS: readonly AccountKind[] = [
  'checking',
  'card',
  'savings',
  'usd',
  'vista',
  'vivienda',
];

/** The number of successful syncs after which `vista` is gone and `vivienda` is there. */
export const ACCOUNT_CHANGE_AFTER_SUCCESSES = 2;

export interface AccountSpec {
  kind: AccountKind;
  ref: string;
  name: string;
  type: AccountType;
  currency: 'CLP' | 'USD';
  last4: string;
  /** Six digits that start every referenceId of the account. */
  code: string;
  /** Seed text for the account's monthly draws, and its SHA-256 (32 bits) for the daily ones. */
  seed: string;
  seedHash: number;
  /** Balance at `HISTORY_START` in minor units (for a card: the amount owed). */
  opening: number;
  /** Credit limit (cards only). */
  limit: number | null;
}

const REF_PREFIX: Record<AccountKind, string> = {
  checking: 'CC',
  card: 'TC',
  savings: 'CA',
  usd: 'CD',
  vista: 'CV',
  vivienda: 'AV',
};

const CARD_NAMES: Record<string, string> = {
  bancochile: 'Tarjeta de Crédito Visa Signature',
  bancoestado: 'Tarjeta de Crédito Visa',
  santander: 'Tarjeta de Crédito Santander WorldMember',
  bci: 'Tarjeta de Crédito Bci Visa Platinum',
  itau: 'Tarjeta de Crédito Itaú Mastercard Black',
  scotiabank: 'Tarjeta de Crédito Scotiabank Visa Gold',
  security: 'Tarjeta de Crédito Security Mastercard',
  bice: 'Tarjeta de Crédito BICE Visa Infinite',
  falabella: 'Tarjeta CMR Mastercard',
  ripley: 'Tarjeta Ripley Mastercard',
  consorcio: 'Tarjeta de Crédito Consorcio Visa',
};

/** Last digit of the RUT body (the part before the check digit). */
function lastBodyDigit(rut: string): number {
  const body = rut.split('-')[0] ?? '0';
  return Number(body[body.length - 1] ?? '0');
}

/** A savings account when the owner RUT's body ends in an odd digit (11.111.111-1 has one). */
export function hasSavings(ownerRut: string): boolean {
  return lastBodyDigit(ownerRut) % 2 === 1;
}

/** A USD checking account when the owner RUT's body ends in 5 to 9 (55.555.555-5 has one). */
export function hasUsd(ownerRut: string): boolean {
  return lastBodyDigit(ownerRut) >= 5;
}

export function isPresent(kind: AccountKind, ownerRut: string, successes: number): boolean {
  switch (kind) {
    case 'checking':
    case 'card':
      return true;
    case 'savings':
      return hasSavings(ownerRut);
    case 'usd':
      return hasUsd(ownerRut);
    case 'vista':
      return successes < ACCOUNT_CHANGE_AFTER_SUCCESSES;
    case 'vivienda':
      return successes >= ACCOUNT_CHANGE_AFTER_SUCCESSES;
  }
}

/**
 * Individuals whose days are busier than everyone's: `activity` by owner RUT. A holder has about 130
 * movements in 90 days (about 1.1 everyday draws a day on checking and card, plus the monthly rows); at 11
 * 21.212.121-5 has about 1,100, in many smaller amounts, so a month's spending and balances stay those of
 * an ordinary holder. The consent bank's busy holder (consent-bank/users.ts) is this person, and
 * bench/consent-sync.ts syncs them. Other RUTs draw exactly as before (the first round is the usual one).
 */
export const BUSY_HOLDERS: Readonly<Record<string, number>> = { '21212121-5': 11 };

export function buildProfile(holder: Holder): Profile {
  const business = holder.holderType === 'business' && holder.rutEmpresa !== null;
  const ownerRut = business ? (holder.rutEmpresa as string) : holder.rut;
  const people = rngFor('holder', holder.holderType, ownerRut);
  const holderName = business ? companyName(people) : personName(people);
  const monthlyIncome = business
    ? 6_000_000 + (hash32('sales', ownerRut) % 34_001) * 1_000
    : 1_200_000 + (hash32('salary', ownerRut) % 1_301) * 1_000;
  let employer: Party | null = null;
  if (!business) {
    const rng = rngFor('employer', ownerRut);
    employer = {
      name: companyName(rng),
      rut: companyRut(rng),
      bankId: rng.pick(CREDENTIAL_BANK_IDS),
      accountLast4: String(rng.int(0, 9999)).padStart(4, '0'),
    };
  }
  const accounts = ACCOUNT_KINDS.map((kind, index) =>
    accountSpec(holder, ownerRut, business, monthlyIncome, kind, index),
  );
  const activity = business ? 1 : (BUSY_HOLDERS[ownerRut] ?? 1);
  return { holder, ownerRut, holderName, monthlyIncome, employer, activity, accounts };
}

function accountSpec(
  holder: Holder,
  ownerRut: string,
  business: boolean,
  income: number,
  kind: AccountKind,
  index: number,
): AccountSpec {
  const seed = ['account', holder.bankId, holder.holderType, ownerRut, kind].join('|');
  const ref = `${REF_PREFIX[kind]}-${hashHex(10, seed)}`;
  // Spread the last four digits of one holder's accounts apart so two of them never share them.
  const last4 = String(
    (hash32('last4', holder.bankId, holder.holderType, ownerRut) + index * 2_357) % 10_000,
  ).padStart(4, '0');
  const code = String(hash32('code', ref) % 1_000_000).padStart(6, '0');
  const rng = rngFor(seed, 'opening');
  const suffix = business ? ' Empresa' : '';
  let name: string;
  let type: AccountType = 'checking';
  let currency: 'CLP' | 'USD' = 'CLP';
  let opening: number;
  let limit: number | null = null;
  switch (kind) {
    case 'checking':
      name = `Cuenta Corriente${suffix}`;
      opening = Math.round(income * (1 + rng.next()));
      break;
    case 'card':
      name = business ? 'Tarjeta de Crédito Empresa' : (CARD_NAMES[holder.bankId] ?? 'Tarjeta de Crédito');
      type = 'credit_card';
      limit =
        Math.round((income * (business ? 0.3 + rng.next() * 0.5 : 1.5 + rng.next() * 1.5)) / 100_000) *
        100_000;
      opening = Math.round(limit * (0.05 + rng.next() * 0.15));
      break;
    case 'savings':
      name = `Cuenta de Ahorro${suffix}`;
      type = 'savings';
      opening = rng.int(300, 5_000) * 1_000;
      break;
    case 'usd':
      name = `Cuenta Corriente${suffix} en Dólares`;
      currency = 'USD';
      opening = rng.int(50_000, 2_000_000);
      break;
    case 'vista':
      name = `Cuenta Vista${suffix}`;
      opening = rng.int(20, 300) * 1_000;
      break;
    case 'vivienda':
      name = business ? 'Cuenta de Ahorro a Plazo Empresa' : 'Cuenta de Ahorro Vivienda';
      type = 'savings';
      opening = rng.int(1_000, 8_000) * 1_000;
      break;
  }
  return { kind, ref, name, type, currency, last4, code, seed, seedHash: hash32(seed), opening, limit };
}
