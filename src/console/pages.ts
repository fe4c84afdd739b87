import type { Locale } from '../widget/messages.js';
import { escapeHtml } from '../widget/page.js';
import { scopePath, type ConsoleScope } from './access.js';
import { shownName } from './format.js';
import { consoleMessage, type ConsoleMessageKey } from './messages.js';

/*
 * The console's pages, rendered on the server: plain HTML forms that work without JavaScript, styled by the
 * widget's stylesheet (one look for everything a person sees) and the console's own few rules.
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

type Translate = (key: ConsoleMessageKey, values?: Record<string, string>) => string;

function translator(locale: Locale): Translate {
  return (key, values) => escapeHtml(consoleMessage(locale, key, values));
}

export function csrfField(csrf: string): string {
  return `<input type="hidden" name="_csrf" value="${escapeHtml(csrf)}">`;
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

function scopeNav(context: PageContext, t: Translate): string {
  const scope = context.scope;
  if (!scope) return '';
  const base = scopePath(scope);
  // A page inside a section (`/webhooks/deliveries`) marks its section too.
  const current = (path: string) =>
    scope.section === path || (path !== '' && scope.section.startsWith(`${path}/`));
  const sections = SECTIONS.map(
    ([path, key]) => `<a href="${base}${path}"${current(path) ? ' aria-current="page"' : ''}>${t(key)}</a>`,
  ).join('');
  const modes = (['test', 'live'] as const)
    .map(
      (mode) =>
        `<a href="${scopePath(scope, mode)}${scope.section}" class="mode mode-${mode}"${scope.mode === mode ? ' aria-current="true"' : ''}>${t(`mode.${mode}`)}</a>`,
    )
    .join('');
  const banner = scope.mode === 'live' ? `<p class="live-banner">${t('mode.live_banner')}</p>` : '';
  return `<div class="scope-bar">
  <span class="scope-org">${escapeHtml(shownName(context.locale, scope.orgName))}</span>
  <nav class="mode-switch" aria-label="${t('mode.label')}">${modes}</nav>
  <nav class="sections" aria-label="${t('nav.main')}">${sections}</nav>
</div>${banner}`;
}

export function layout(context: PageContext, title: string, body: string): string {
  const t = translator(context.locale);
  const session = context.session;
  const nav = session
    ? `<nav class="console-nav" aria-label="${t('console.title')}">
  ${session.seesAllOrganisations ? `<a href="/console/orgs">${t('nav.organisations')}</a>` : ''}
  ${session.managesUsers ? `<a href="/console/users">${t('nav.users')}</a>` : ''}
  <a href="/console/account"${context.current === 'account' ? ' aria-current="page"' : ''}>${t('nav.account')}</a>
  <span class="who">${escapeHtml(session.email)}</span>
  <form method="post" action="/console/logout">${csrfField(session.csrf)}<button type="submit" class="link-button">${t('nav.signout')}</button></form>
</nav>`
    : '';
  return `<!doctype html>
<html lang="${context.locale === 'es' ? 'es-CL' : 'en'}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)} · ${escapeHtml(context.operator)} · ${t('console.title')}</title>
<link rel="stylesheet" href="/widget/assets/widget.css">
<link rel="stylesheet" href="/widget/assets/theme.css">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body class="console${context.scope?.mode === 'live' ? ' live' : ''}" data-copy="${t('ids.copy')}" data-copied="${t('ids.copied')}">
<a class="skip" href="#main">${context.locale === 'es' ? 'Ir al contenido' : 'Skip to content'}</a>
<header class="console-header">
  <span class="brand"><span class="brand-name"><span translate="no">${escapeHtml(context.operator)}</span> · ${t('console.title')}</span></span>
  ${nav}
</header>
${scopeNav(context, t)}
<main id="main" class="console-main">
<h1>${escapeHtml(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

export function signInPage(
  context: PageContext,
  form: {
    email: string;
    problem: ConsoleMessageKey | null;
    problemValues?: Record<string, string>;
    askTotp: boolean;
    /** The pre-session CSRF token (http.ts), which the form sends back. */
    formToken: string;
  },
): string {
  const t = translator(context.locale);
  const problem = form.problem
    ? `<p class="error" role="alert" id="signin-problem">${t(form.problem, form.problemValues)}</p>`
    : '';
  const described = form.problem ? ' aria-describedby="signin-problem"' : '';
  const totp = form.askTotp
    ? `<label for="totp">${t('signin.totp')}</label>
<input id="totp" name="totp" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>`
    : '';
  return layout(
    context,
    consoleMessage(context.locale, 'signin.title'),
    `${problem}
<form method="post" action="/console/login" class="console-form"${described}>${csrfField(form.formToken)}
<label for="email">${t('signin.email')}</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${escapeHtml(form.email)}">
<label for="password">${t('signin.password')}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256">
${totp}
<button type="submit" class="primary">${t('signin.submit')}</button>
</form>`,
  );
}

export function acceptPage(
  context: PageContext,
  form: { email: string; token: string; problem: string | null; formToken: string },
): string {
  const t = translator(context.locale);
  const problem = form.problem ? `<p class="error" role="alert">${escapeHtml(form.problem)}</p>` : '';
  return layout(
    context,
    consoleMessage(context.locale, 'accept.title'),
    `<p>${t('accept.intro', { email: form.email })}</p>
${problem}
<form method="post" action="/console/accept/${encodeURIComponent(form.token)}" class="console-form">${csrfField(form.formToken)}
<input type="hidden" name="email" autocomplete="username" value="${escapeHtml(form.email)}">
<label for="password">${t('accept.password')}</label>
<input id="password" name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="256">
<label for="confirm">${t('accept.confirm')}</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" required minlength="12" maxlength="256">
<button type="submit" class="primary">${t('accept.submit')}</button>
</form>`,
  );
}

export function messagePage(context: PageContext, title: string, text: string): string {
  return layout(context, title, `<p>${escapeHtml(text)}</p>`);
}
