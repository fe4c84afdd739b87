import type { Context } from 'koa';
import { errors } from '../../../errors/api-error.js';
import { EVENT_TYPES } from '../../../events/catalogue.js';
import { searchLinks } from '../../../links/store.js';
import { createEndpoint, listEndpoints } from '../../../webhooks/endpoints.js';
import { waitForOutcomes, type DeliveryOutcome } from '../../../webhooks/operator.js';
import { fireSandboxEvent } from '../../../sandbox/sandbox-events.js';
import { FIRE_EVENT_BODY } from '../../../webhooks/schemas.js';
import { html, type HtmlValue } from '../../../html/html.js';
import { may } from '../../access.js';
import { formReader } from '../../forms.js';
import type { ConsoleKit } from '../../kit.js';
import { stateWord } from '../../messages.js';
import { sendListPage } from '../../list-page.js';
import { atMinute, cellText, csrfField, noticeHtml, pageWindow, secretOnce, table } from '../../views.js';
import {
  changeOn,
  deliveriesLink,
  endpointPolicy,
  health,
  hooksBase,
  lastAnswer,
  principal,
} from './common.js';
import {
  DESCRIPTION_MAX,
  EVENT_CHOICES,
  URL_MAX,
  endpointOfForm,
  eventChoices,
  eventsOfForm,
} from './endpoint-form.js';

/*
 * The endpoints page: an organisation's endpoints in one mode, the form that creates one (its signing
 * secret shown once), and in test mode the form that fires a sandbox event at them.
 */

/** Test links offered to fire at: the newest ones. */
const LINK_CHOICES = 100;
/**
 * How long firing waits for the first attempts before it shows where each stands. A dispatcher sends a due
 * delivery within a second or so; longer would hold the page, and the deliveries list shows the rest.
 */
const FIRE_WAIT_MS = 5_000;
const readFire = formReader(FIRE_EVENT_BODY);

/** The endpoints page, with `notice` above the table; `draft` refills a refused creation. */
async function renderEndpoints(
  ctx: Context,
  kit: ConsoleKit,
  status: number,
  notice: HtmlValue,
  draft?: { url: string; description: string; events: string[] },
) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = hooksBase(kit, ctx);
  const window = pageWindow(ctx.query);
  const now = kit.services.clock.now();
  const { data, total } = await listEndpoints(
    kit.services.db.reader,
    principal(kit, ctx),
    window.offset,
    window.limit,
  );
  const rows = data.map((endpoint) => [
    html`<a href="${base}/${endpoint.id}"><code>${endpoint.id}</code></a>`,
    html`<code class="wrap url">${endpoint.url}</code>`,
    endpoint.enabled_events.join(', '),
    health(kit, ctx, endpoint, now),
    atMinute(endpoint.created_at),
  ]);
  const manage = may(state.user, 'manage');
  const create = manage
    ? html`<form method="post" action="${base}" class="console-form wide">
${csrfField(state.claims.csrf)}
<fieldset><legend>${t('webhooks.create')}</legend>
<label for="url">${t('webhooks.url')}</label>
<input id="url" name="url" type="url" required maxlength="${URL_MAX}" placeholder="https://" value="${draft?.url ?? ''}">
<label for="description">${t('webhooks.description_label')}</label>
<input id="description" name="description" maxlength="${DESCRIPTION_MAX}" value="${draft?.description ?? ''}">
${eventChoices(t, draft?.events ?? [])}
<button type="submit" class="primary">${t('webhooks.create_submit')}</button>
</fieldset>
</form>`
    : '';
  const fire = manage && state.scope.mode === 'test' ? await fireForm(ctx, kit) : '';
  sendListPage(ctx, kit, {
    status,
    section: '/webhooks',
    title: t('webhooks.title'),
    above: html`<p>${deliveriesLink(kit, ctx, {}, t('webhooks.all_deliveries'))}</p>${notice}`,
    caption: t('webhooks.caption'),
    headers: ['ID', t('webhooks.url'), t('webhooks.events'), t('webhooks.state'), t('webhooks.created')],
    rows,
    empty: t('webhooks.empty'),
    base,
    page: window.page,
    total,
    below: html`${create}${fire}`,
  });
}

export const showEndpoints = (ctx: Context, kit: ConsoleKit) => renderEndpoints(ctx, kit, 200, null);

export async function createEndpointAction(ctx: Context, kit: ConsoleKit) {
  const { form } = kit.state(ctx);
  // A refused creation shows the form again as it was typed, the problem above it.
  const draft = {
    url: (form.url ?? '').slice(0, URL_MAX),
    description: (form.description ?? '').slice(0, DESCRIPTION_MAX),
    events: eventsOfForm(form).filter((type) => EVENT_CHOICES.includes(type)),
  };
  await changeOn(
    (ctx, kit, status, notice) =>
      renderEndpoints(ctx, kit, status, notice, status === 200 ? undefined : draft),
    async (ctx, kit, now) => {
      const body = endpointOfForm(ctx, kit);
      const created = await kit.services.db.transaction((trx) =>
        createEndpoint(trx, principal(kit, ctx), body, endpointPolicy(kit), now),
      );
      const t = kit.words(ctx);
      return secretOnce(
        t('webhooks.created_once', { id: created.id }),
        created.secret!,
        t('webhooks.once_warning'),
        t('keys.copy'),
      );
    },
  )(ctx, kit);
}

