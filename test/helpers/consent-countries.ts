/*
 * The countries the API's simulated consent banks stand for, as the tests describe them: the bank's id and
 * name, the id its customers sign in with, its sandbox customers, the words of its pages and of the widget
 * around it. A test of a consent trip takes one, so that each country's trip is walked by the same steps
 * (test/helpers/consent-flow.ts over HTTP, widget-browser.ts in Chromium).
 */

/** The words of a bank's sign-in and consent pages (src/consent-bank/pages.ts, brasil/pages.ts). */
export interface BankPageWords {
  signIn: string;
  password: string;
  button: string;
  consent: string;
  approve: string;
  refuse: string;
}

export interface ConsentCountry {
  /** For test names. */
  name: string;
  bankId: string;
  /** As the widget lists the bank and the bank heads its pages. */
  bankName: string;
  /** The id a customer signs in with at the bank: the form field, and its label. */
  idField: 'rut' | 'cpf';
  idLabel: 'RUT' | 'CPF';
  /** Where the API serves the bank's pages in test mode. */
  pagesPath: RegExp;
  /** The bank's pages speak the country's language, or English to an English browser. */
  language: 'es' | 'pt';
  pages: { local: BankPageWords; en: BankPageWords };
  /** Sandbox customers (src/consent-bank/users.ts; Brazil's are CPFs its bank knows). */
  users: { holder: string; refusedByBank: string };
  /** What the widget's consent start needs of the person besides the bank (the CPF, asked on its screen). */
  startBody(user: string): Record<string, string>;
}

export const CHILE: ConsentCountry = {
  name: 'Chile',
  bankId: 'bancoabierto',
  bankName: 'Banco Abierto (simulado)',
  idField: 'rut',
  idLabel: 'RUT',
  pagesPath: /^\/sandbox\/consent-bank\//,
  language: 'es',
  pages: {
    local: {
      signIn: 'Ingresa a tu banco',
      password: 'Clave',
      button: 'Ingresar',
      consent: 'Autoriza el acceso a tus datos',
      approve: 'Autorizar',
      refuse: 'Rechazar',
    },
    en: {
      signIn: 'Sign in to your bank',
      password: 'Password',
      button: 'Sign in',
      consent: 'Allow access to your data',
      approve: 'Approve',
      refuse: 'Refuse',
    },
  },
  users: { holder: '11.111.111-1', refusedByBank: '33.333.333-3' },
  startBody: () => ({}),
};

export const BRASIL: ConsentCountry = {
  name: 'Brasil',
  bankId: 'bancoabierto-br',
  bankName: 'Banco Aberto (simulado, Brasil)',
  idField: 'cpf',
  idLabel: 'CPF',
  pagesPath: /^\/sandbox\/consent-bank-br\//,
  language: 'pt',
  pages: {
    local: {
      signIn: 'Entre no seu banco',
      password: 'Senha',
      button: 'Entrar',
      consent: 'Autorize o compartilhamento dos seus dados',
      approve: 'Autorizar',
      refuse: 'Recusar',
    },
    en: {
      signIn: 'Sign in to your bank',
      password: 'Password',
      button: 'Sign in',
      consent: 'Allow sharing your data',
      approve: 'Approve',
      refuse: 'Refuse',
    },
  },
  users: { holder: '529.982.247-25', refusedByBank: '390.533.447-05' },
  startBody: (cpf) => ({ cpf }),
};

export type WidgetLocale = 'es' | 'en';

/** The bank's pages' words for a browser that speaks the widget's `locale`. */
export function bankPageWords(country: ConsentCountry, locale: WidgetLocale): BankPageWords {
  return locale === 'en' ? country.pages.en : country.pages.local;
}

/** The widget's words around a consent bank (src/widget/messages.ts, consent-screen.ts), in `locale`. */
export function consentWidgetWords(country: ConsentCountry, locale: WidgetLocale) {
  const bank = country.bankName;
  return locale === 'es'
    ? {
        browser: 'es-CL',
        picker: 'Elige tu banco',
        consentTitle: 'Vas a compartir con Bank Connect',
        go: `Continuar a ${bank}`,
        awaiting: `Autoriza en ${bank}`,
        reopen: `Abrir ${bank} de nuevo`,
        returned: 'Autorizado',
        connecting: `Conectando con ${bank}`,
        connected: 'Conectado',
        continue: 'Continuar',
        denied: `No autorizaste a ${bank}`,
        tryAgain: 'Intentar de nuevo',
      }
    : {
        browser: 'en-GB',
        picker: 'Select your bank',
        consentTitle: 'You are about to share with Bank Connect',
        go: `Continue to ${bank}`,
        awaiting: `Authorise at ${bank}`,
        reopen: `Open ${bank} again`,
        returned: 'Authorised',
        connecting: `Connecting to ${bank}`,
        connected: 'Connected',
        continue: 'Continue',
        denied: `You did not authorise ${bank}`,
        tryAgain: 'Try again',
      };
}

/** What a whole Brazilian consent asks (every permission group of the product, with RESOURCES_READ). */
export const BRASIL_PERMISSIONS = [
  'ACCOUNTS_READ',
  'ACCOUNTS_BALANCES_READ',
  'ACCOUNTS_TRANSACTIONS_READ',
  'CREDIT_CARDS_ACCOUNTS_READ',
  'CREDIT_CARDS_ACCOUNTS_LIMITS_READ',
  'CREDIT_CARDS_ACCOUNTS_TRANSACTIONS_READ',
  'RESOURCES_READ',
];
