import { rutCheckDigit } from '../rut/rut.js';
import type { CustomerAccount, CustomerData, CustomerEntry, EntryKind } from './customer-data.js';

/*
 * The resource answers, shaped as Open Finance Brasil's accounts 2.4.2 and credit-cards 2.3.1
 * (src/open-finance/specs/). Chile's bank adapts them as docs/open-finance.md says: amounts in CLP (two
 * decimals, `.00`, as the pattern asks) and the RUT (`12345678-9`) where Brazil has CNPJ/CPF (`companyCnpj`,
 * `partieCnpjCpf`); Brazil's reads the same rows in BRL (`Market`). Pure functions of the customer's data
 * (customer-data.ts) and the time: no state. The resource server (resource-server.ts) checks every answer
 * against the files before it leaves.
 */

export const ACCOUNTS_BASE = '/open-banking/accounts/v2';
export const CREDIT_CARDS_BASE = '/open-banking/credit-cards-accounts/v2';
export const BANK_BRAND = 'Banco Sandbox';
/** The simulated bank's own RUT (a valid, invented one). */
export const BANK_RUT = `76999999-${rutCheckDigit('76999999')}`;
/** The bank's three-digit code, where Brazil has its COMPE code. */
export const BANK_CODE = '999';

export interface Paging {
  page: number;
  pageSize: number;
  /**
   * Brazil's `pagination-key` (accounts 2.4.2, credit cards 2.3.1): the bank hands one out with the first
   * page and the client sends it back with the next ones, so every page is cut from the same list.
   */
  key?: string;
}

/** A window of whole days, [from, to) in ms. */
export interface Window {
  from: number;
  to: number;
}

/**
 * Where the simulated bank is: the currency its peso accounts are kept in, and the tax ids the files carry
 * (`companyCnpj` the bank's, `partieCnpjCpf` a counterparty's). Chile's bank keeps the data's CLP and RUTs;
 * Brazil's (brasil/) reads the same rows in BRL, a CLP peso being a centavo (so a 1,500,000 CLP salary is
 * R$ 15.000,00), with CNPJs and CPFs.
 */
export interface Market {
  /** The currency an account of the data's `currency` is kept in here. */
  currency(dataCurrency: string): string;
  bankTaxId: string;
  /** A counterparty's tax id and person type, from the data's RUT. */
  party(rut: string): { id: string; personType: 'PESSOA_NATURAL' | 'PESSOA_JURIDICA' };
}

