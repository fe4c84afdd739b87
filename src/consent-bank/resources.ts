import type { BankMovement, MovementType } from '../banks/connector.js';
import { MOVEMENTS_REACH_MS, balanceAt, generationContext, rowsBetween } from '../banks/sandbox/generator.js';
import { isPresent, type AccountSpec, type Profile } from '../banks/sandbox/profile.js';
import { rutCheckDigit } from '../rut/rut.js';
import { profileOf } from './users.js';

/*
 * The resource answers, shaped as Open Finance Brasil's accounts 2.4.2 and credit-cards 2.3.1 (copies in
 * specs/), adapted to Chile as docs/open-finance.md says: amounts in CLP (two decimals, `.00`, as the
 * pattern asks), and the RUT (`12345678-9`) where Brazil has CNPJ/CPF (`companyCnpj`, `partieCnpjCpf`).
 * Pure functions of the sandbox user's data (src/banks/sandbox/) and the time: no state.
 */

export const ACCOUNTS_BASE = '/open-banking/accounts/v2';
export const CREDIT_CARDS_BASE = '/open-banking/credit-cards-accounts/v2';
export const BANK_BRAND = 'Banco Sandbox';
/** The simulated bank's own RUT (a valid, invented one). */
export const BANK_RUT = `76999999-${rutCheckDigit('76999999')}`;
/** The bank's three-digit code, where Brazil has its COMPE code. */
export const BANK_CODE = '999';
export const DEFAULT_PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 1_000;

export interface Paging {
  page: number;
  pageSize: number;
  /**
   * Brazil's `pagination-key` (accounts 2.4.2, credit cards 2.3.1): the bank hands one out with the first
   * page and the client sends it back with the next ones, so every page is cut from the same list.
   */
  key?: string;
}

/**
 * Where the simulated bank is: the currency its peso accounts are kept in, and the tax ids the files carry
 * (`companyCnpj` the bank's, `partieCnpjCpf` a counterparty's). Chile's bank keeps the sandbox's CLP and RUTs;
 * Brazil's (brasil/) reads the same generated rows in BRL, a CLP peso being a centavo (so a 1,500,000 CLP
 * salary is R$ 15.000,00), with CNPJs and CPFs.
 */
export interface Market {
  /** The currency an account of the sandbox's `currency` is kept in here. */
  currency(sandboxCurrency: string): string;
  bankTaxId: string;
  /** A counterparty's tax id and person type, from the sandbox's RUT. */
  party(rut: string): { id: string; personType: 'PESSOA_NATURAL' | 'PESSOA_JURIDICA' };
}

function depositAccounts(profile: Profile): AccountSpec[] {
  return profile.accounts.filter(
    (spec) => spec.type !== 'credit_card' && isPresent(spec.kind, profile.ownerRut, 0),
  );
}

function cardAccounts(profile: Profile): AccountSpec[] {
  return profile.accounts.filter(
    (spec) => spec.type === 'credit_card' && isPresent(spec.kind, profile.ownerRut, 0),
  );
}

export const CHILE_MARKET: Market = {
  currency: (sandboxCurrency) => sandboxCurrency,
  bankTaxId: BANK_RUT,
  party: (rut) => ({ id: rut, personType: partyPersonType(rut) }),
};

/** Minor units as the schema's decimal string: CLP has no minor unit, USD and BRL have cents. */
export function decimal(minor: number, currency: string): string {
  const units = currency === 'CLP' ? Math.abs(minor) : Math.abs(minor) / 100;
  return `${minor < 0 ? '-' : ''}${units.toFixed(2)}`;
}

/** `2026-01-15T12:00:00Z`: the schema's date-times without milliseconds. */
export function secondsIso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function accountNumber(spec: AccountSpec): { number: string; checkDigit: string } {
  const number = `${spec.code}${spec.last4}`;
  const sum = [...number].reduce((total, digit, i) => total + Number(digit) * (i % 2 === 0 ? 3 : 1), 0);
  return { number, checkDigit: String((10 - (sum % 10)) % 10) };
}

