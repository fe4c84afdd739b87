import type { Context } from 'koa';
import {
  DELIVERY_STATUSES,
  listDeliveries,
  presentDelivery,
  redeliver,
} from '../../../webhooks/deliveries.js';
import { listEndpoints } from '../../../webhooks/endpoints.js';
import { html, type HtmlValue } from '../../../html/html.js';
import { may } from '../../access.js';
import type { ConsoleKit } from '../../kit.js';
import { stateWord } from '../../messages.js';
import { layout } from '../../layout.js';
import { sendListPage } from '../../list-page.js';
import {
  atSecond,
  cellText,
  csrfField,
  factsHtml,
  filterSelect,
  pageWindow,
  queryText,
  table,
  when,
} from '../../views.js';
import { changeOn, hooksBase, lastAnswer, principal, scopedDelivery } from './common.js';

/*
 * Deliveries: an organisation's deliveries in one mode, filtered by endpoint, status and event; one
 * delivery with every attempt; and redelivery (`operate`: support too).
 */

const ENDPOINT_ID = /^we_[0-9a-f]{16}$/;
const EVENT_ID = /^evt_[0-9a-f]{16}$/;
/** Endpoints offered in the filter: the newest ones. */
const ENDPOINT_CHOICES = 100;

export async function showDeliveries(ctx: Context, kit: ConsoleKit) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = hooksBase(kit, ctx);
  const query = (name: string) => queryText(ctx.query, name);
  const endpointId = ENDPOINT_ID.test(query('endpoint_id')) ? query('endpoint_id') : undefined;
  const eventId = EVENT_ID.test(query('event_id')) ? query('event_id') : undefined;
  const status = DELIVERY_STATUSES.find((known) => known === query('status'));
  const window = pageWindow(ctx.query);
  const { db } = kit.services;
  const [{ rows, total }, endpoints] = await Promise.all([
    listDeliveries(
      db.reader,
      { orgId: state.scope.orgId, mode: state.scope.mode, endpointId, eventId, status },
      window.offset,
      window.limit,
    ),
    listEndpoints(db.reader, principal(kit, ctx), 0, ENDPOINT_CHOICES),
  ]);
  const cells = rows
    .map(presentDelivery)
    .map((delivery) => [
      html`<a href="${base}/deliveries/${delivery.id}"><code>${delivery.id}</code></a>`,
      stateWord(state.locale, delivery.status),
      lastAnswer(delivery),
      delivery.event_type,
      html`<a href="${base}/${delivery.endpoint_id}"><code>${delivery.endpoint_id}</code></a>`,
      cellText(delivery.attempts),
      when(delivery.created_at),
    ]);
  const filters = html`<form method="get" action="${base}/deliveries" class="search-form">
<label for="endpoint">${t('webhooks.endpoint')}</label>
${filterSelect(
  { id: 'endpoint', name: 'endpoint_id', any: t('webhooks.any_endpoint') },
  endpoints.data.map((endpoint) => [endpoint.id, `${shortUrl(endpoint.url)} (${endpoint.id})`]),
  endpointId,
)}
<label for="status">${t('webhooks.status')}</label>
${filterSelect(
  { id: 'status', name: 'status', any: t('webhooks.any_status') },
  DELIVERY_STATUSES.map((known) => [known, stateWord(state.locale, known)]),
  status,
)}
<label for="event">${t('webhooks.event')}</label>
<input id="event" name="event_id" value="${eventId ?? ''}" maxlength="20" pattern="evt_[0-9a-f]{16}">
<button type="submit">${t('filter.submit')}</button>
</form>`;
  sendListPage(ctx, kit, {
    section: '/webhooks/deliveries',
    title: t('webhooks.deliveries_title'),
    above: html`<p><a href="${base}">${t('webhooks.back')}</a></p>${filters}`,
    caption: t('webhooks.deliveries_caption'),
    headers: [
      'ID',
      t('webhooks.status'),
      t('webhooks.last_answer'),
      t('webhooks.event_type'),
      t('webhooks.endpoint'),
      t('webhooks.attempts'),
      t('webhooks.created'),
    ],
    rows: cells,
    empty: t('webhooks.deliveries_empty'),
    base: `${base}/deliveries`,
    page: window.page,
    total,
  });
}

async function renderDelivery(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = hooksBase(kit, ctx);
  const delivery = await scopedDelivery(ctx, kit);
  const facts: [string, HtmlValue][] = [
    [t('webhooks.event_id'), html`<code>${delivery.event_id}</code>`],
    [t('webhooks.event_type'), delivery.event_type],
    [
      t('webhooks.endpoint'),
      html`<a href="${base}/${delivery.endpoint_id}"><code>${delivery.endpoint_id}</code></a>`,
    ],
    [t('webhooks.status'), stateWord(state.locale, delivery.status)],
    [t('webhooks.attempts'), cellText(delivery.attempts)],
    [t('webhooks.next_attempt'), when(delivery.next_attempt_at)],
    [t('webhooks.last_answer'), lastAnswer(delivery)],
    [t('webhooks.created'), when(delivery.created_at)],
  ];
  const attempts = (delivery.attempt_history ?? []).map((attempt) => [
    cellText(attempt.number),
    atSecond(attempt.started_at),
    t('webhooks.ms', { ms: String(attempt.duration_ms) }),
    cellText(attempt.status_code),
    cellText(attempt.error),
    attempt.response_excerpt ? html`<pre>${attempt.response_excerpt}</pre>` : '-',
  ]);
  const redeliverForm = may(state.user, 'operate')
    ? html`<form method="post" action="${base}/deliveries/${delivery.id}/redeliver" class="inline-form">${csrfField(state.claims.csrf)}<button type="submit">${t('webhooks.redeliver')}</button></form>`
    : '';
  kit.send(
    ctx,
    status,
    layout(
      kit.pageContext(ctx, '/webhooks/deliveries'),
      delivery.id,
      html`<p><a href="${base}/deliveries">${t('webhooks.back_deliveries')}</a></p>
${notice}
${factsHtml(facts)}
<div class="actions">${redeliverForm}</div>
<h2>${t('webhooks.attempt_history')}</h2>
${table(
  t('webhooks.attempt_history'),
  [
    '#',
    t('webhooks.started'),
    t('webhooks.duration'),
    t('webhooks.status_code'),
    t('webhooks.error'),
    t('webhooks.response'),
  ],
  attempts,
  t('webhooks.no_attempts'),
)}`,
    ),
  );
}

export const showDelivery = (ctx: Context, kit: ConsoleKit) => renderDelivery(ctx, kit, 200, null);

export const redeliverAction = changeOn(renderDelivery, async (ctx, kit, now) => {
  const t = kit.words(ctx);
  const original = (await scopedDelivery(ctx, kit)).id;
  const created = await kit.services.db.transaction((trx) =>
    redeliver(trx, principal(kit, ctx), original, now),
  );
  return html`<p class="notice" role="status">${t('webhooks.redelivered', { id: created.id })} <a href="${hooksBase(kit, ctx)}/deliveries/${created.id}">${t('webhooks.open_delivery', { id: created.id })}</a></p>`;
});

/** A URL short enough for a menu: its host and the start of its path. */
function shortUrl(url: string): string {
  try {
    const parsed = new URL(url);
    const shown = `${parsed.host}${parsed.pathname}`;
    return shown.length > 40 ? `${shown.slice(0, 39)}…` : shown;
  } catch {
    return url.slice(0, 40);
  }
}
