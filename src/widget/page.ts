import type { HolderType } from '../banks/connector.js';
import type { BankHealth } from '../banks/health.js';
import type { ConnectionMethod } from '../banks/institutions.js';
import type { ConsentScreen } from './consent/consent-screen.js';
import type { Problem } from './problems.js';
import type { SessionKind } from './sessions.js';
import type { WidgetStatus } from './flows.js';
import { html, jsonScript, trustedHtml, type Html } from '../html/html.js';
import type { Locale } from '../html/locale.js';
import { message, type Catalogue } from './messages.js';

/** What the page's script starts from; it is JSON in a non-executable script element. */
export interface Bootstrap {
  /** The session secret the page sends in `X-Widget-Session`; null on an error page. */
  session: string | null;
  kind: SessionKind | null;
  /** Where `postMessage` may deliver (the opener's origin, validated); null when it was not usable. */
  opener_origin: string | null;
  /** Opened as a plain page with a token that has a redirect_uri: the widget returns there at the end. */
  hosted: boolean;
  /** The hosted flow's way back without success (`redirect_uri?error=exited&state=…`). */
  exit_url: string | null;
  locale: Locale;
  /** Every word of the page, in its language (messages.ts). */
  messages: Catalogue;
  operator: string;
  consent: string;
  poll_interval_ms: number;
  banks: {
    id: string;
    name: string;
    status: BankHealth;
    holder_types: HolderType[];
    /** `consent`: the end user authorises at the bank's page, after reading `consent` (consent/consent-screen.ts). */
    connection: ConnectionMethod;
    consent: ConsentScreen | null;
    /** A Brazilian bank (`fapi1-br`): the consent screen asks for the person's CPF (and a company's CNPJ). */
    asks_cpf: boolean;
  }[];
  /** The bank chosen for the person (a preselected institution, the link being reconnected or refreshed). */
  bank_id: string | null;
  holder_type: HolderType | null;
  username_prefill: string | null;
  /** The screen to show instead of the flow. */
  error: Problem | null;
  /** The state of a connection already under way (an MFA refresh waits for its code). */
  status: WidgetStatus | null;
  /** The page in the bank's popup after its callback: it says how the trip ended (`error`) and closes. */
  returned_from_bank?: boolean;
}

export interface PageAssets {
  widgetJs: string;
  widgetCss: string;
  themeCss: string;
  logoSrc: string | null;
}

/** The close button's cross and the footer's padlock: fixed markup of ours. */
const CLOSE_ICON = trustedHtml(
  '<svg aria-hidden="true" focusable="false" width="20" height="20" viewBox="0 0 20 20"><path d="M5 5l10 10M15 5L5 15" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg>',
);
const LOCK_ICON = trustedHtml(
  '<svg aria-hidden="true" focusable="false" width="14" height="14" viewBox="0 0 16 16"><path d="M4 7V5a4 4 0 118 0v2h1v8H3V7h1zm2 0h4V5a2 2 0 10-4 0v2z" fill="currentColor"/></svg>',
);

export function renderPage(bootstrap: Bootstrap, assets: PageAssets): Html {
  const name = bootstrap.operator;
  const logo = assets.logoSrc
    ? html`<img class="brand-logo" src="${assets.logoSrc}" alt="" width="28" height="28">`
    : html`<span class="brand-logo brand-initial" aria-hidden="true">${bootstrap.operator.slice(0, 1).toUpperCase()}</span>`;
  const t = (key: Parameters<typeof message>[1]) => message(bootstrap.locale, key);
  const title = bootstrap.error ? bootstrap.error.title : t('page.title');
  const developerNote =
    bootstrap.error?.code === 'opener_missing' &&
    html`<p class="hint">${t('problem.opener_missing.developer')}</p>`;
  return html`<!doctype html>
<html lang="${bootstrap.locale === 'es' ? 'es-CL' : 'en'}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${title} · ${name}</title>
<link rel="stylesheet" href="/widget/assets/widget.css?v=${assets.widgetCss}">
<link rel="stylesheet" href="/widget/assets/theme.css?v=${assets.themeCss}">
${jsonScript('widget-bootstrap', bootstrap)}
<script src="/widget/assets/widget.js?v=${assets.widgetJs}" defer></script>
</head>
<body>
<div class="widget">
  <header class="widget-header">
    <span class="brand">${logo}<span class="brand-name">${name}</span></span>
    <button type="button" class="icon-button" id="widget-close" aria-label="${t('page.close')}" title="${t('page.close')}" hidden>
      ${CLOSE_ICON}
    </button>
  </header>
  <main id="widget-main" class="widget-main">
    <h1 tabindex="-1">${title}</h1>
    ${bootstrap.error && html`<p>${bootstrap.error.message}</p>${developerNote}`}
    <noscript><p>${t('page.noscript')}</p></noscript>
  </main>
  <footer class="widget-footer">
    ${LOCK_ICON}
    <span>${t('page.footer')}</span>
  </footer>
</div>
</body>
</html>
`;
}
