import { normaliseRut } from '../../rut/rut.js';
import {
  ConnectorError,
  type AccountType,
  type BankAccount,
  type BankMovement,
  type MovementType,
} from '../connector.js';

/*
 * Pure functions from Open Finance Brasil–shaped answers (accounts 2.4.2, credit cards 2.3.1, adapted to
 * CLP and RUT; checked first by data-schemas.ts) to the connector interface's accounts and movements. No
 * I/O: the consent connector fetches, checks, then calls these. Anything a schema cannot say (an amount
 * CLP cannot hold, a date that does not exist) raises `invalid_bank_data` with the reason.
 */

export interface Money {
  amount: string;
  currency: string;
}

/** accounts 2.4.2 `AccountData` (list item). */
export interface ObAccount {
  brandName: string;
  companyCnpj: string;
  type: 'CONTA_DEPOSITO_A_VISTA' | 'CONTA_POUPANCA' | 'CONTA_PAGAMENTO_PRE_PAGA';
  compeCode: string;
  branchCode?: string;
  number: string;
  checkDigit: string;
  accountId: string;
}

/** accounts 2.4.2 `AccountBalancesData`. */
export interface ObBalances {
  availableAmount: Money;
  blockedAmount: Money;
  automaticallyInvestedAmount: Money;
  updateDateTime: string;
}

/** accounts 2.4.2 `AccountTransactionsData`. */
export interface ObTransaction {
  transactionId: string;
  completedAuthorisedPaymentType: 'TRANSACAO_EFETIVADA' | 'LANCAMENTO_FUTURO' | 'TRANSACAO_PROCESSANDO';
  creditDebitType: 'CREDITO' | 'DEBITO';
  transactionName: string;
  type: string;
  transactionAmount: Money;
  transactionDateTime: string;
  partieCnpjCpf?: string;
  partiePersonType?: string;
  partieCompeCode?: string;
  partieBranchCode?: string;
  partieNumber?: string;
  partieCheckDigit?: string;
}

/** credit cards 2.3.1 `CreditCardAccountsData` (list item). */
export interface ObCardAccount {
  creditCardAccountId: string;
  brandName: string;
  companyCnpj: string;
  name: string;
  productType: string;
  creditCardNetwork: string;
}

/** credit cards 2.3.1 `CreditCardsAccountsIdentificationData`. */
export interface ObCardIdentification {
  name: string;
  paymentMethod: { identificationNumber: string; isMultipleCreditCard: boolean }[];
}

/** credit cards 2.3.1 `CreditCardAccountsLimitsData`. */
export interface ObCardLimit {
  creditLineLimitType: 'LIMITE_CREDITO_TOTAL' | 'LIMITE_CREDITO_MODALIDADE_OPERACAO';
  consolidationType: string;
  identificationNumber: string;
  isLimitFlexible: boolean;
  limitAmount?: Partial<Money>;
  usedAmount: Money;
  availableAmount?: Partial<Money>;
}

/** credit cards 2.3.1 `CreditCardAccountsTransaction`. */
export interface ObCardTransaction {
  transactionId: string;
  identificationNumber: string;
  transactionName: string;
  billId?: string;
  creditDebitType: 'CREDITO' | 'DEBITO';
  transactionType: string;
  /** The amount in the national currency (Brazil's BRL; CLP here), which the account's balances use. */
  brazilianAmount: Money;
  /** The original amount, in the currency of the purchase. */
  amount: Money;
  transactionDateTime: string;
  billPostDate: string;
}

const bad = (reason: string) => new ConnectorError('invalid_bank_data', reason);

/** ISO 4217 minor-unit digits: CLP 0, USD 2 (from the runtime's ICU data, which follows ISO 4217). */
export function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions()
      .maximumFractionDigits!;
  } catch {
    throw bad(`${JSON.stringify(currency.slice(0, 8))} is not a currency code`);
  }
}

/**
 * A decimal string (`1500.00`, `-12.3456`) to integer minor units of its currency, exactly (no floating
 * point). The files allow "no mínimo 2 casas e no máximo 4 casas decimais" for every amount (accounts 2.4.2
 * `AccountTransactionsDataAmount`, credit cards 2.3.1 `CreditCardsUsedAmount`, …), more than a centavo holds:
 * - A currency with a minor unit (BRL, USD) keeps its minor unit and the rest is rounded half to even: the
 *   files say nothing of rounding, so Brazil's own rule for decimal rounding applies (ABNT NBR 5891: a 5
 *   followed only by zeros goes to the even digit), and it does not drift upward when a balance or a month's
 *   spending adds many rounded rows, as rounding every half up would. The sign is kept apart and the
 *   magnitude rounded, so a debit and the credit that reverses it round to the same number.
 * - CLP has no minor unit, so `1500.50` CLP is no amount a Chilean account can hold but a scale mistake (an
 *   amount in centavos' shape); it is refused rather than rounded.
 */
