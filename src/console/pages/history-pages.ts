import type { Context } from 'koa';
import { pageAuditLog } from '../../audit/audit-log.js';
import { EVENT_TYPES } from '../../events/catalogue.js';
import { listEvents } from '../../events/store.js';
import { html } from '../../html/html.js';
import { consolePrincipal, scopePath } from '../access.js';
import type { ConsoleKit, ConsoleRoute } from '../kit.js';
import { sendListPage } from '../list-page.js';
import { atSecond, filterSelect, pageWindow, queryText } from '../views.js';
import { AUDIT_ACTIONS, auditActorText, auditDetailsHtml, auditSentence } from '../audit-words.js';
import { consoleUserEmails } from '../user-emails.js';

/*
 * What happened: an organisation's events in a mode (as GET /v1/events lists them, filtered by type and
 * link) and its audit log (both modes; by action and by who), 30 a page, newest first. Every role reads them.
 */

const LINK_ID = /^link_[0-9a-f]{16}$/;
const AUDIT_VALUE = /^[\w.:@-]{1,100}$/;

export async function showEvents(ctx: Context, kit: ConsoleKit) {
  const { db } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = `${scopePath(state.scope)}/events`;
  const type = EVENT_TYPES.find((known) => known === ctx.query.type);
  const linkId = LINK_ID.test(queryText(ctx.query, 'link_id')) ? queryText(ctx.query, 'link_id') : undefined;
  const window = pageWindow(ctx.query);
  const { data, total } = await listEvents(
    db.reader,
    consolePrincipal(state.scope, state.user),
    { type, link_id: linkId },
    window.offset,
    window.limit,
  );
  const rows = data.map((event) => [
    html`<code>${event.id}</code>`,
    event.type,
    atSecond(event.created_at),
    html`<details><summary>${t('events.show')}</summary><pre>${JSON.stringify(event.data, null, 2)}</pre></details>`,
  ]);
  const filters = html`<form method="get" action="${base}" class="search-form">
<label for="type">${t('events.type')}</label>
${filterSelect(
  { id: 'type', name: 'type', any: t('events.any_type') },
  EVENT_TYPES.map((known) => [known, known]),
  type,
)}
<label for="link">${t('events.link')}</label>
<input id="link" name="link_id" value="${linkId ?? ''}" maxlength="21" pattern="link_[0-9a-f]{16}">
<button type="submit">${t('filter.submit')}</button>
</form>`;
  sendListPage(ctx, kit, {
    section: '/events',
    title: t('events.title'),
    above: filters,
    caption: t('events.caption'),
    headers: ['ID', t('events.type'), t('events.created'), t('events.data')],
    rows,
    empty: t('events.empty'),
    base,
    page: window.page,
    total,
  });
}

export async function showAuditLog(ctx: Context, kit: ConsoleKit) {
  const { db } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = `${scopePath(state.scope)}/audit`;
  const action = AUDIT_VALUE.test(queryText(ctx.query, 'action'))
    ? queryText(ctx.query, 'action')
    : undefined;
  const actor = AUDIT_VALUE.test(queryText(ctx.query, 'actor')) ? queryText(ctx.query, 'actor') : undefined;
  const window = pageWindow(ctx.query);
  const { data, total } = await pageAuditLog(db.reader, { orgId: state.scope.orgId, action, actor }, window);
  const emails = await consoleUserEmails(
    db.reader,
    data.map((entry) => entry.actor),
  );
  const rows = data.map((entry) => [
    atSecond(entry.created_at),
    html`<span title="${entry.actor}" translate="no">${auditActorText(state.locale, entry.actor, emails)}</span>`,
    html`<span data-action="${entry.action}">${auditSentence(state.locale, entry.action)}</span>`,
    entry.target_id ? html`<code>${entry.target_id}</code>` : '-',
    auditDetailsHtml(state.locale, entry.details),
  ]);
  const actions = Object.keys(AUDIT_ACTIONS).map(
    (known) => [known, auditSentence(state.locale, known)] as const,
  );
  const filters = html`<form method="get" action="${base}" class="search-form">
<span class="search-field"><label for="action">${t('audit.action')}</label>
${filterSelect({ id: 'action', name: 'action', any: t('audit.any_action') }, actions, action)}</span>
<label for="actor">${t('audit.actor')}</label>
<input id="actor" name="actor" value="${actor ?? ''}" maxlength="100">
<button type="submit">${t('filter.submit')}</button>
</form>`;
  sendListPage(ctx, kit, {
    section: '/audit',
    title: t('audit.title'),
    above: filters,
    caption: t('audit.caption'),
    headers: [t('audit.when'), t('audit.actor'), t('audit.action'), t('audit.target'), t('audit.details')],
    rows,
    empty: t('audit.empty'),
    base,
    page: window.page,
    total,
  });
}

/** What happened: read by every role. */
export const historyRoutes: ConsoleRoute[] = [
  { method: 'get', path: '/events', needs: 'read', handle: showEvents },
  { method: 'get', path: '/audit', needs: 'read', handle: showAuditLog },
];
