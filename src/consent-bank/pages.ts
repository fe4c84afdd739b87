import { html, type Html } from '../html/html.js';
import type { AccountAction } from './authorization-details.js';
import {
  consentUntil,
  HOLDER_DATA_WORDS,
  SHARED_DATA_WORDS,
  sharedDataOf,
} from '../open-finance/consent-wording.js';

/** The bank's own day: a Chilean bank dates a consent's end in Chile. */
const CHILE_ZONE = 'America/Santiago';

/*
 * The simulated bank's own pages: sign-in and consent, in Spanish and English. Built with the HTML kit like
 * every page of the product; the bank's look is deliberately plain and its own, so that a person walking
 * through the flow sees they have left the appliance for "the bank". What is shared is worded as the widget words
 * it (src/open-finance/consent-wording.ts): the widget tells the person the bank shows "esta misma lista".
 */

export type Language = 'es' | 'en';

/**
 * The bank's name on its own pages. The appliance lists the bank under the same name (src/banks/institutions.ts;
 * a test keeps the two equal), so that the person who pressed "Continue to Banco Abierto (simulado)" in the
 * widget lands on a page of that name. Stated here because the bank imports nothing of the appliance's banks.
 */
export const CHILE_BANK_NAME = 'Banco Abierto (simulado)';
const BANK_NAME = CHILE_BANK_NAME;

const WORDS = {
  es: {
    bank: BANK_NAME,
    signInTitle: 'Ingresa a tu banco',
    signInLead: 'Estás en el sitio de tu banco. Ingresa con tu RUT y tu clave.',
    rut: 'RUT',
    password: 'Clave',
    signIn: 'Ingresar',
    wrong: 'RUT o clave incorrectos.',
    consentTitle: 'Autoriza el acceso a tus datos',
    consentLead: (client: string) => `${client} pide acceso a estos datos:`,
    approve: 'Autorizar',
    refuse: 'Rechazar',
    signedInAs: (rut: string) => `Ingresaste como ${rut}.`,
    sandbox: 'Banco de prueba: no hay dinero real.',
    gone: 'Esta solicitud ya no está vigente. Vuelve a la aplicación e inténtalo de nuevo.',
  },
  en: {
    bank: BANK_NAME,
    signInTitle: 'Sign in to your bank',
    signInLead: 'You are on your bank’s site. Sign in with your RUT and password.',
    rut: 'RUT',
    password: 'Password',
    signIn: 'Sign in',
    wrong: 'Wrong RUT or password.',
    consentTitle: 'Allow access to your data',
    consentLead: (client: string) => `${client} asks to see:`,
    approve: 'Approve',
    refuse: 'Refuse',
    signedInAs: (rut: string) => `Signed in as ${rut}.`,
    sandbox: 'Test bank: no real money.',
    gone: 'This request is no longer valid. Go back to the app and try again.',
  },
} as const;

/** `ui_locales` first (space-separated, in order), then Accept-Language, then Spanish. */
export function pickLanguage(uiLocales: unknown, acceptLanguage: string | undefined): Language {
  const wanted = [
    ...(typeof uiLocales === 'string' ? uiLocales.split(/\s+/) : []),
    ...(acceptLanguage ?? '').split(',').map((part) => part.split(';')[0]?.trim() ?? ''),
  ];
  for (const tag of wanted) {
    const primary = tag.toLowerCase().split('-')[0];
    if (primary === 'es' || primary === 'en') return primary;
  }
  return 'es';
}

export const PAGE_CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
];

function frame(language: Language, title: string, body: Html): Html {
  const words = WORDS[language];
  return bankFrame({ lang: language, bank: words.bank, note: words.sandbox }, title, body);
}

/** The page around a simulated bank's content (the Brazilian bank's pages use it too: brasil/pages.ts). */
export function bankFrame(
  words: { lang: string; bank: string; note: string },
  title: string,
  body: Html,
): Html {
  return html`<!doctype html>
<html lang="${words.lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · ${words.bank}</title>
<style>
body { font-family: Georgia, serif; background: #f3efe6; color: #1d2a24; margin: 0; }
header { background: #1d4d3a; color: #fff; padding: 0.8rem 1.2rem; font-weight: bold; }
main { max-width: 28rem; margin: 1.5rem auto; background: #fff; padding: 1.2rem 1.4rem; border-radius: 6px; }
label { display: block; margin-top: 0.8rem; }
input { width: 100%; box-sizing: border-box; padding: 0.5rem; font-size: 1rem; }
button { margin-top: 1rem; padding: 0.6rem 1rem; font-size: 1rem; }
.approve { background: #1d4d3a; color: #fff; border: 0; }
.error { color: #a11; }
small { color: #555; }
</style>
</head>
<body>
<header>${words.bank}</header>
<main>
<h1>${title}</h1>
${body}
<p><small>${words.note}</small></p>
</main>
</body>
</html>`;
}

export function signInPage(language: Language, action: string, failed: boolean, rut: string): Html {
  const words = WORDS[language];
  return frame(
    language,
    words.signInTitle,
    html`<p>${words.signInLead}</p>
${failed && html`<p class="error" role="alert">${words.wrong}</p>`}
<form method="post" action="${action}">
<label for="rut">${words.rut}</label>
<input id="rut" name="rut" autocomplete="username" value="${rut}" required>
<label for="password">${words.password}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button class="approve" type="submit">${words.signIn}</button>
</form>`,
  );
}

export interface ConsentView {
  /** The requester as its registration names it (`client_name`, RFC 7591 §2): the operator's widget name. */
  clientName: string;
  rut: string;
  actions: AccountAction[];
  /** The request asks for the person's `name` claim (OpenID Connect Core §5.5): listed first, as the widget does. */
  name: boolean;
  /** The asked `validTo` (RFC 3339), or null for the default length. */
  validTo: string | null;
  approveAction: string;
  refuseAction: string;
}

export function consentPage(language: Language, view: ConsentView): Html {
  const words = WORDS[language];
  const parsed = view.validTo === null ? NaN : Date.parse(view.validTo);
  const until = Number.isNaN(parsed) ? null : parsed;
  return frame(
    language,
    words.consentTitle,
    html`<p>${words.signedInAs(view.rut)}</p>
<p>${words.consentLead(view.clientName)}</p>
<ul>${view.name && html`<li data-covers="name">${HOLDER_DATA_WORDS[language].name}</li>`}${sharedDataOf(view.actions).map((data) => html`<li data-covers="${data}">${SHARED_DATA_WORDS[language][data]}</li>`)}</ul>
${until !== null && html`<p>${consentUntil(until, language, CHILE_ZONE)}.</p>`}
<form method="post" action="${view.approveAction}"><button class="approve" type="submit" name="decision" value="approve">${words.approve}</button></form>
<form method="post" action="${view.refuseAction}"><button type="submit" name="decision" value="refuse">${words.refuse}</button></form>`,
  );
}

export function gonePage(language: Language): Html {
  const words = WORDS[language];
  return frame(language, words.bank, html`<p>${words.gone}</p>`);
}
