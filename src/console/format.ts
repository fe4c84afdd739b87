import { BUILT_IN_INSTITUTIONS, type Institution } from '../banks/institutions.js';
import {
  DEFAULT_ORGANISATION_NAME,
  DEFAULT_PUBLISHABLE_KEY_NAME,
  DEFAULT_SECRET_KEY_NAME,
} from '../orgs/default-names.js';
import type { Locale } from '../html/locale.js';
import { consoleMessage, type ConsoleMessageKey } from './messages.js';

/*
 * Values as a person reads them, in the page's language: money in its currency (the API keeps integers in
 * minor units), a bank by its name (the API keeps a code), and the names `svc install` chose while they are
 * unchanged. Dates are views.ts's `atMinute`, in the operator's zone (`console.timeZone`).
 */

/** The page's language as a BCP 47 tag for Intl: Chilean Spanish (the default), or American English. */
const INTL_LOCALE: Record<Locale, string> = { es: 'es-CL', en: 'en-US' };

const formats = new Map<string, Intl.NumberFormat>();

/**
 * An amount in minor units as money in the reader's locale, the minus sign first as Chile writes it: -103560
 * CLP is `-$103.560` in Spanish (ICU's es-CL pattern prints `$-103.560`, which no Chilean bank does) and
 * `-CLP 103,560` in English; -1234 USD is `-US$12,34` and `-$12.34`; -1234 BRL `-R$12,34` and `-R$12.34`.
 * In Spanish `$` alone is the peso, so the dollar keeps `US$`, while currencies ICU's es-CL writes only by
 * code (BRL, EUR) take their own sign (`R$`, `€`). The currency's decimals are ISO 4217's, as Intl knows them
 * (CLP 0, USD 2), which is how the API counts minor units. A code Intl does not know is shown as stored.
 */
export function money(amount: number, currency: string, locale: Locale): string {
  const cacheKey = `${locale}:${currency}`;
  let format = formats.get(cacheKey);
  if (!format) {
    try {
      format = new Intl.NumberFormat(INTL_LOCALE[locale], { style: 'currency', currency });
      if (
        locale === 'es' &&
        format.formatToParts(1).some((p) => p.type === 'currency' && p.value === currency)
      )
        format = new Intl.NumberFormat(INTL_LOCALE[locale], {
          style: 'currency',
          currency,
          currencyDisplay: 'narrowSymbol',
        });
    } catch {
      return `${amount} ${currency}`;
    }
    formats.set(cacheKey, format);
  }
  const decimals = format.resolvedOptions().maximumFractionDigits ?? 0;
  const text = format.format(Math.abs(amount) / 10 ** decimals);
  return amount < 0 ? `-${text}` : text;
}

/**
 * Chilean banks' own words for their deposit and credit products, longest first, as their statements write
 * them. The API's `type` has three values (a cuenta vista or cuenta RUT is `checking`, as it holds money like
 * one), so the console shows the product the bank named where the name says it.
 */
const CHILEAN_PRODUCTS = [
  'Cuenta Corriente en Dólares',
  'Cuenta de Ahorro Vivienda',
  'Cuenta de Ahorro a Plazo',
  'Cuenta Corriente',
  'Cuenta de Ahorro',
  'Cuenta Vista',
  'Cuenta RUT',
  'Chequera Electrónica',
  'Línea de Crédito',
  'Tarjeta de Crédito',
] as const;

const sameLetters = (text: string) =>
  text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase();

/**
 * The kind of account as the bank calls the product: `Cuenta vista` for an account the bank named
 * `Cuenta Vista 2` (though the API's type is `checking`), in the sentence case the console writes; the API
 * type's word (`fallback`) when the name names no product Chilean banks offer.
 */
export function productKind(accountName: string | null | undefined, fallback: string): string {
  const name = sameLetters(accountName ?? '');
  const product = CHILEAN_PRODUCTS.find((known) => {
    const word = sameLetters(known);
    return name === word || name.startsWith(`${word} `);
  });
  if (!product) return fallback;
  // Sentence case, as the console's own words: `Cuenta corriente en dólares`, but `Cuenta RUT` keeps RUT.
  return product.replace(/ (?!RUT)(\p{Lu})/gu, (_whole, letter: string) => ` ${letter.toLowerCase()}`);
}

/**
 * A bank's name (`Banco de Chile`) for its code (`bancochile`) among `institutions` (`institutionsOf` the
 * config; the built-in banks by default); an unknown code as it is.
 */
export function bankName(id: string, institutions: readonly Institution[] = BUILT_IN_INSTITUTIONS): string {
  return institutions.find((bank) => bank.id === id)?.name ?? id;
}

const INSTALL_NAMES: ReadonlyMap<string, ConsoleMessageKey> = new Map([
  [DEFAULT_ORGANISATION_NAME, 'default.organisation'],
  [DEFAULT_SECRET_KEY_NAME, 'default.secret_key'],
  [DEFAULT_PUBLISHABLE_KEY_NAME, 'default.publishable_key'],
]);

/**
 * A name as the console shows it: the ones `svc install` gave (in English, in the database) in the
 * reader's language while nobody has renamed them; any other name is a person's and shown as written.
 */
export function shownName(locale: Locale, name: string): string {
  const key = INSTALL_NAMES.get(name);
  return key ? consoleMessage(locale, key) : name;
}