// ---------------------------------------------------------------- sandbox fire (test mode)

/** The form that fires a sandbox event at a test link (the newest ones offered). */
async function fireForm(ctx: Context, kit: ConsoleKit) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const { rows } = await searchLinks(
    kit.services.db.reader,
    state.scope,
    {},
    { offset: 0, limit: LINK_CHOICES },
  );
  if (rows.length === 0) return html`<h2>${t('webhooks.fire')}</h2><p>${t('webhooks.fire_no_links')}</p>`;
  return html`<form method="post" action="${hooksBase(kit, ctx)}/fire" class="console-form wide">
${csrfField(state.claims.csrf)}
<fieldset><legend>${t('webhooks.fire')}</legend>
<p class="hint">${t('webhooks.fire_hint')}</p>
<label for="fire-type">${t('webhooks.event_type')}</label>
<select id="fire-type" name="type">${EVENT_TYPES.map((type) => html`<option>${type}</option>`)}</select>
<label for="fire-link">${t('webhooks.fire_link')}</label>
<select id="fire-link" name="link_id">${rows.map((link) => html`<option value="${link.id}">${link.id}${link.holder_name ? ` (${link.holder_name})` : ''}</option>`)}</select>
<button type="submit">${t('webhooks.fire_submit')}</button>
</fieldset>
</form>`;
}

/** Where each endpoint's first attempt of a fired event stands. */
function outcomesHtml(ctx: Context, kit: ConsoleKit, outcomes: DeliveryOutcome[], complete: boolean) {
  const t = kit.words(ctx);
  if (outcomes.length === 0) return html`<p>${t('webhooks.fire_nobody')}</p>`;
  const base = hooksBase(kit, ctx);
  // Where it stands first: on a phone the table scrolls, and the outcome is what was asked.
  const rows = outcomes.map((outcome) => [
    html`<a href="${base}/${outcome.endpoint_id}"><code>${outcome.endpoint_id}</code></a>`,
    stateWord(kit.state(ctx).locale, outcome.status),
    lastAnswer(outcome),
    cellText(outcome.attempts),
    html`<a href="${base}/deliveries/${outcome.delivery_id}"><code>${outcome.delivery_id}</code></a>`,
    html`<code class="wrap url">${outcome.url}</code>`,
  ]);
  return html`<h2>${t('webhooks.fire_outcomes')}</h2>${table(
    t('webhooks.fire_outcomes'),
    [
      t('webhooks.endpoint'),
      t('webhooks.status'),
      t('webhooks.last_answer'),
      t('webhooks.attempts'),
      t('webhooks.delivery'),
      t('webhooks.url'),
    ],
    rows,
    '',
  )}${!complete && html`<p>${t('webhooks.fire_waiting')}</p>`}`;
}

/** The address a fire's answer leaves in the browser: opened again (a reload, a bookmark), the form's page. */
export async function fireAddress(ctx: Context, kit: ConsoleKit) {
  ctx.redirect(hooksBase(kit, ctx));
  ctx.status = 303;
}

export async function fireAction(ctx: Context, kit: ConsoleKit) {
  await changeOn(renderEndpoints, async (ctx, kit, now) => {
    const t = kit.words(ctx);
    const { form } = kit.state(ctx);
    // The menu offers the catalogue's types: another is no choice of this form (the service would refuse it
    // in English).
    if (!EVENT_TYPES.some((known) => known === form.type))
      throw errors.invalidParameter('type', t('webhooks.fire_bad_type'));
    const body = readFire({ type: form.type, link_id: form.link_id ?? '' }, () =>
      t('webhooks.fire_bad_link'),
    );
    const { db, config } = kit.services;
    const event = await db.transaction((trx) =>
      fireSandboxEvent(
        trx,
        principal(kit, ctx),
        body,
        {
          syncIntervalMinutes: config.scheduler.syncIntervalMinutes,
          consentExpiryWarningDays: config.links.consentExpiryWarningDays,
        },
        now,
      ),
    );
    const { outcomes, complete } = await waitForOutcomes(db.reader, event.id, FIRE_WAIT_MS);
    return html`${noticeHtml(t('webhooks.fired', { type: body.type, id: event.id, link: body.link_id }))}${outcomesHtml(
      ctx,
      kit,
      outcomes,
      complete,
    )}`;
  })(ctx, kit);
}
