/*
 * What the simulated banks know of their customers' money, in the bank's own terms: the port through which the
 * process that starts a bank hands it its data. The bank imports nothing of the appliance's banks (issue 41),
 * so in test mode the composition root adapts the credential sandbox's generator to this port
 * (src/test-mode/sandbox-customer-data.ts): the same person then has the same accounts and movements at the
 * credential sandbox and at both consent banks. A test may hand a bank data of its own.
 *
 * A customer is named by the sandbox RUT whose data they read (the Brazilian bank maps its CPFs to RUTs).
 * Amounts are signed minor units of the account's currency (negative is money out).
 */

/** What an account is, as the Open Finance files tell products apart. */
export type Product = 'checking' | 'savings' | 'prepaid' | 'credit_card';

export interface CustomerAccount {
  /** The bank's id of the account, stable across calls (the files' `accountId`, `creditCardAccountId`). */
  id: string;
  product: Product;
  name: string;
  /** The currency the account is kept in where the customer data lives (CLP or USD). */
  currency: string;
  /** The last four digits of the account or card number. */
  last4: string;
  /** Six digits that start the account's number (its branch and product). */
  code: string;
  /** Credit limit in minor units (cards only). */
  limit: number | null;
}

/** What an entry is, in the generator's words; each market names it as its files do. */
export type EntryKind =
  'transfer' | 'card_purchase' | 'deposit' | 'withdrawal' | 'fee' | 'interest' | 'salary' | 'other';

export interface CustomerEntry {
  /** The bank's id of the entry: a scheduled entry keeps it when it is booked. */
  id: string;
  amount: number;
  currency: string;
  description: string;
  kind: EntryKind;
  /** When it was booked, or (scheduled) when it will be; ms since the epoch. */
  bookedAt: number;
  /** The day of the transaction, `YYYY-MM-DD`. */
  transactionDate: string;
  /**
   * `booked`; `pending` (authorised, not yet booked: a card hold); `scheduled` (dated in the future: a standing
   * order or a payroll credit the bank already knows of, accounts 2.4.2's `LANCAMENTO_FUTURO`).
   */
  status: 'booked' | 'pending' | 'scheduled';
  /** The counterparty's RUT, when the entry names one. */
  counterpartyRut: string | null;
}

export interface CustomerData {
  /**
   * The customer's full name as the bank has it on record (its ID tokens' `name` in Chile, its customers API's
   * `civilName` in Brazil); null when it has none.
   */
  name(customer: string): string | null;
  /** The customer's open accounts and cards at `now`, in a stable order. */
  accounts(customer: string, now: number): CustomerAccount[];
  /**
   * The entries of an account with `bookedAt` in [from, to), newest first, as the bank shows them at `now`:
   * entries after `now` are the scheduled ones.
   */
  entries(customer: string, account: CustomerAccount, from: number, to: number, now: number): CustomerEntry[];
  /** Booked and pending sums at `now` (a card's booked sum is what is owed, positive). */
  balance(customer: string, account: CustomerAccount, now: number): { booked: number; pending: number };
}