export const CHILE_MARKET: Market = {
  currency: (dataCurrency) => dataCurrency,
  bankTaxId: BANK_RUT,
  party: (rut) => ({
    id: rut,
    // Chilean companies' RUTs are above 50 million; people's below.
    personType: Number(rut.split('-')[0]) >= 50_000_000 ? 'PESSOA_JURIDICA' : 'PESSOA_NATURAL',
  }),
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

function accountNumber(account: CustomerAccount): { number: string; checkDigit: string } {
  const number = `${account.code}${account.last4}`;
  const sum = [...number].reduce((total, digit, i) => total + Number(digit) * (i % 2 === 0 ? 3 : 1), 0);
  return { number, checkDigit: String((10 - (sum % 10)) % 10) };
}

/** accounts 2.4.2's `EnumAccountType`. */
export function accountType(account: CustomerAccount): string {
  if (account.product === 'savings') return 'CONTA_POUPANCA';
  if (account.product === 'prepaid') return 'CONTA_PAGAMENTO_PRE_PAGA';
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

const TRANSACTION_TYPES: Record<EntryKind, string> = {
  transfer: 'TED',
  card_purchase: 'CARTAO',
  deposit: 'DEPOSITO',
  withdrawal: 'SAQUE',
  fee: 'TARIFA_SERVICOS_AVULSOS',
  interest: 'RENDIMENTO_APLIC_FINANCEIRA',
  salary: 'FOLHA_PAGAMENTO',
  other: 'OUTROS',
};

/** accounts 2.4.2's `EnumCompletedAuthorisedPaymentIndicator`. */
const PAYMENT_STATUS: Record<CustomerEntry['status'], string> = {
  booked: 'TRANSACAO_EFETIVADA',
  pending: 'TRANSACAO_PROCESSANDO',
  scheduled: 'LANCAMENTO_FUTURO',
};

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

/** credit-cards 2.3.1's `EnumCreditCardTransactionType` of an entry. */
export function cardTransactionType(entry: CustomerEntry): string {
  if (entry.kind === 'fee') return 'TARIFA';
  if (entry.kind === 'interest') return 'OPERACOES_CREDITO_CONTRATADAS_CARTAO';
  if (entry.amount > 0) return entry.kind === 'card_purchase' ? 'ESTORNO' : 'PAGAMENTO';
  return 'OUTROS';
}

const creditDebit = (entry: CustomerEntry) => (entry.amount >= 0 ? 'CREDITO' : 'DEBITO');

/** What an account-transactions request filters on besides the window (accounts 2.4.2). */
export interface AccountEntryFilter {
  creditDebitIndicator?: string;
}

/** What a card-transactions request filters on besides the window (credit-cards 2.3.1). */
export interface CardEntryFilter {
  transactionType?: string;
  /** The data has no merchant category codes: a `payeeMCC` filter matches no entry. */
  payeeMCC?: string;
}

/** The credit-card answers (credit-cards 2.3.1) of one bank. */
function cardAnswers(
  data: CustomerData,
  market: Market,
  cards: (customer: string, now: number) => CustomerAccount[],
) {
  const money = (minor: number, dataCurrency: string) => {
    const currency = market.currency(dataCurrency);
    return { amount: decimal(minor, currency), currency };
  };
  return {
    cardAccountsList(customer: string, self: URL, paging: Paging, now: number) {
      const list = cards(customer, now);
      return {
        data: slice(list, paging).map((card) => ({
          creditCardAccountId: card.id,
          brandName: BANK_BRAND,
          companyCnpj: market.bankTaxId,
          name: card.name.slice(0, 50),
          productType: productType(card.name),
          creditCardNetwork: network(card.name),
        })),
        links: pageLinks(self, paging, list.length),
        meta: meta(list.length, paging.pageSize, now),
      };
    },

    /** A card account's identification: its name, product and the holder's card. */
    cardIdentification(card: CustomerAccount, self: URL, now: number) {
      return {
        data: {
          name: card.name.slice(0, 50),
          productType: productType(card.name),
          creditCardNetwork: network(card.name),
          paymentMethod: [{ identificationNumber: card.last4, isMultipleCreditCard: false }],
        },
        links: { self: self.href },
        meta: meta(1, 1, now),
      };
    },

    /**
     * The card's total credit line, as the credential sandbox counts it: what is owed (`usedAmount`), and what
     * can still be spent: the limit less that and less what pending charges hold.
     */
    cardLimits(customer: string, card: CustomerAccount, self: URL, now: number) {
      const { booked: owed, pending } = data.balance(customer, card, now);
      const limit = card.limit ?? 0;
      return {
        data: [
          {
            creditLineLimitType: 'LIMITE_CREDITO_TOTAL',
            consolidationType: 'CONSOLIDADO',
            identificationNumber: card.last4,
            isLimitFlexible: false,
            limitAmount: money(limit, card.currency),
            usedAmount: money(owed, card.currency),
            availableAmount: money(Math.max(0, limit - owed + pending), card.currency),
          },
        ],
        links: { self: self.href },
        meta: meta(1, 1, now),
      };
    },

    cardTransactions(
      customer: string,
      card: CustomerAccount,
      window: Window,
      filter: CardEntryFilter,
      self: URL,
      paging: Paging,
      now: number,
    ) {
      const entries = data
        .entries(customer, card, window.from, window.to, now)
        .filter(() => filter.payeeMCC === undefined)
        .filter(
          (e) => filter.transactionType === undefined || cardTransactionType(e) === filter.transactionType,
        );
      return {
        data: slice(entries, paging).map((e) => {
          const amount = money(Math.abs(e.amount), e.currency);
          return {
            transactionId: e.id,
            identificationNumber: card.last4,
            transactionName: e.description.slice(0, 200),
            creditDebitType: creditDebit(e),
            transactionType: cardTransactionType(e),
            // A booked charge is on the month's bill; a pending one is on none yet (the card's unbilled charges).
            ...(e.status === 'booked'
              ? { billId: `bill-${card.last4}-${e.transactionDate.slice(0, 7)}` }
              : {}),
            paymentType: 'A_VISTA',
            // Brazil's `brazilianAmount` is the amount in the local currency: CLP at the Chilean bank.
            brazilianAmount: amount,
            amount,
            transactionDateTime: new Date(e.bookedAt).toISOString(),
            billPostDate: e.transactionDate,
          };
        }),
        links: pageLinks(self, paging, entries.length, false),
        meta: { requestDateTime: secondsIso(now) },
      };
    },
  };
}

/** The answers of one bank: its customers' data read in its market. */
export function resourceAnswers(data: CustomerData, market: Market) {
  const deposits = (customer: string, now: number) =>
    data.accounts(customer, now).filter((a) => a.product !== 'credit_card');
  const cards = (customer: string, now: number) =>
    data.accounts(customer, now).filter((a) => a.product === 'credit_card');
  const money = (minor: number, dataCurrency: string) => {
    const currency = market.currency(dataCurrency);
    return { amount: decimal(minor, currency), currency };
  };

  return {
    deposits,
    cards,
    findDeposit: (customer: string, id: string, now: number) =>
      deposits(customer, now).find((a) => a.id === id) ?? null,
    findCard: (customer: string, id: string, now: number) =>
      cards(customer, now).find((a) => a.id === id) ?? null,

    accountsList(customer: string, type: string | undefined, self: URL, paging: Paging, now: number) {
      const accounts = deposits(customer, now).filter((a) => type === undefined || accountType(a) === type);
      return {
        data: slice(accounts, paging).map((account) => ({
          brandName: BANK_BRAND,
          companyCnpj: market.bankTaxId,
          type: accountType(account),
          compeCode: BANK_CODE,
          ...accountNumber(account),
          accountId: account.id,
        })),
        links: pageLinks(self, paging, accounts.length),
        meta: meta(accounts.length, paging.pageSize, now),
      };
    },

    accountIdentification(account: CustomerAccount, self: URL, now: number) {
      return {
        data: {
          compeCode: BANK_CODE,
          ...accountNumber(account),
          type: accountType(account),
          subtype: 'INDIVIDUAL',
          currency: market.currency(account.currency),
        },
        links: { self: self.href },
        meta: meta(1, 1, now),
      };
    },

    accountBalances(customer: string, account: CustomerAccount, self: URL, now: number) {
      const { booked } = data.balance(customer, account, now);
      return {
        data: {
          availableAmount: money(booked, account.currency),
          blockedAmount: money(0, account.currency),
          automaticallyInvestedAmount: money(0, account.currency),
          updateDateTime: secondsIso(now),
        },
        links: { self: self.href },
        meta: meta(1, 1, now),
      };
    },

    accountTransactions(
      customer: string,
      account: CustomerAccount,
      window: Window,
      filter: AccountEntryFilter,
      self: URL,
      paging: Paging,
      now: number,
    ) {
      const entries = data
        .entries(customer, account, window.from, window.to, now)
        .filter(
          (e) => filter.creditDebitIndicator === undefined || creditDebit(e) === filter.creditDebitIndicator,
        );
      return {
        data: slice(entries, paging).map((e) => ({
          transactionId: e.id,
          completedAuthorisedPaymentType: PAYMENT_STATUS[e.status],
          creditDebitType: creditDebit(e),
          transactionName: e.description.slice(0, 200),
          type: TRANSACTION_TYPES[e.kind],
          transactionAmount: money(Math.abs(e.amount), e.currency),
          transactionDateTime: new Date(e.bookedAt).toISOString(),
          ...(e.counterpartyRut
            ? (({ id, personType }) => ({ partieCnpjCpf: id, partiePersonType: personType }))(
                market.party(e.counterpartyRut),
              )
            : {}),
        })),
        links: pageLinks(self, paging, entries.length, false),
        meta: { requestDateTime: secondsIso(now) },
      };
    },

    ...cardAnswers(data, market, cards),
  };
}

export type ResourceAnswers = ReturnType<typeof resourceAnswers>;

/** The "breaks the schema" fault: `meta` goes, and the first item loses its first field. */
export function breakAnswer(body: unknown): unknown {
  if (body === null || typeof body !== 'object') return body;
  const broken: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  delete broken.meta;
  const data = broken.data;
  if (Array.isArray(data) && data.length > 0) {
    const [first, ...rest] = data as Record<string, unknown>[];
    const copy = { ...first };
    delete copy[Object.keys(copy)[0] ?? ''];
    broken.data = [copy, ...rest];
  }
  return broken;
}
