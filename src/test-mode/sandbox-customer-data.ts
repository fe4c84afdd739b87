import type { BankMovement } from '../banks/connector.js';
import {
  HISTORY_START,
  balanceAt,
  generationContext,
  rowsBetween,
  rowsOfDay,
} from '../banks/sandbox/generator.js';
import { buildProfile, isPresent, type AccountSpec, type Profile } from '../banks/sandbox/profile.js';
import type {
  CustomerAccount,
  CustomerData,
  CustomerEntry,
  EntryKind,
  Product,
} from '../consent-bank/customer-data.js';

/*
 * The simulated consent banks' customers, read from the credential sandbox's generator (src/banks/sandbox/):
 * the same person at the same bank code has the same accounts and movements at the credential sandbox and at
 * the consent banks. This adapter is the one place the two meet, so that the banks themselves import nothing
 * of the appliance's banks (issue 41).
 *
 * Scheduled entries: the generator knows every future day's rows, so the entries a bank would already hold
 * for the days after `now` are those rows of the kinds a bank schedules (the payroll credit an employer files
 * ahead, the monthly fee, standing payments such as the F29 tax). Each keeps its id when the day comes and it
 * is booked, as at a bank.
 */

/** The bank code whose sandbox data the consent banks serve (names of cards, the generator's seeds). */
export const CONSENT_BANK_DATA_BANK = 'bancochile';
const DAY_MS = 86_400_000;
/** Kinds a bank knows ahead of the day (see above); card purchases and transfers are not scheduled. */
const SCHEDULED_KINDS = new Set<EntryKind>(['salary', 'fee', 'other']);

function profileOf(rut: string): Profile {
  return buildProfile({ bankId: CONSENT_BANK_DATA_BANK, holderType: 'individual', rut, rutEmpresa: null });
}

function productOf(spec: AccountSpec): Product {
  if (spec.type === 'credit_card') return 'credit_card';
  if (spec.kind === 'savings' || spec.kind === 'vivienda') return 'savings';
  if (spec.kind === 'vista') return 'prepaid';
  return 'checking';
}

function accountOf(spec: AccountSpec): CustomerAccount {
  return {
    id: spec.ref,
    product: productOf(spec),
    name: spec.name,
    currency: spec.currency,
    last4: spec.last4,
    code: spec.code,
    limit: spec.limit,
  };
}

/** The bank's id of a row: its ref, made to fit the files' id pattern (`^[a-zA-Z0-9][a-zA-Z0-9-]{0,99}$`). */
function entryIdOf(movement: BankMovement): string {
  const raw = movement.ref ?? `ref-${movement.referenceId ?? movement.postedAt}`;
  return raw
    .replace(/[^a-zA-Z0-9-]/g, '-')
    .replace(/^-+/, 'x')
    .slice(0, 100);
}

function entryOf(movement: BankMovement, status: CustomerEntry['status']): CustomerEntry {
  return {
    id: entryIdOf(movement),
    amount: movement.amount,
    currency: movement.currency,
    description: movement.description,
    kind: movement.type,
    bookedAt: movement.postedAt,
    transactionDate: movement.transactionDate,
    status,
    counterpartyRut: movement.counterparty?.rut ?? null,
  };
}

/** The rows of the days after `now` up to `to` that a bank already holds as scheduled. */
function scheduledRows(profile: Profile, spec: AccountSpec, from: number, to: number, now: number) {
  if (spec.type === 'credit_card' || to <= now) return [];
  const context = generationContext(profile);
  const rows: BankMovement[] = [];
  const lower = Math.max(from, now);
  for (let day = Math.floor(lower / DAY_MS); day * DAY_MS < to; day++)
    for (const row of rowsOfDay(context, spec, day)) {
      const m = row.movement;
      if (m.postedAt <= lower || m.postedAt >= to || row.repeat || row.postsAt !== null) continue;
      if (SCHEDULED_KINDS.has(m.type)) rows.push(m);
    }
  return rows.sort((a, b) => a.postedAt - b.postedAt);
}

export function sandboxCustomerData(): CustomerData {
  const specOf = (customer: string, account: CustomerAccount) => {
    const spec = profileOf(customer).accounts.find((s) => s.ref === account.id);
    if (!spec) throw new Error(`no account ${account.id} for this customer`);
    return spec;
  };
  return {
    // The credential sandbox's holder of the same RUT: a consent link names the person a password link does.
    name: (customer) => profileOf(customer).holderName,
    accounts(customer) {
      const profile = profileOf(customer);
      return profile.accounts.filter((spec) => isPresent(spec.kind, profile.ownerRut, 0)).map(accountOf);
    },
    entries(customer, account, from, to, now) {
      const profile = profileOf(customer);
      const spec = specOf(customer, account);
      const past = rowsBetween(generationContext(profile), spec, Math.max(from, HISTORY_START), to, now);
      const entries = [
        ...past.map((m) => entryOf(m, m.pending ? 'pending' : 'booked')),
        ...scheduledRows(profile, spec, from, to, now).map((m) => entryOf(m, 'scheduled')),
      ];
      // Newest first, as banks list them.
      return entries.sort((a, b) => b.bookedAt - a.bookedAt || b.id.localeCompare(a.id));
    },
    balance(customer, account, now) {
      const spec = specOf(customer, account);
      const balance = balanceAt(generationContext(profileOf(customer)), spec, now);
      const booked =
        spec.type === 'credit_card' ? spec.opening - balance.posted : spec.opening + balance.posted;
      return { booked, pending: balance.pending };
    },
  };
}
