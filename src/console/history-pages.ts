import type Router from '@koa/router';
import { pageAuditLog } from '../audit/audit-log.js';
import { EVENT_TYPES } from '../events/catalogue.js';
import { listEvents } from '../events/store.js';
import { escapeHtml } from '../widget/page.js';
import { consolePrincipal, scopePath } from './access.js';
import type { ConsoleKit } from './kit.js';
import { layout } from './pages.js';
import { atSecond, filterSelect, pager, pagerWords, pageWindow, table } from './views.js';

/*
 * What happened: an organisation's events in a mode (as GET /v1/events lists them, filtered by type and
 * link) and its audit log (both modes; by action and by who), 30 a page, newest first. Every role reads them.
 */

const LINK_ID = /^link_[0-9a-f]{16}$/;
const AUDIT_VALUE = /^[\w.:@-]{1,100}$/;

export function registerHistoryPages(router: Router, kit: ConsoleKit): void {
  const { db } = kit.services;
  const { words } = kit;
  const text = (value: unknown) => (typeof value === 'string' ? value : '');

  router.get('/o/:org/:mode/events', kit.scoped, async (ctx) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const base = `${scopePath(state.scope)}/events`;
    const type = EVENT_TYPES.find((known) => known === ctx.query.type);
    const linkId = LINK_ID.test(text(ctx.query.link_id)) ? text(ctx.query.link_id) : undefined;
    const window = pageWindow(ctx.query);
    const { data, total } = await listEvents(
      db.reader,
      consolePrincipal(state.scope, state.user),
      { type, link_id: linkId },
      window.offset,
      window.limit,
    );
    const rows = data.map((event) => [
      `<code>${event.id}</code>`,
      escapeHtml(event.type),
      escapeHtml(atSecond(event.created_at)),
      `<details><summary>${escapeHtml(t('events.show'))}</summary><pre>${escapeHtml(JSON.stringify(event.data, null, 2))}</pre></details>`,
    ]);
    const filters = `<form method="get" action="${base}" class="search-form">
<label for="type">${escapeHtml(t('events.type'))}</label>
${filterSelect(
  { id: 'type', name: 'type', any: t('events.any_type') },
  EVENT_TYPES.map((known) => [known, known]),
  type,
)}
<label for="link">${escapeHtml(t('events.link'))}</label>
<input id="link" name="link_id" value="${escapeHtml(linkId ?? '')}" maxlength="21" pattern="link_[0-9a-f]{16}">
<button type="submit">${escapeHtml(t('filter.submit'))}</button>
</form>`;
    kit.send(
      ctx,
      200,
      layout(
        kit.pageContext(ctx, '/events'),
        t('events.title'),
        filters +
          table(
            t('events.caption'),
            ['ID', t('events.type'), t('events.created'), t('events.data')],
            rows,
            t('events.empty'),
          ) +
          pager(base, ctx.query, window.page, total, pagerWords(state.locale)),
      ),
    );
  });

  router.get('/o/:org/:mode/audit', kit.scoped, async (ctx) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const base = `${scopePath(state.scope)}/audit`;
    const action = AUDIT_VALUE.test(text(ctx.query.action)) ? text(ctx.query.action) : undefined;
    const actor = AUDIT_VALUE.test(text(ctx.query.actor)) ? text(ctx.query.actor) : undefined;
    const window = pageWindow(ctx.query);
    const { data, total } = await pageAuditLog(
      db.reader,
      { orgId: state.scope.orgId, action, actor },
      window,
    );
    const rows = data.map((entry) => [
      escapeHtml(atSecond(entry.created_at)),
      `<code>${escapeHtml(entry.actor)}</code>`,
      escapeHtml(entry.action),
      entry.target_id ? `<code>${escapeHtml(entry.target_id)}</code>` : '-',
      entry.details ? `<code class="wrap">${escapeHtml(JSON.stringify(entry.details))}</code>` : '-',
    ]);
    const filters = `<form method="get" action="${base}" class="search-form">
<label for="action">${escapeHtml(t('audit.action'))}</label>
<input id="action" name="action" value="${escapeHtml(action ?? '')}" maxlength="100">
<label for="actor">${escapeHtml(t('audit.actor'))}</label>
<input id="actor" name="actor" value="${escapeHtml(actor ?? '')}" maxlength="100">
<button type="submit">${escapeHtml(t('filter.submit'))}</button>
</form>`;
    kit.send(
      ctx,
      200,
      layout(
        kit.pageContext(ctx, '/audit'),
        t('audit.title'),
        filters +
          table(
            t('audit.caption'),
            [t('audit.when'), t('audit.actor'), t('audit.action'), t('audit.target'), t('audit.details')],
            rows,
            t('audit.empty'),
          ) +
          pager(base, ctx.query, window.page, total, pagerWords(state.locale)),
      ),
    );
  });
}
