import { normaliseRut } from '../../rut/rut.js';
import { UNPRINTABLE } from './bank-answers.js';
import {
  ConnectorError,
  type AccountType,
  type BankAccount,
  type BankMovement,
  type MovementType,
} from '../connector.js';

/*
 * Pure functions from Open Finance Brasil–shaped answers (accounts 2.4.2, credit cards 2.3.1: as published
 * in BRL with CPF/CNPJ at a Brazilian bank, adapted to CLP and RUT at a Chilean one; checked first by
 * data-schemas.ts) to the connector interface's accounts and movements. No I/O: the consent connector
 * fetches, checks, then calls these. Each field is read as the file's own description defines it (the
 * schema and field are named where it matters); anything a schema cannot say (an amount CLP cannot hold, a
 * date that does not exist, a fixed limit without its amount) raises `invalid_bank_data` with the reason.
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
  /**
   * `CreditCardsAccountPaymentMethod`: the account's cards ("virtual/adicional/titular"), in the order the
   * bank's own channels show them. `identificationNumber` is the card's last four digits for a person, an
   * identifier for a company; `isMultipleCreditCard` says the card also has a debit function, nothing about
   * who holds it.
   */
  paymentMethod: { identificationNumber: string; isMultipleCreditCard: boolean }[];
}

/** credit cards 2.3.1 `CreditCardAccountsLimitsData`. */
export interface ObCardLimit {
  creditLineLimitType: 'LIMITE_CREDITO_TOTAL' | 'LIMITE_CREDITO_MODALIDADE_OPERACAO';
  consolidationType: 'CONSOLIDADO' | 'INDIVIDUAL';
  identificationNumber: string;
  lineName?: string;
  isLimitFlexible: boolean;
  /** `CreditCardsLimitAmount`: both fields are "obrigatório caso isLimitFlexible for igual a false". */
  limitAmount?: Partial<Money>;
  /** `CreditCardsUsedAmount`: always given; negative when the holder is in credit. */
  usedAmount: Money;
  /** `CreditCardsAvailableAmount`: "obrigatório caso isLimitFlexible for igual a false". */
  availableAmount?: Partial<Money>;
}