export function toMinorUnits(money: Money, field: string): number {
  const match = /^(-?)(\d{1,15})(?:\.(\d{1,4}))?$/.exec(money.amount);
  if (!match) throw bad(`${field} is not a decimal amount`);
  const [, sign, whole, fraction = ''] = match;
  const digits = minorDigits(money.currency);
  const rest = fraction.slice(digits);
  if (digits === 0 && /[^0]/.test(rest))
    throw bad(`${field} has more decimals than ${money.currency} allows (${digits})`);
  const kept = BigInt(whole! + fraction.slice(0, digits).padEnd(digits, '0'));
  const units = kept + roundHalfEven(kept, rest);
  if (units > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(`${field} is too large`);
  const value = Number(units);
  return sign === '-' && value !== 0 ? -value : value;
}

/** 1 when the dropped digits `rest` raise `kept` (ABNT NBR 5891), else 0. */
function roundHalfEven(kept: bigint, rest: string): bigint {
  if (rest === '' || rest[0]! < '5') return 0n;
  if (rest[0]! > '5' || /[^0]/.test(rest.slice(1))) return 1n;
  return kept % 2n === 0n ? 0n : 1n;
}

/** Where the holder reads their statement: Chile's banks, or Brazil's (Brasília time). */
export type StatementZone = 'America/Santiago' | 'America/Sao_Paulo';

/** `YYYY-MM-DD` of an instant in Chile (America/Santiago), or `zone`: the day the holder sees on their statement. */
export function chileanDate(instant: number, zone: StatementZone = 'America/Santiago'): string {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).formatToParts(instant);
  const get = (type: string) => parts.find((part) => part.type === type)!.value;
  return `${get('year')}-${get('month')}-${get('day')}`;
}

function instantOf(value: string, field: string): number {
  const instant = Date.parse(value);
  // The patterns let through days such as 2024-02-31; Date.parse rolls them over, so compare back.
  if (Number.isNaN(instant) || new Date(instant).toISOString().slice(0, 10) !== normaliseDay(value))
    throw bad(`${field} is not a real date and time`);
  return instant;
}

/** The schemas allow `2024-2-5T…`; Date wants two digits. */
function normaliseDay(value: string): string {
  const [year, month, day] = value
    .slice(0, value.indexOf('T') < 0 ? undefined : value.indexOf('T'))
    .split('-');
  return `${year}-${month!.padStart(2, '0')}-${day!.padStart(2, '0')}`;
}

function sameCurrency(money: Money, expected: string, field: string): void {
  if (money.currency !== expected)
    throw bad(`${field} is in ${money.currency.slice(0, 3)}, the account in ${expected}`);
}

const ACCOUNT_NAMES: Record<ObAccount['type'], { name: string; type: AccountType }> = {
  CONTA_DEPOSITO_A_VISTA: { name: 'Cuenta corriente', type: 'checking' },
  CONTA_POUPANCA: { name: 'Cuenta de ahorro', type: 'savings' },
  // A prepaid account (Chile's cuenta vista / cuenta RUT) holds money like a checking account.
  CONTA_PAGAMENTO_PRE_PAGA: { name: 'Cuenta vista', type: 'checking' },
};

/** Account refs carry their API family: deposit and card account ids are separate id spaces at the bank. */
export const depositAccountRef = (accountId: string) => `acc-${accountId}`;
export const cardAccountRef = (creditCardAccountId: string) => `card-${creditCardAccountId}`;

/**
 * A deposit account with its balances. `current` is what the account holds (available plus blocked);
 * `available` what can be used now. Money automatically invested is not counted in either: it is in an
 * investment, not in the account.
 */
export function mapDepositAccount(account: ObAccount, balances: ObBalances, holderName: string): BankAccount {
  const currency = balances.availableAmount.currency;
  sameCurrency(balances.blockedAmount, currency, 'blockedAmount');
  const available = toMinorUnits(balances.availableAmount, 'availableAmount');
  const blocked = toMinorUnits(balances.blockedAmount, 'blockedAmount');
  const kind = ACCOUNT_NAMES[account.type];
  return {
    ref: depositAccountRef(account.accountId),
    name: `${kind.name} ${account.number.slice(-4)}`,
    type: kind.type,
    currency,
    last4: account.number.slice(-4),
    holderName,
    balance: { available, current: available + blocked, limit: null },
  };
}

/**
 * A credit card account. As the sandbox does: `current` is what is owed (positive), `available` what can
 * still be spent, `limit` the credit line, all from the account's total limit line. Its last four digits
 * are those of the holder's own card (the one that is not an additional card) where the bank lists it.
 */
export function mapCardAccount(
  account: ObCardAccount,
  identification: ObCardIdentification | null,
  limits: ObCardLimit[],
  holderName: string,
): BankAccount {
  const total = limits.find((line) => line.creditLineLimitType === 'LIMITE_CREDITO_TOTAL') ?? limits[0];
  if (!total) throw bad(`credit card account has no limit line`);
  const currency = total.usedAmount.currency;
  const owed = toMinorUnits(total.usedAmount, 'usedAmount');
  const optional = (money: Partial<Money> | undefined, field: string): number | null => {
    if (money?.amount === undefined) return null;
    const full = { amount: money.amount, currency: money.currency ?? currency };
    sameCurrency(full, currency, field);
    return toMinorUnits(full, field);
  };
  const limit = optional(total.limitAmount, 'limitAmount');
  const available = optional(total.availableAmount, 'availableAmount') ?? Math.max(0, (limit ?? 0) - owed);
  const card =
    identification?.paymentMethod.find((method) => !method.isMultipleCreditCard) ??
    identification?.paymentMethod[0];
  const digits = (card?.identificationNumber ?? account.creditCardAccountId).replace(/\D/g, '');
  return {
    ref: cardAccountRef(account.creditCardAccountId),
    name: account.name,
    type: 'credit_card',
    currency,
    last4: digits.slice(-4).padStart(4, '0'),
    holderName,
    balance: { available, current: owed, limit },
  };
}

