import type { Locale } from '../html/locale.js';
import { html, type Html } from '../html/html.js';
import { scopePath, type ConsoleScope } from './access.js';
import { shownName } from './format.js';
import { wordsFor, type ConsoleMessageKey, type Words } from './messages.js';
import { csrfField } from './views.js';

/*
 * What every console page stands in: the layout (header, the organisation's scope bar and its Test / Live
 * switch), and the message page. The pages are rendered on the server: plain HTML forms that work without
 * JavaScript, styled by the widget's stylesheet (one look for everything a person sees) and the console's
 * own few rules.
 */

export interface PageContext {
  locale: Locale;
  operator: string;
  /** The signed-in user's CSRF token and identity; null on the pages before sign-in. */
  session: { csrf: string; email: string; seesAllOrganisations: boolean; managesUsers?: boolean } | null;
  /** The organisation and mode the page is about, and the path of the page in it (for the mode switch). */
  scope?: ConsoleScope & { section: string };
  /** A page of the header's own (not an organisation's), marked as the current one there. */
  current?: 'account';
}

/** The sections of an organisation, as `[section path, message]`. */
const SECTIONS: [string, ConsoleMessageKey][] = [
  ['', 'nav.overview'],
  ['/links', 'nav.links'],
  ['/webhooks', 'nav.webhooks'],
  ['/keys', 'nav.keys'],
  ['/events', 'nav.events'],
  ['/audit', 'nav.audit'],
];

function scopeNav(context: PageContext, t: Words): Html | null {
  const scope = context.scope;
  if (!scope) return null;
  const base = scopePath(scope);
  // A page inside a section (`/webhooks/deliveries`) marks its section too.
  const current = (path: string) =>
    scope.section === path || (path !== '' && scope.section.startsWith(`${path}/`));
  const sections = SECTIONS.map(
    ([path, key]) => html`<a href="${base}${path}"${current(path) && CURRENT_PAGE}>${t(key)}</a>`,
  );
  const modes = (['test', 'live'] as const).map(
    (mode) =>
      html`<a href="${scopePath(scope, mode)}${scope.section}" class="mode mode-${mode}"${scope.mode === mode && CURRENT_MODE}>${t(`mode.${mode}`)}</a>`,
  );
  const banner = scope.mode === 'live' && html`<p class="live-banner">${t('mode.live_banner')}</p>`;
  return html`<div class="scope-bar">
  <span class="scope-org">${shownName(context.locale, scope.orgName)}</span>
  <nav class="mode-switch" aria-label="${t('mode.label')}">${modes}</nav>
  <nav class="sections" aria-label="${t('nav.main')}">${sections}</nav>
</div>${banner}`;
}

const CURRENT_PAGE = html` aria-current="page"`;
const CURRENT_MODE = html` aria-current="true"`;

export function layout(context: PageContext, title: string, body: Html): Html {
  const t = wordsFor(context.locale);
  const session = context.session;
  const nav =
    session &&
    html`<nav class="console-nav" aria-label="${t('console.title')}">
  ${session.seesAllOrganisations && html`<a href="/console/orgs">${t('nav.organisations')}</a>`}
  ${session.managesUsers && html`<a href="/console/users">${t('nav.users')}</a>`}
  <a href="/console/account"${context.current === 'account' && CURRENT_PAGE}>${t('nav.account')}</a>
  <span class="who">${session.email}</span>
  <form method="post" action="/console/logout">${csrfField(session.csrf)}<button type="submit" class="link-button">${t('nav.signout')}</button></form>
</nav>`;
  return html`<!doctype html>
<html lang="${context.locale === 'es' ? 'es-CL' : 'en'}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${title} · ${context.operator} · ${t('console.title')}</title>
<link rel="stylesheet" href="/widget/assets/widget.css">
<link rel="stylesheet" href="/widget/assets/theme.css">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body class="console${context.scope?.mode === 'live' ? ' live' : ''}" data-copy="${t('ids.copy')}" data-copied="${t('ids.copied')}">
<a class="skip" href="#main">${context.locale === 'es' ? 'Ir al contenido' : 'Skip to content'}</a>
<header class="console-header">
  <span class="brand"><span class="brand-name"><span translate="no">${context.operator}</span> · ${t('console.title')}</span></span>
  ${nav}
</header>
${scopeNav(context, t)}
<main id="main" class="console-main">
<h1>${title}</h1>
${body}
</main>
</body>
</html>
`;
}

/** The field of a six-digit code from an authenticator app (the sign-in page's and the account's forms). */
export function totpField(label: string): Html {
  return html`<label for="totp">${label}</label>
<input id="totp" name="totp" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>`;
}

export function messagePage(context: PageContext, title: string, text: string): Html {
  return layout(context, title, html`<p>${text}</p>`);
}