function accountType(spec: AccountSpec): string {
  if (spec.kind === 'savings' || spec.kind === 'vivienda') return 'CONTA_POUPANCA';
  if (spec.kind === 'vista') return 'CONTA_PAGAMENTO_PRE_PAGA';
  return 'CONTA_DEPOSITO_A_VISTA';
}

function meta(total: number, pageSize: number, now: number) {
  return {
    totalRecords: total,
    totalPages: Math.max(1, Math.ceil(total / pageSize)),
    requestDateTime: secondsIso(now),
  };
}

/** `self`, and `first`/`prev`/`next`/`last` where they exist, keeping the request's other parameters. */
export function pageLinks(self: URL, paging: Paging, total: number, withLast = true): Record<string, string> {
  const pages = Math.max(1, Math.ceil(total / paging.pageSize));
  const at = (page: number) => {
    const url = new URL(self);
    url.searchParams.set('page', String(page));
    url.searchParams.set('page-size', String(paging.pageSize));
    if (paging.key !== undefined) url.searchParams.set('pagination-key', paging.key);
    return url.href;
  };
  const links: Record<string, string> = { self: self.href };
  if (paging.page > 1) {
    links.first = at(1);
    links.prev = at(Math.min(paging.page - 1, pages));
  }
  if (paging.page < pages) {
    links.next = at(paging.page + 1);
    if (withLast) links.last = at(pages);
  }
  return links;
}

function slice<T>(items: T[], paging: Paging): T[] {
  return items.slice((paging.page - 1) * paging.pageSize, paging.page * paging.pageSize);
}

export function accountsList(rut: string, self: URL, paging: Paging, now: number, market = CHILE_MARKET) {
  const accounts = depositAccounts(profileOf(rut));
  return {
    data: slice(accounts, paging).map((spec) => ({
      brandName: BANK_BRAND,
      companyCnpj: market.bankTaxId,
      type: accountType(spec),
      compeCode: BANK_CODE,
      ...accountNumber(spec),
      accountId: spec.ref,
    })),
    links: pageLinks(self, paging, accounts.length),
    meta: meta(accounts.length, paging.pageSize, now),
  };
}

export function findDepositAccount(rut: string, accountId: string): AccountSpec | null {
  return depositAccounts(profileOf(rut)).find((spec) => spec.ref === accountId) ?? null;
}

export function findCardAccount(rut: string, accountId: string): AccountSpec | null {
  return cardAccounts(profileOf(rut)).find((spec) => spec.ref === accountId) ?? null;
}

export function accountIdentification(spec: AccountSpec, self: URL, now: number, market = CHILE_MARKET) {
  return {
    data: {
      compeCode: BANK_CODE,
      ...accountNumber(spec),
      type: accountType(spec),
      subtype: 'INDIVIDUAL',
      currency: market.currency(spec.currency),
    },
    links: { self: self.href },
    meta: meta(1, 1, now),
  };
}

export function accountBalances(
  rut: string,
  spec: AccountSpec,
  self: URL,
  now: number,
  market = CHILE_MARKET,
) {
  const currency = market.currency(spec.currency);
  const context = generationContext(profileOf(rut));
  const balance = balanceAt(context, spec, now);
  const current = spec.opening + balance.posted;
  return {
    data: {
      availableAmount: { amount: decimal(current, currency), currency },
      blockedAmount: { amount: decimal(0, currency), currency },
      automaticallyInvestedAmount: { amount: decimal(0, currency), currency },
      updateDateTime: secondsIso(now),
    },
    links: { self: self.href },
    meta: meta(1, 1, now),
  };
}

const TRANSACTION_TYPES: Record<MovementType, string> = {
  transfer: 'TED',
  card_purchase: 'CARTAO',
  deposit: 'DEPOSITO',
  withdrawal: 'SAQUE',
  fee: 'TARIFA_SERVICOS_AVULSOS',
  interest: 'RENDIMENTO_APLIC_FINANCEIRA',
  salary: 'FOLHA_PAGAMENTO',
  other: 'OUTROS',
};