const DEPOSIT_TYPES: Record<string, MovementType> = {
  TED: 'transfer',
  DOC: 'transfer',
  PIX: 'transfer',
  TRANSFERENCIA_MESMA_INSTITUICAO: 'transfer',
  PACOTE_TARIFA_SERVICOS: 'fee',
  TARIFA_SERVICOS_AVULSOS: 'fee',
  FOLHA_PAGAMENTO: 'salary',
  PORTABILIDADE_SALARIO: 'salary',
  DEPOSITO: 'deposit',
  SAQUE: 'withdrawal',
  CARTAO: 'card_purchase',
  ENCARGOS_JUROS_CHEQUE_ESPECIAL: 'interest',
  RENDIMENTO_APLIC_FINANCEIRA: 'interest',
};

const CARD_TYPES: Record<string, MovementType> = {
  PAGAMENTO: 'card_purchase',
  TARIFA: 'fee',
};

/**
 * A deposit account's transaction. The ref is the bank's `transactionId`, stable across syncs once the
 * transaction is done (`TRANSACAO_EFETIVADA`); a future or processing one is pending, and its id may change
 * when it completes, which the sync engine's reconcile pairs by amount, day and description.
 */
export function mapDepositTransaction(
  transaction: ObTransaction,
  accountCurrency: string,
  zone: StatementZone = 'America/Santiago',
): BankMovement {
  sameCurrency(transaction.transactionAmount, accountCurrency, 'transactionAmount');
  const magnitude = toMinorUnits(transaction.transactionAmount, 'transactionAmount');
  const postedAt = instantOf(transaction.transactionDateTime, 'transactionDateTime');
  return {
    ref: transaction.transactionId,
    amount: transaction.creditDebitType === 'DEBITO' ? -magnitude : magnitude,
    currency: accountCurrency,
    description: transaction.transactionName,
    type: DEPOSIT_TYPES[transaction.type] ?? 'other',
    referenceId: null,
    counterparty: counterpartyOf(transaction),
    postedAt,
    transactionDate: chileanDate(postedAt, zone),
    pending: transaction.completedAuthorisedPaymentType !== 'TRANSACAO_EFETIVADA',
  };
}

/**
 * The other party, when the bank names one (a RUT, after the overlay; its bank code and account). A Brazilian
 * bank names it by CPF or CNPJ, which is no RUT: the counterparty's `rut` stays null there.
 */
function counterpartyOf(transaction: ObTransaction): BankMovement['counterparty'] {
  if (transaction.partieCnpjCpf === undefined && transaction.partieNumber === undefined) return null;
  return {
    name: '',
    rut: transaction.partieCnpjCpf === undefined ? null : normaliseRut(transaction.partieCnpjCpf),
    bankId: null,
    accountLast4: transaction.partieNumber?.slice(-4) ?? null,
  };
}

/**
 * A card transaction, in the account's currency (`brazilianAmount`, CLP here). A debit (a purchase, a
 * fee) is money out, negative; a credit (a payment, a refund, cashback) positive. One not yet on a bill
 * (no `billId`) is pending, as the sandbox marks unbilled charges.
 */
export function mapCardTransaction(
  transaction: ObCardTransaction,
  accountCurrency: string,
  zone: StatementZone = 'America/Santiago',
): BankMovement {
  sameCurrency(transaction.brazilianAmount, accountCurrency, 'brazilianAmount');
  const magnitude = toMinorUnits(transaction.brazilianAmount, 'brazilianAmount');
  const postedAt = instantOf(transaction.transactionDateTime, 'transactionDateTime');
  return {
    ref: transaction.transactionId,
    amount: transaction.creditDebitType === 'DEBITO' ? -magnitude : magnitude,
    currency: accountCurrency,
    description: transaction.transactionName,
    type: CARD_TYPES[transaction.transactionType] ?? 'other',
    referenceId: null,
    counterparty: null,
    postedAt,
    transactionDate: chileanDate(postedAt, zone),
    pending: transaction.billId === undefined,
  };
}

/**
 * A page of transactions: one bad row fails the whole answer (a sync is all or nothing), naming the row
 * by its position, never by its content.
 */
export function mapAll<T>(rows: T[], map: (row: T) => BankMovement): BankMovement[] {
  return rows.map((row, index) => {
    try {
      return map(row);
    } catch (error) {
      if (error instanceof ConnectorError) throw bad(`transaction ${index}: ${error.message}`);
      throw error;
    }
  });
}
