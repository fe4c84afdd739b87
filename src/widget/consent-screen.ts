import { coverageOf, validUntil, type AuthorizationDetail } from '../banks/consent/authorization-details.js';
import type { ConsentCoverage } from '../banks/consent/authorization-details.js';
import { html, type Html } from '../html/html.js';
import type { Locale } from './messages.js';

/*
 * What the end user reads before going to a consent bank: what will be shared and for how long, from the
 * `authorization_details` the appliance will push to the bank, so the screen cannot promise less than the
 * request asks. Pure: details, language and time in; words (and the markup of the kit) out.
 */

const WORDS = {
  es: {
    title: 'Vas a compartir con {app}',
    accounts: 'Tus cuentas: número, tipo y titular',
    balances: 'Los saldos de tus cuentas',
    movements: 'Tus movimientos: cargos y abonos',
    credit_cards: 'Tus tarjetas de crédito: cupo, deuda y compras',
    durationOne: 'Durante 1 mes, hasta el {date}',
    durationMany: 'Durante {months} meses, hasta el {date}',
    untilRevoked: 'Hasta que lo revoques',
    revoke: 'Puedes revocar este permiso cuando quieras, aquí o en {bank}.',
    noPassword: 'Te autenticarás en {bank}; la app nunca verá tu clave.',
    continue: 'Continuar a {bank}',
    nothing: 'Este permiso no incluye datos que podamos mostrar. No continúes.',
  },
  en: {
    title: 'You are about to share with {app}',
    accounts: 'Your accounts: number, type and holder',
    balances: 'Your account balances',
    movements: 'Your movements: debits and credits',
    credit_cards: 'Your credit cards: limit, amount owed and purchases',
    durationOne: 'For 1 month, until {date}',
    durationMany: 'For {months} months, until {date}',
    untilRevoked: 'Until you revoke it',
    revoke: 'You can revoke this permission at any time, here or at {bank}.',
    noPassword: 'You will sign in at {bank}; the app never sees your password.',
    continue: 'Continue to {bank}',
    nothing: 'This permission includes no data we can show. Do not continue.',
  },
} as const satisfies Record<Locale, Record<string, string>>;

export interface ConsentScreen {
  locale: Locale;
  title: string;
  /** One line per kind of data, in a fixed order. */
  items: { coverage: ConsentCoverage; text: string }[];
  duration: string;
  notes: string[];
  button: string;
  /** False when the details ask for nothing we can word: the widget must not offer to continue. */
  canContinue: boolean;
  /** What the widget says instead of the button when it cannot continue. */
  warning: string | null;
}

const fill = (text: string, values: Record<string, string | number>) =>
  text.replace(/\{(\w+)\}/g, (whole, key: string) => (key in values ? String(values[key]) : whole));

/** Whole calendar months from `from` to `to`, rounded to the nearest (a consent of 36 months reads "36"). */
export function monthsBetween(from: number, to: number): number {
  const a = new Date(from);
  const b = new Date(to);
  const months = (b.getUTCFullYear() - a.getUTCFullYear()) * 12 + b.getUTCMonth() - a.getUTCMonth();
  const dayShift = (b.getUTCDate() - a.getUTCDate()) / 30;
  return Math.max(0, Math.round(months + dayShift));
}

/** A date as the holder's bank reads it: in its country's time zone (the profile's). */
function longDate(instant: number, locale: Locale, zone: string): string {
  return new Intl.DateTimeFormat(locale === 'es' ? 'es-CL' : 'en-GB', {
    dateStyle: 'long',
    timeZone: zone,
  }).format(instant);
}

export function consentScreen(
  details: readonly AuthorizationDetail[],
  locale: Locale,
  context: { app: string; bank: string; now: number; zone?: string },
): ConsentScreen {
  const words = WORDS[locale];
  const items = coverageOf(details).map((coverage) => ({ coverage, text: words[coverage] }));
  const until = validUntil(details);
  let duration: string = words.untilRevoked;
  if (until !== null) {
    const months = monthsBetween(context.now, until);
    duration = fill(months === 1 ? words.durationOne : words.durationMany, {
      months,
      date: longDate(until, locale, context.zone ?? 'America/Santiago'),
    });
  }
  const names = { app: context.app, bank: context.bank };
  const canContinue = items.length > 0 && (until === null || until > context.now);
  return {
    locale,
    title: fill(words.title, names),
    items,
    duration,
    notes: [fill(words.noPassword, names), fill(words.revoke, names)],
    button: fill(words.continue, names),
    canContinue,
    warning: canContinue ? null : words.nothing,
  };
}

/** The screen's content as markup of the kit; every word is text (an app's name cannot inject markup). */
export function renderConsentScreen(screen: ConsentScreen): Html {
  return html`<section class="consent" lang="${screen.locale}">
    <h2>${screen.title}</h2>
    <ul>
      ${screen.items.map((item) => html`<li data-covers="${item.coverage}">${item.text}</li>`)}
    </ul>
    <p class="consent-duration">${screen.duration}</p>
    ${screen.notes.map((note) => html`<p class="consent-note">${note}</p>`)}
    ${
      screen.canContinue
        ? html`<button type="submit" class="primary">${screen.button}</button>`
        : html`<p role="alert">${screen.warning}</p>`
    }
  </section>`;
}
