import { BUILT_IN_INSTITUTIONS, type Institution } from '../banks/institutions.js';
import {
  DEFAULT_ORGANISATION_NAME,
  DEFAULT_PUBLISHABLE_KEY_NAME,
  DEFAULT_SECRET_KEY_NAME,
} from '../orgs/default-names.js';
import type { Locale } from '../widget/messages.js';
import { consoleMessage, type ConsoleMessageKey } from './messages.js';

/*
 * Values as a person reads them, in the page's language: money in its currency (the API keeps integers in
 * minor units), a bank by its name (the API keeps a code), and the names `svc install` chose while they are
 * unchanged. Dates are views.ts's `atMinute`, in UTC and saying so.
 */

/** The page's language as a BCP 47 tag for Intl: Chilean Spanish (the default), or American English. */
const INTL_LOCALE: Record<Locale, string> = { es: 'es-CL', en: 'en-US' };

const formats = new Map<string, Intl.NumberFormat>();

/**
 * An amount in minor units as money in the reader's locale: -138100 CLP is `-$138.100` in Spanish and
 * `-CLP 138,100` in English; 1234 USD is `US$12,34` and `$12.34`. The currency's decimals are ISO 4217's,
 * as Intl knows them (CLP 0, USD 2), which is how the API counts minor units. A code Intl does not know is
 * shown as it is stored.
 */
export function money(amount: number, currency: string, locale: Locale): string {
  const cacheKey = `${locale}:${currency}`;
  let format = formats.get(cacheKey);
  if (!format) {
    try {
      format = new Intl.NumberFormat(INTL_LOCALE[locale], { style: 'currency', currency });
    } catch {
      return `${amount} ${currency}`;
    }
    formats.set(cacheKey, format);
  }
  const decimals = format.resolvedOptions().maximumFractionDigits ?? 0;
  return format.format(amount / 10 ** decimals);
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
