import { formatCpf } from '../../cpf/cpf.js';
import { html, type Html } from '../../html/html.js';
import { bankFrame } from '../pages.js';
import type { Permission } from './consents.js';

/*
 * The Brazilian bank's pages, in Portuguese and English: sign-in with a CPF, and the consent as Brazil shows
 * it (the permissions grouped as the consents file's table groups them, and the consent's end).
 */

export type BrasilLanguage = 'pt' | 'en';

/** The bank's name on its pages, as the appliance lists it (src/banks/institutions.ts; a test keeps them equal). */
export const BRASIL_BANK_NAME = 'Banco Aberto (simulado, Brasil)';
const BANK_NAME = BRASIL_BANK_NAME;

const WORDS = {
  pt: {
    signInTitle: 'Entre no seu banco',
    signInLead: 'Você está no site do seu banco. Entre com seu CPF e sua senha.',
    cpf: 'CPF',
    password: 'Senha',
    signIn: 'Entrar',
    wrong: 'CPF ou senha incorretos.',
    consentTitle: 'Autorize o compartilhamento dos seus dados',
    consentLead: (client: string) => `${client} pede acesso a estes dados:`,
    until: (date: string) => `Até ${date}.`,
    noEnd: 'Sem data de término.',
    approve: 'Autorizar',
    refuse: 'Recusar',
    signedInAs: (cpf: string) => `Você entrou como ${cpf}.`,
    note: 'Banco de teste: não há dinheiro real.',
    gone: 'Este pedido não é mais válido. Volte ao aplicativo e tente de novo.',
    groups: {
      identification: 'Seus dados cadastrais: nome, documentos, data de nascimento e contatos',
      accounts: 'Suas contas (número, tipo e moeda)',
      balances: 'Os saldos das suas contas',
      transactions: 'Os extratos das suas contas',
      limits: 'Os limites das suas contas',
      cards: 'Seus cartões de crédito, limites, faturas e transações',
    },
  },
  en: {
    signInTitle: 'Sign in to your bank',
    signInLead: 'You are on your bank’s site. Sign in with your CPF and password.',
    cpf: 'CPF',
    password: 'Password',
    signIn: 'Sign in',
    wrong: 'Wrong CPF or password.',
    consentTitle: 'Allow sharing your data',
    consentLead: (client: string) => `${client} asks to see:`,
    until: (date: string) => `Until ${date}.`,
    noEnd: 'No end date.',
    approve: 'Approve',
    refuse: 'Refuse',
    signedInAs: (cpf: string) => `Signed in as ${cpf}.`,
    note: 'Test bank: no real money.',
    gone: 'This request is no longer valid. Go back to the app and try again.',
    groups: {
      identification: 'Your registration data: name, documents, date of birth and contact details',
      accounts: 'Your accounts (number, type and currency)',
      balances: 'Your account balances',
      transactions: 'Your account statements',
      limits: 'Your accounts’ overdraft limits',
      cards: 'Your credit cards, their limits, bills and transactions',
    },
  },
} as const;

type Group = keyof (typeof WORDS)['pt']['groups'];

/** The groups a person reads, from the permissions granted (RESOURCES_READ goes with every group). */
export function permissionGroups(permissions: readonly Permission[]): Group[] {
  const has = (p: Permission) => permissions.includes(p);
  const groups: Group[] = [];
  if (has('CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ')) groups.push('identification');
  if (has('ACCOUNTS_READ')) groups.push('accounts');
  if (has('ACCOUNTS_BALANCES_READ')) groups.push('balances');
  if (has('ACCOUNTS_TRANSACTIONS_READ')) groups.push('transactions');
  if (has('ACCOUNTS_OVERDRAFT_LIMITS_READ')) groups.push('limits');
  if (has('CREDIT_CARDS_ACCOUNTS_READ')) groups.push('cards');
  return groups;
}

/** `ui_locales` first, then Accept-Language; Portuguese unless English is asked for. */
export function pickBrasilLanguage(uiLocales: unknown, acceptLanguage: string | undefined): BrasilLanguage {
  const wanted = [
    ...(typeof uiLocales === 'string' ? uiLocales.split(/\s+/) : []),
    ...(acceptLanguage ?? '').split(',').map((part) => part.split(';')[0]?.trim() ?? ''),
  ];
  for (const tag of wanted) {
    const primary = tag.toLowerCase().split('-')[0];
    if (primary === 'pt' || primary === 'en') return primary;
  }
  return 'pt';
}

function frame(language: BrasilLanguage, title: string, body: Html): Html {
  return bankFrame(
    { lang: language === 'pt' ? 'pt-BR' : 'en', bank: BANK_NAME, note: WORDS[language].note },
    title,
    body,
  );
}

export function brasilSignInPage(
  language: BrasilLanguage,
  action: string,
  failed: boolean,
  cpf: string,
): Html {
  const words = WORDS[language];
  return frame(
    language,
    words.signInTitle,
    html`<p>${words.signInLead}</p>
${failed && html`<p class="error" role="alert">${words.wrong}</p>`}
<form method="post" action="${action}">
<label for="cpf">${words.cpf}</label>
<input id="cpf" name="cpf" autocomplete="username" inputmode="numeric" value="${cpf}" required>
<label for="password">${words.password}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button class="approve" type="submit">${words.signIn}</button>
</form>`,
  );
}

export interface BrasilConsentView {
  clientName: string;
  cpf: string;
  permissions: readonly Permission[];
  /** `YYYY-MM-DD`, or null for a consent with no end. */
  expires: string | null;
  approveAction: string;
  refuseAction: string;
}

export function brasilConsentPage(language: BrasilLanguage, view: BrasilConsentView): Html {
  const words = WORDS[language];
  return frame(
    language,
    words.consentTitle,
    html`<p>${words.signedInAs(formatCpf(view.cpf))}</p>
<p>${words.consentLead(view.clientName)}</p>
<ul>${permissionGroups(view.permissions).map((group) => html`<li data-group="${group}">${words.groups[group]}</li>`)}</ul>
<p>${view.expires === null ? words.noEnd : words.until(view.expires)}</p>
<form method="post" action="${view.approveAction}"><button class="approve" type="submit" name="decision" value="approve">${words.approve}</button></form>
<form method="post" action="${view.refuseAction}"><button type="submit" name="decision" value="refuse">${words.refuse}</button></form>`,
  );
}

export function brasilGonePage(language: BrasilLanguage): Html {
  return frame(language, BANK_NAME, html`<p>${WORDS[language].gone}</p>`);
}
