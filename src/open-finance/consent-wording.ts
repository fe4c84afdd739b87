/*
 * What a consent shares, in the end user's words: one wording that the widget's consent screen (which says
 * "{bank} te mostrará esta misma lista") and the simulated bank's consent page both print, so the list the
 * person confirms at the bank is, word for word, the list the widget promised. The widget (src/widget/) and
 * the simulated banks (src/consent-bank/) both import it; neither imports the other.
 */

export type ConsentLanguage = 'es' | 'en';

/** What a consent may cover, in the end user's terms, in the order both screens list it. */
export type SharedData = 'accounts' | 'balances' | 'movements' | 'credit_cards';
export const SHARED_DATA_ORDER: readonly SharedData[] = ['accounts', 'balances', 'movements', 'credit_cards'];

/** Which RAR action (the CMF draft's `Accounts` type, RFC 9396 §2) lets each kind be read. */
export const ACTION_SHARES: Readonly<Record<string, SharedData>> = {
  ReadAccounts: 'accounts',
  ReadBalances: 'balances',
  ReadTransactions: 'movements',
  ReadCreditCards: 'credit_cards',
};

export const SHARED_DATA_WORDS: Readonly<Record<ConsentLanguage, Readonly<Record<SharedData, string>>>> = {
  es: {
    accounts: 'Tus cuentas: número, tipo y titular',
    balances: 'Los saldos de tus cuentas',
    movements: 'Tus movimientos: cargos y abonos',
    credit_cards: 'Tus tarjetas de crédito: cupo, deuda y compras',
  },
  en: {
    accounts: 'Your accounts: number, type and holder',
    balances: 'Your account balances',
    movements: 'Your movements: debits and credits',
    credit_cards: 'Your credit cards: limit, amount owed and purchases',
  },
};

/**
 * What names the holder, when a consent asks for it; both screens list it first. `name`: the one claim a Chilean
 * consent asks for in its ID token (OpenID Connect Core 1.0 §5.1 `name`, asked with the `claims` parameter,
 * §5.5). `identification`: Open Finance Brasil's identification record of a person (customers 2.2.1,
 * `GET /personal/identifications`), which the permission CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ opens whole
 * (name, documents, birth date, contacts): the line says the person's details, not only their name, though the
 * appliance keeps only the name. One line: with its CPF field the Brazilian screen has no room for a second at
 * 1280×800; the bank's own page lists them.
 */
export type HolderData = 'name' | 'identification';

export const HOLDER_DATA_WORDS: Readonly<Record<ConsentLanguage, Readonly<Record<HolderData, string>>>> = {
  es: {
    name: 'Tu nombre, como lo tiene registrado el banco',
    identification: 'Tus datos personales en el banco',
  },
  en: {
    name: 'Your name, as the bank has it on record',
    identification: 'Your personal details at the bank',
  },
};

/** The kinds the actions allow, once each, in SHARED_DATA_ORDER; unknown actions add nothing. */
export function sharedDataOf(actions: Iterable<string>): SharedData[] {
  const wanted = new Set<SharedData>();
  for (const action of actions) {
    // Own keys only: an action named `constructor` must not find Object's.
    if (Object.hasOwn(ACTION_SHARES, action)) wanted.add(ACTION_SHARES[action]!);
  }
  return SHARED_DATA_ORDER.filter((data) => wanted.has(data));
}

/**
 * A consent's last day as the holder's bank reads it, in its country's time zone: `29 de noviembre de 2027`,
 * `29 November 2027` (Intl's long date style for es-CL and en-GB).
 */
export function consentEndDate(instant: number, language: ConsentLanguage, zone: string): string {
  return new Intl.DateTimeFormat(language === 'es' ? 'es-CL' : 'en-GB', {
    dateStyle: 'long',
    timeZone: zone,
  }).format(instant);
}

/** The end as a sentence: "Hasta el 29 de noviembre de 2027", "Until 29 November 2027". */
export function consentUntil(instant: number, language: ConsentLanguage, zone: string): string {
  const date = consentEndDate(instant, language, zone);
  return language === 'es' ? `Hasta el ${date}` : `Until ${date}`;
}
