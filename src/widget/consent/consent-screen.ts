import {
  coverageOf,
  validUntil,
  type AuthorizationDetail,
} from '../../banks/consent/authorization-details.js';
import type { ConsentCoverage } from '../../banks/consent/authorization-details.js';
import { html, type Html } from '../../html/html.js';
import {
  consentEndDate,
  HOLDER_DATA_WORDS,
  SHARED_DATA_WORDS,
  type HolderData,
} from '../../open-finance/consent-wording.js';
import type { Locale } from '../../html/locale.js';

/*
 * What the end user reads before going to a consent bank: what will be shared and for how long, from the
 * `authorization_details` the appliance will push to the bank, so the screen cannot promise less than the
 * request asks. What is shared is worded in src/open-finance/consent-wording.ts, which the simulated bank's
 * consent page prints too: the widget promises the bank shows "esta misma lista". Pure: details, language and time in; words (and the markup of the kit) out.
 */

// `noPassword` names the bank only: the widget's footer, on every screen, already says the app never sees the
// password, and the repeat cost a line the Brazilian screen (CPF field and "another bank") needs to fit 1280x800.
const WORDS = {
  es: {
    title: 'Vas a compartir con {app}',
    durationOne: 'Durante 1 mes, hasta el {date}',
    durationMany: 'Durante {months} meses, hasta el {date}',
    untilRevoked: 'Hasta que lo revoques',
    revoke: 'Puedes revocar este permiso cuando quieras, aquí o en {bank}.',
    noPassword: 'Te autenticarás en {bank}.',
    continue: 'Continuar a {bank}',
    nothing: 'Este permiso no incluye datos que podamos mostrar. No continúes.',
  },
  en: {
    title: 'You are about to share with {app}',
    durationOne: 'For 1 month, until {date}',
    durationMany: 'For {months} months, until {date}',
    untilRevoked: 'Until you revoke it',
    revoke: 'You can revoke this permission at any time, here or at {bank}.',
    noPassword: 'You will sign in at {bank}.',
    continue: 'Continue to {bank}',
    nothing: 'This permission includes no data we can show. Do not continue.',
  },
} as const satisfies Record<Locale, Record<string, string>>;

export interface ConsentScreen {
  locale: Locale;
  title: string;
  /** One line per kind of data, in a fixed order: what names the holder first, when it is asked. */
  items: { coverage: ConsentCoverage | HolderData; text: string }[];
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

export function consentScreen(
  details: readonly AuthorizationDetail[],
  locale: Locale,
  context: { app: string; bank: string; now: number; zone?: string; holder?: HolderData | null },
): ConsentScreen {
  const words = WORDS[locale];
  const until = validUntil(details);
  const covered = coverageOf(details).map((coverage) => ({
    coverage: coverage as ConsentCoverage | HolderData,
    text: SHARED_DATA_WORDS[locale][coverage],
  }));
  const holder = context.holder ?? null;
  const items = holder
    ? [{ coverage: holder, text: HOLDER_DATA_WORDS[locale][holder] }, ...covered]
    : covered;
  let duration: string = words.untilRevoked;
  if (until !== null) {
    const months = monthsBetween(context.now, until);
    duration = fill(months === 1 ? words.durationOne : words.durationMany, {
      months,
      date: consentEndDate(until, locale, context.zone ?? 'America/Santiago'),
    });
  }
  const names = { app: context.app, bank: context.bank };
  // The name alone is no reason to connect: a link reads accounts or cards.
  const canContinue = covered.length > 0 && (until === null || until > context.now);
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