/** credit cards 2.3.1 `CreditCardAccountsTransaction`. */
export interface ObCardTransaction {
  transactionId: string;
  identificationNumber: string;
  transactionName: string;
  /** Only on a closed bill: "não é esperado em casos de transação em fatura aberta". */
  billId?: string;
  creditDebitType: 'CREDITO' | 'DEBITO';
  transactionType: string;
  transactionalAdditionalInfo?: string;
  /** `A_VISTA` or `A_PRAZO` (in instalments), compulsory for PAGAMENTO. */
  paymentType?: string;
  feeType?: string;
  feeTypeAdditionalInfo?: string;
  /** Which credit operation, compulsory for OPERACOES_CREDITO_CONTRATADAS_CARTAO. */
  otherCreditsType?: string;
  otherCreditsAdditionalInfo?: string;
  chargeIdentificator?: number;
  chargeNumber?: number;
  /** The amount in Brazil's currency ("convertido para BRL", or `amount` itself); CLP at a Chilean bank. */
  brazilianAmount: Money;
  /** The original amount, "sem convertê-lo", in the currency of the purchase. */
  amount: Money;
  transactionDateTime: string;
  /** The day it went on a bill; `0001-01-01` ("data dummy") while it is on none. */
  billPostDate: string;
  /** The merchant's category code (ISO 18245). */
  payeeMCC?: number;
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

/** `YYYY-MM-DD` of an instant in Chile (America/Santiago) or `zone`: the day on the holder's statement. */
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
 * A deposit account with its balances (`AccountBalancesData`). `available` is `availableAmount`, "para
 * utilização imediata … sem considerar cheque especial e investimentos"; `current` what the account holds,
 * available plus `blockedAmount`. `automaticallyInvestedAmount` is "a soma do saldo disponível acrescido do
 * valor obtido a partir da aplicação automática": the available balance plus money in an investment, which is
 * not in the account, so it counts in neither.
 */
export function mapDepositAccount(account: ObAccount, balances: ObBalances, holderName: string): BankAccount {
  const { currency, balance } = depositBalance(balances);
  const kind = ACCOUNT_NAMES[account.type];
  return {
    ref: depositAccountRef(account.accountId),
    name: `${kind.name} ${account.number.slice(-4)}`,
    type: kind.type,
    currency,
    last4: account.number.slice(-4),
    holderName,
    balance,
  };
}

/** An account's balances answer as minor units: `current` is what is available and what is blocked. */
export function depositBalance(balances: ObBalances): { currency: string; balance: BankAccount['balance'] } {
  const currency = balances.availableAmount.currency;
  sameCurrency(balances.blockedAmount, currency, 'blockedAmount');
  const available = toMinorUnits(balances.availableAmount, 'availableAmount');
  const blocked = toMinorUnits(balances.blockedAmount, 'blockedAmount');
  return { currency, balance: { available, current: available + blocked, limit: null } };
}

/** A card's balance in minor units; null where the bank states no figure (connector.ts, `BankAccount`). */
type CardBalance = BankAccount['balance'];

/**
 * A credit card account, its figures read as credit cards 2.3.1 defines them
 * (`CreditCardAccountsLimitsData`): `current` is what is owed (`usedAmount`, positive; negative when the
 * holder is in credit), `available` what can still be used (`availableAmount`, as the bank states it, never
 * computed), `limit` the credit line (`limitAmount`). `currency` says what the figures are in when the limits
 * list is empty and so names none: the national currency (Brazil: BRL, "a moeda vigente do Brasil" of every
 * limit in the file).
 */
export function mapCardAccount(
  account: ObCardAccount,
  identification: ObCardIdentification | null,
  limits: ObCardLimit[],
  holderName: string,
  currency?: string,
): BankAccount {
  const { currency: cardCurrency, balance } = cardFigures(limits, currency);
  return {
    ref: cardAccountRef(account.creditCardAccountId),
    name: account.name,
    type: 'credit_card',
    currency: cardCurrency,
    last4: cardLast4(account, identification),
    holderName,
    balance,
  };
}

/** A card's limits answer as its currency and figures (`currency`: the national one, for an empty list). */
export function cardFigures(
  limits: ObCardLimit[],
  currency?: string,
): { currency: string; balance: BankAccount['balance'] } {
  const cardCurrency = (accountLines(limits)[0] ?? limits[0])?.usedAmount.currency ?? currency;
  if (cardCurrency === undefined)
    throw bad(`the credit card's limits list is empty and nothing says its currency`);
  return { currency: cardCurrency, balance: cardBalance(limits, cardCurrency) };
}

/**
 * The lines that speak for the whole account (`EnumCreditCardAccountsLineLimitType`, `…ConsolidationType`):
 * - LIMITE_CREDITO_TOTAL is the account's total line. LIMITE_CREDITO_MODALIDADE_OPERACAO lines are
 *   sub-limits per `lineName` (purchases in instalments, cash withdrawals, …) within the same credit,
 *   overlapping it and each other: none of them, nor their sum, is the card's limit or debt.
 * - CONSOLIDADO: one limit "compartilhado entre todos os métodos de pagamento", counted once however many
 *   cards' lines repeat it. INDIVIDUAL: "cada método de pagamento possui seu limite segregado", one total
 *   line per card (`identificationNumber`), and the account holds their sum.
 */
function accountLines(limits: ObCardLimit[]): ObCardLimit[] {
  const totals = limits.filter((line) => line.creditLineLimitType === 'LIMITE_CREDITO_TOTAL');
  const shared = totals.find((line) => line.consolidationType === 'CONSOLIDADO');
  if (shared) return [shared];
  const cards = new Set<string>();
  return totals.filter(
    (line) => !cards.has(line.identificationNumber) && cards.add(line.identificationNumber),
  );
}

/**
 * The account's figures. No total line gives no figures, not zeros (an empty list is "a ausência da
 * informação", `ResponseCreditCardAccountsLimits`; modality lines alone say nothing of the whole): a lender
 * must not read a card with an unknown debt as one owing nothing.
 */
function cardBalance(limits: ObCardLimit[], currency: string): CardBalance {
  const lines = accountLines(limits).map((line) => lineBalance(line, currency));
  if (lines.length === 0) return { available: null, current: null, limit: null };
  const sum = (figure: keyof CardBalance) =>
    lines.reduce<number | null>(
      (total, line) => (total === null || line[figure] === null ? null : total + line[figure]),
      0,
    );
  return { available: sum('available'), current: sum('current'), limit: sum('limit') };
}

/**
 * One total line. `isLimitFlexible`: "limite total flexível ou 'sem limite'", so no fixed limit, whatever
 * `limitAmount` says; its `availableAmount` is optional and null when absent. A fixed limit must give both
 * ("obrigatório caso isLimitFlexible for igual a false"): one without is refused, since any stand-in would be
 * an invented figure.
 */
function lineBalance(line: ObCardLimit, currency: string): CardBalance {
  sameCurrency(line.usedAmount, currency, 'usedAmount');
  const current = toMinorUnits(line.usedAmount, 'usedAmount');
  const amount = (money: Partial<Money> | undefined, field: 'limitAmount' | 'availableAmount') => {
    if (money?.amount === undefined) {
      if (line.isLimitFlexible) return null;
      throw bad(`${field} is missing on a fixed limit line (isLimitFlexible false), which the file requires`);
    }
    const full = { amount: money.amount, currency: money.currency ?? currency };
    sameCurrency(full, currency, field);
    return toMinorUnits(full, field);
  };
  const available = amount(line.availableAmount, 'availableAmount');
  const limit = line.isLimitFlexible ? null : amount(line.limitAmount, 'limitAmount');
  return { available, current, limit };
}

/**
 * The last four digits of the account's card: the first of `paymentMethod` (the order of the bank's own
 * channels) whose `identificationNumber` is four digits, as the file gives them for a person. A company's
 * cards carry identifiers instead, which are no card number; then, as before, the account id's last digits.
 */
function cardLast4(account: ObCardAccount, identification: ObCardIdentification | null): string {
  const card = identification?.paymentMethod.find((method) => /^\d{4}$/.test(method.identificationNumber));
  if (card) return card.identificationNumber;
  return account.creditCardAccountId.replace(/\D/g, '').slice(-4).padStart(4, '0');
}

/**
 * accounts 2.4.2 `EnumTransactionTypes`, each to the nearest of the appliance's movement types
 * (connector.ts; the API may not grow new values here). The appliance has no bill-payment, investment or
 * loan type, so:
 * - BOLETO and CONVENIO_ARRECADACAO (a bank slip; a utility or tax collected by agreement) pay or receive
 *   money from a third party named by CPF/CNPJ (`partieCnpjCpf`, compulsory for payments since IN BCB 371):
 *   `transfer`.
 * - RESGATE_APLIC_FINANCEIRA is the holder's own money back from an investment, which the appliance's own
 *   sandbox books as a `transfer` (`RESCATE FONDO MUTUO`); its yield, RENDIMENTO_APLIC_FINANCEIRA, is
 *   `interest`.
 * - OPERACAO_CREDITO is a loan paid out or an instalment paid back, money between the holder and a lender,
 *   as the sandbox books a card's payment: `transfer`. ENCARGOS_JUROS_CHEQUE_ESPECIAL is the overdraft's
 *   cost: `interest`.
 * - PORTABILIDADE_SALARIO is the salary itself, forwarded from the payroll bank: `salary`, as
 *   FOLHA_PAGAMENTO.
 * - OUTROS, which the file keeps for what fits no other value: `other`.
 * The sign is `creditDebitType`'s, never the type's: a CARTAO credit is a refunded purchase.
 */
const DEPOSIT_TYPES = {
  TED: 'transfer',
  DOC: 'transfer',
  PIX: 'transfer',
  TRANSFERENCIA_MESMA_INSTITUICAO: 'transfer',
  BOLETO: 'transfer',
  CONVENIO_ARRECADACAO: 'transfer',
  PACOTE_TARIFA_SERVICOS: 'fee',
  TARIFA_SERVICOS_AVULSOS: 'fee',
  FOLHA_PAGAMENTO: 'salary',
  DEPOSITO: 'deposit',
  SAQUE: 'withdrawal',
  CARTAO: 'card_purchase',
  ENCARGOS_JUROS_CHEQUE_ESPECIAL: 'interest',
  RENDIMENTO_APLIC_FINANCEIRA: 'interest',
  PORTABILIDADE_SALARIO: 'salary',
  RESGATE_APLIC_FINANCEIRA: 'transfer',
  OPERACAO_CREDITO: 'transfer',
  OUTROS: 'other',
} as const satisfies Record<string, MovementType>;

/** A table's own value for `key`, never one inherited from Object.prototype (`constructor`). */
function lookup<T>(table: Readonly<Record<string, T>>, key: string | undefined): T | undefined {
  return key !== undefined && Object.hasOwn(table, key) ? table[key] : undefined;
}

/** ISO 18245 cash disbursements, manual (6010) and automated (6011): cash taken on the card. */
const CASH_MCCS: ReadonlySet<number> = new Set([6010, 6011]);

/**
 * credit cards 2.3.1 `EnumCreditCardTransactionType` (with the field each value makes compulsory), to the
 * nearest movement type; the sign is `creditDebitType`'s, as for deposit accounts:
 * - PAGAMENTO is a payment transaction: a debit is a purchase (`paymentType` A_VISTA, or A_PRAZO in
 *   instalments), `card_purchase`, or cash at an ATM or a bank counter (`payeeMCC` 6011, 6010), `withdrawal`;
 *   a credit is the bill paid, which lowers the debt, money from the holder's account: `transfer`, as the
 *   sandbox books a card's payment (`PAGO TARJETA`).
 * - TARIFA (`feeType`): `fee`; a credit is a fee waived.
 * - ESTORNO (a purchase reversed) and CASHBACK (money back on purchases) are credits to the card:
 *   `card_purchase`, which a positive amount reads as a refunded purchase (docs/income.md).
 * - OPERACOES_CREDITO_CONTRATADAS_CARTAO (`otherCreditsType`): the revolving credit's rows are its charges,
 *   `interest`; a bill in instalments, a loan on the card or another operation moves borrowed money and its
 *   repayments, `transfer` (no loan type), as OPERACAO_CREDITO on an account.
 * - OUTROS: `other`.
 */
function cardMovementType(transaction: ObCardTransaction): MovementType {
  switch (transaction.transactionType) {
    case 'PAGAMENTO':
      if (transaction.creditDebitType === 'CREDITO') return 'transfer';
      return transaction.payeeMCC !== undefined && CASH_MCCS.has(transaction.payeeMCC)
        ? 'withdrawal'
        : 'card_purchase';
    case 'TARIFA':
      return 'fee';
    case 'ESTORNO':
    case 'CASHBACK':
      return 'card_purchase';
    case 'OPERACOES_CREDITO_CONTRATADAS_CARTAO':
      return transaction.otherCreditsType === 'CREDITO_ROTATIVO' ? 'interest' : 'transfer';
    default:
      return 'other';
  }
}

/**
 * The file's magnitude with `creditDebitType`'s sign ("Débito … saídas de dinheiro", "Crédito … entradas"):
 * a debit is negative. A debit that rounds to nothing is 0, not −0, which `Object.is` and sorting tell apart.
 */
function signed(magnitude: number, creditDebitType: 'CREDITO' | 'DEBITO'): number {
  return creditDebitType === 'DEBITO' && magnitude !== 0 ? -magnitude : magnitude;
}

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
    amount: signed(magnitude, transaction.creditDebitType),
    currency: accountCurrency,
    description: transaction.transactionName,
    type: lookup<MovementType>(DEPOSIT_TYPES, transaction.type) ?? 'other',
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
 * A card transaction, in the account's currency: `brazilianAmount` ("em moeda corrente do Brasil", converted
 * for an international purchase; CLP at a Chilean bank), never `amount`, the purchase's own unconverted
 * currency. A debit (a purchase, a fee) is money out, negative; a credit (the bill paid, a reversal,
 * cashback) positive, lowering the debt. One without `billId` is on the open bill ("fatura aberta": the field
 * is for closed bills only) and pending, as connector.ts has unbilled charges; its `transactionId` becomes
 * immutable only once the bill closes (the file's "Data de imutabilidade" table).
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
    amount: signed(magnitude, transaction.creditDebitType),
    currency: accountCurrency,
    description: transaction.transactionName,
    type: cardMovementType(transaction),
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

/** A person's identification record, the members the appliance reads (customers 2.2.1 `PersonalIdentificationData`). */
export interface ObPersonalIdentification {
  civilName: string;
  socialName?: string;
  updateDateTime?: string;
}

/** The longest holder name a link keeps (`links.holder_name` is 200 characters). */
export const HOLDER_NAME_MAX = 200;

/**
 * A name the bank vouches for, as a link shows it: Unicode NFC, one line, no control or bidi characters (a
 * name is printed by the console and `svc links inspect`), spaces collapsed; null when nothing is left or it
 * is longer than a link keeps (cut, it would name someone else).
 */
export function holderNameOf(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const name = value.normalize('NFC').replace(UNPRINTABLE, ' ').replace(/\s+/g, ' ').trim();
  return name.length === 0 || name.length > HOLDER_NAME_MAX ? null : name;
}

/**
 * The holder's name in Brazil's identification records: the most recently updated record (`updateDateTime`,
 * RFC 3339 UTC; the first when none says), its `socialName` when there is one (the file: the name the person
 * identifies by and is known by, "se houver"), else its `civilName`.
 */
export function identificationName(records: readonly ObPersonalIdentification[]): string | null {
  const when = (record: ObPersonalIdentification) => {
    const at = record.updateDateTime === undefined ? NaN : Date.parse(record.updateDateTime);
    return Number.isNaN(at) ? -Infinity : at;
  };
  const latest = records.reduce<ObPersonalIdentification | null>(
    (best, record) => (best === null || when(record) > when(best) ? record : best),
    null,
  );
  if (latest === null) return null;
  return holderNameOf(latest.socialName) ?? holderNameOf(latest.civilName);
}