/** The bank's id of a row: its ref, made to fit the schema's pattern. */
export function transactionIdOf(movement: BankMovement): string {
  const raw = movement.ref ?? `ref-${movement.referenceId ?? movement.postedAt}`;
  return raw
    .replace(/[^a-zA-Z0-9-]/g, '-')
    .replace(/^-+/, 'x')
    .slice(0, 100);
}

/** The booking window asked (`fromBookingDate`/`toBookingDate`, whole days), default the last 90 days. */
export function bookingWindow(
  from: string | null,
  to: string | null,
  now: number,
): { from: number; to: number } | null {
  const day = (text: string) => (/^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : NaN);
  const lower = from === null ? now - MOVEMENTS_REACH_MS : day(from);
  const upper = to === null ? now : day(to) + 86_400_000;
  if (!Number.isFinite(lower) || !Number.isFinite(upper) || upper <= lower) return null;
  return { from: lower, to: Math.min(upper, now) };
}

function movementsOf(
  rut: string,
  spec: AccountSpec,
  window: { from: number; to: number },
  now: number,
): BankMovement[] {
  const context = generationContext(profileOf(rut));
  // Newest first, as banks list them.
  return rowsBetween(context, spec, window.from, window.to, now).reverse();
}

function partyFields(party: ReturnType<Market['party']>) {
  return { partieCnpjCpf: party.id, partiePersonType: party.personType };
}

function partyPersonType(rut: string): 'PESSOA_NATURAL' | 'PESSOA_JURIDICA' {
  // Chilean companies' RUTs are above 50 million; people's below.
  return Number(rut.split('-')[0]) >= 50_000_000 ? 'PESSOA_JURIDICA' : 'PESSOA_NATURAL';
}

export function accountTransactions(
  rut: string,
  spec: AccountSpec,
  window: { from: number; to: number },
  self: URL,
  paging: Paging,
  now: number,
  market = CHILE_MARKET,
) {
  const movements = movementsOf(rut, spec, window, now);
  return {
    data: slice(movements, paging).map((m) => ({
      transactionId: transactionIdOf(m),
      completedAuthorisedPaymentType: m.pending ? 'TRANSACAO_PROCESSANDO' : 'TRANSACAO_EFETIVADA',
      creditDebitType: m.amount >= 0 ? 'CREDITO' : 'DEBITO',
      transactionName: m.description.slice(0, 200),
      type: TRANSACTION_TYPES[m.type],
      transactionAmount: {
        amount: decimal(Math.abs(m.amount), market.currency(m.currency)),
        currency: market.currency(m.currency),
      },
      transactionDateTime: new Date(m.postedAt).toISOString(),
      ...(m.counterparty?.rut ? partyFields(market.party(m.counterparty.rut)) : {}),
    })),
    links: pageLinks(self, paging, movements.length, false),
    meta: { requestDateTime: secondsIso(now) },
  };
}

function productType(name: string): string {
  for (const [word, type] of [
    ['Black', 'BLACK'],
    ['Infinite', 'INFINITE'],
    ['Signature', 'INFINITE'],
    ['Platinum', 'PLATINUM'],
    ['Gold', 'GOLD'],
  ] as const)
    if (name.includes(word)) return type;
  return 'CLASSIC_NACIONAL';
}

function network(name: string): string {
  if (/visa/i.test(name)) return 'VISA';
  if (/mastercard/i.test(name)) return 'MASTERCARD';
  return 'OUTRAS';
}

export function cardAccountsList(rut: string, self: URL, paging: Paging, now: number, market = CHILE_MARKET) {
  const cards = cardAccounts(profileOf(rut));
  return {
    data: slice(cards, paging).map((spec) => ({
      creditCardAccountId: spec.ref,
      brandName: BANK_BRAND,
      companyCnpj: market.bankTaxId,
      name: spec.name.slice(0, 50),
      productType: productType(spec.name),
      creditCardNetwork: network(spec.name),
    })),
    links: pageLinks(self, paging, cards.length),
    meta: meta(cards.length, paging.pageSize, now),
  };
}

/** A card account's identification: its name, product and the holder's card (credit cards 2.3.1). */
export function cardIdentification(spec: AccountSpec, self: URL, now: number) {
  return {
    data: {
      name: spec.name.slice(0, 50),
      productType: productType(spec.name),
      creditCardNetwork: network(spec.name),
      paymentMethod: [{ identificationNumber: spec.last4, isMultipleCreditCard: false }],
    },
    links: { self: self.href },
    meta: meta(1, 1, now),
  };
}

/**
 * The card's total credit line, as the credential sandbox counts it: what is owed (`usedAmount`) is the
 * opening debt less what was posted, and what can still be spent is the limit less that and less what pending
 * charges hold.
 */
export function cardLimits(rut: string, spec: AccountSpec, self: URL, now: number, market = CHILE_MARKET) {
  const balance = balanceAt(generationContext(profileOf(rut)), spec, now);
  const owed = spec.opening - balance.posted;
  const limit = spec.limit ?? 0;
  const available = Math.max(0, limit - owed + balance.pending);
  const currency = market.currency(spec.currency);
  const money = (minor: number) => ({ amount: decimal(minor, currency), currency });
  return {
    data: [
      {
        creditLineLimitType: 'LIMITE_CREDITO_TOTAL',
        consolidationType: 'CONSOLIDADO',
        identificationNumber: spec.last4,
        isLimitFlexible: false,
        limitAmount: money(limit),
        usedAmount: money(owed),
        availableAmount: money(available),
      },
    ],
    links: { self: self.href },
    meta: meta(1, 1, now),
  };
}

function cardTransactionType(m: BankMovement): string {
  if (m.type === 'fee') return 'TARIFA';
  if (m.type === 'interest') return 'OPERACOES_CREDITO_CONTRATADAS_CARTAO';
  if (m.amount > 0) return m.type === 'card_purchase' ? 'ESTORNO' : 'PAGAMENTO';
  return 'OUTROS';
}

export function cardTransactions(
  rut: string,
  spec: AccountSpec,
  window: { from: number; to: number },
  self: URL,
  paging: Paging,
  now: number,
  market = CHILE_MARKET,
) {
  const movements = movementsOf(rut, spec, window, now);
  return {
    data: slice(movements, paging).map((m) => {
      const currency = market.currency(m.currency);
      const amount = { amount: decimal(Math.abs(m.amount), currency), currency };
      return {
        transactionId: transactionIdOf(m),
        identificationNumber: spec.last4,
        transactionName: m.description.slice(0, 200),
        creditDebitType: m.amount >= 0 ? 'CREDITO' : 'DEBITO',
        transactionType: cardTransactionType(m),
        // A booked charge is on the month's bill; a pending one is on none yet (the card's unbilled charges).
        ...(m.pending ? {} : { billId: `bill-${spec.last4}-${m.transactionDate.slice(0, 7)}` }),
        paymentType: 'A_VISTA',
        // Brazil's `brazilianAmount` is the amount in the local currency: CLP at the Chilean bank.
        brazilianAmount: amount,
        amount,
        transactionDateTime: new Date(m.postedAt).toISOString(),
        billPostDate: m.transactionDate,
      };
    }),
    links: pageLinks(self, paging, movements.length, false),
    meta: { requestDateTime: secondsIso(now) },
  };
}

/** The "breaks the schema" fault: `meta` goes, and the first item loses its first field. */
export function breakAnswer(body: { data: unknown; meta?: unknown }): unknown {
  const broken: Record<string, unknown> = { ...body };
  delete broken.meta;
  if (Array.isArray(body.data) && body.data.length > 0) {
    const [first, ...rest] = body.data as Record<string, unknown>[];
    const copy = { ...first };
    delete copy[Object.keys(copy)[0] ?? ''];
    broken.data = [copy, ...rest];
  }
  return broken;
}
