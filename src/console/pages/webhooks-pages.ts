import type Router from '@koa/router';
import type { Context } from 'koa';
import { toIso } from '../../clock/clock.js';
import { ApiError, errors } from '../../errors/api-error.js';
import { EVENT_TYPES } from '../../events/catalogue.js';
import { searchLinks } from '../../links/store.js';
import {
  DELIVERY_STATUSES,
  getDelivery,
  listDeliveries,
  presentDelivery,
  redeliver,
  type DeliveryStatus,
  type WebhookDelivery,
} from '../../webhooks/deliveries.js';
import {
  createEndpoint,
  getEndpoint,
  listEndpoints,
  previousSecretSignsUntil,
  rollEndpointSecret,
  updateEndpoint,
  type EndpointPolicy,
  type WebhookEndpoint,
} from '../../webhooks/endpoints.js';
import { waitForOutcomes, type DeliveryOutcome } from '../../webhooks/operator.js';
import { fireSandboxEvent } from '../../webhooks/sandbox-events.js';
import {
  CREATE_ENDPOINT_BODY,
  FIRE_EVENT_BODY,
  ROLL_SECRET_BODY,
  type CreateEndpointBody,
} from '../../webhooks/schemas.js';
import { html, join, type Html, type HtmlValue } from '../../html/html.js';
import { fieldOf, formReader, type FormWording } from '../forms.js';
import { consolePrincipal, may, scopePath, type ConsoleAction } from '../access.js';
import type { ConsoleKit } from '../kit.js';
import { stateWord, type Words } from '../messages.js';
import { layout } from '../pages.js';
import {
  atMinute,
  atSecond,
  cellText,
  CHECKED,
  DANGER,
  csrfField,
  factsHtml,
  filterSelect,
  noticeHtml,
  pager,
  pagerWords,
  pageWindow,
  problemHtml,
  queryText,
  secretOnce,
  SELECTED,
  table,
  when,
} from '../views.js';

/*
 * Webhooks: an organisation's endpoints in one mode (create, edit, disable and enable, roll the signing
 * secret), its deliveries with every attempt (redeliver), and in test mode a sandbox event fired at them.
 * Every change goes through the services the API and the CLI use (src/webhooks/), so the URL policy, the
 * event catalogue and the ownership checks are theirs, and is in the audit log with the console user.
 * Changing endpoints and firing are `manage`; redelivering is `operate` (support too); reading is everyone's.
 */

const ENDPOINT_ID = /^we_[0-9a-f]{16}$/;
const DELIVERY_ID = /^wd_[0-9a-f]{16}$/;
const EVENT_ID = /^evt_[0-9a-f]{16}$/;
/** The API's own bounds (webhooks/schemas.ts), for the inputs' `maxlength`. */
const URL_MAX = CREATE_ENDPOINT_BODY.properties.url.maxLength;
const DESCRIPTION_MAX = CREATE_ENDPOINT_BODY.properties.description.maxLength;
const readEndpoint = formReader(CREATE_ENDPOINT_BODY);
const readRoll = formReader(ROLL_SECRET_BODY);
const readFire = formReader(FIRE_EVENT_BODY);

/** An endpoint form's problem in the reader's words. */
const endpointWording =
  (t: Words): FormWording =>
  (issue) => {
    const max = { max: String(issue.limit) };
    const tooLong = issue.keyword === 'maxLength';
    switch (fieldOf(issue)) {
      case 'url':
        if (tooLong) return t('webhooks.too_long', max);
        return issue.keyword === 'required' || issue.keyword === 'minLength'
          ? t('webhooks.url_missing')
          : t('form.invalid');
      case 'enabled_events':
        return issue.keyword === 'maxItems' ? t('webhooks.too_many_events') : t('webhooks.no_events');
      case 'description':
        return tooLong ? t('webhooks.too_long', max) : t('form.invalid');
      default:
        return t('form.invalid');
    }
  };
/**
 * Event types are checkboxes named `event:<type>` with its dots as colons: the form parser keeps one value
 * per name, and reads a dot in a name as a nested object.
 */
const EVENT_FIELD = 'event:';
const eventField = (type: string) => `${EVENT_FIELD}${type.replaceAll('.', ':')}`;
/** The event types ticked in a form, as typed (the services check them against the catalogue). */
const eventsOfForm = (form: Record<string, string>): string[] =>
  Object.keys(form)
    .filter((name) => name.startsWith(EVENT_FIELD))
    .map((name) => name.slice(EVENT_FIELD.length).replaceAll(':', '.'));
const EVENT_CHOICES = ['*', ...EVENT_TYPES];
/** Grace periods offered when rolling a secret, in hours: 0 stops the old secret at once. */
const GRACE_HOURS = [0, 1, 24, 72, 168];
/** Endpoints offered in the deliveries filter, and test links offered to fire at: the newest ones. */
const CHOICES = 100;
/**
 * How long firing waits for the first attempts before it shows where each stands. A dispatcher sends a due
 * delivery within a second or so; longer would hold the page, and the deliveries list shows the rest.
 */
const FIRE_WAIT_MS = 5_000;

const sameSet = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');

export function registerWebhookPages(router: Router, kit: ConsoleKit): void {
  const { services } = kit;
  const { db, clock, config } = services;
  const policy: EndpointPolicy = { secrets: services.secrets, addresses: config.webhooks };

  const { words } = kit;
  const principal = (ctx: Context) => consolePrincipal(kit.state(ctx).scope, kit.state(ctx).user);
  const base = (ctx: Context) => `${scopePath(kit.state(ctx).scope)}/webhooks`;
  /**
   * A page only knows its own mode: the other mode's endpoint or delivery is as missing as another
   * organisation's (the services answer 403 `wrong_mode` there, which tells an API caller to switch keys).
   */
  const ownOnly = async <T>(id: string, pattern: RegExp, load: () => Promise<T>): Promise<T> => {
    if (!pattern.test(id)) throw errors.notFound(`No such resource: '${id}'.`, 'id');
    try {
      return await load();
    } catch (error) {
      if (error instanceof ApiError && error.code === 'wrong_mode')
        throw errors.notFound(`No such resource: '${id}'.`, 'id');
      throw error;
    }
  };
  const scopedEndpoint = (ctx: Context) => {
    const id = (ctx.params as { endpoint: string }).endpoint;
    return ownOnly(id, ENDPOINT_ID, () => getEndpoint(db.reader, principal(ctx), id));
  };
  const scopedDelivery = (ctx: Context) => {
    const id = (ctx.params as { delivery: string }).delivery;
    return ownOnly(id, DELIVERY_ID, () => getDelivery(db.reader, principal(ctx), id));
  };

  /** The endpoint form as the API's body: URL and description trimmed, an empty description none. */
  const endpointOfForm = (ctx: Context) => {
    const { form } = kit.state(ctx);
    const description = (form.description ?? '').trim();
    return readEndpoint(
      { url: (form.url ?? '').trim(), enabled_events: eventsOfForm(form), description: description || null },
      endpointWording(words(ctx)),
    );
  };

  /** Checkboxes of the event types, `*` first; `checked` are ticked. */
  const eventChoices = (ctx: Context, checked: readonly string[]) => {
    const t = words(ctx);
    const boxes = EVENT_CHOICES.map((type) => {
      const id = type === '*' ? 'event-all' : `event-${type.replace(/[^a-z_]/g, '-')}`;
      const label = type === '*' ? t('webhooks.all_events') : type;
      return html`<label class="check" for="${id}"><input type="checkbox" id="${id}" name="${eventField(type)}" value="1"${checked.includes(type) && CHECKED}> ${label}</label>`;
    });
    return html`<fieldset class="event-choices"><legend>${t('webhooks.events')}</legend>
<p class="hint">${t('webhooks.events_hint')}</p>
${join(boxes, '\n')}</fieldset>`;
  };

  /** An endpoint's health in words: disabled, backed off, failing (attempts going unanswered), or enabled. */
  const health = (ctx: Context, endpoint: WebhookEndpoint, now: number): string => {
    const t = words(ctx);
    const unanswered = String(endpoint.unanswered_attempts);
    if (endpoint.disabled && endpoint.disabled_reason === 'failing')
      return t('webhooks.state.disabled_failing', { since: `${atMinute(endpoint.failing_since ?? '')} UTC` });
    if (endpoint.disabled) return t('webhooks.state.disabled');
    if (endpoint.backoff_until !== null && Date.parse(endpoint.backoff_until) > now)
      return t('webhooks.state.backed_off', { until: atMinute(endpoint.backoff_until), unanswered });
    if (endpoint.unanswered_attempts > 0) return t('webhooks.state.failing', { unanswered });
    return t('webhooks.state.enabled');
  };

  const deliveriesLink = (ctx: Context, filter: Record<string, string>, label: string) => {
    const query = new URLSearchParams(filter).toString();
    return html`<a href="${`${base(ctx)}/deliveries${query ? `?${query}` : ''}`}">${label}</a>`;
  };

  // ---------------------------------------------------------------- endpoints

  /** The endpoints page, with `notice` (HTML) above the table; `draft` refills a refused creation. */
  const renderEndpoints = async (
    ctx: Context,
    status: number,
    notice: HtmlValue,
    draft?: { url: string; description: string; events: string[] },
  ) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const window = pageWindow(ctx.query);
    const now = clock.now();
    const { data, total } = await listEndpoints(db.reader, principal(ctx), window.offset, window.limit);
    const csrf = state.claims.csrf;
    const rows = data.map((endpoint) => [
      html`<a href="${base(ctx)}/${endpoint.id}"><code>${endpoint.id}</code></a>`,
      html`<code class="wrap url">${endpoint.url}</code>`,
      endpoint.enabled_events.join(', '),
      health(ctx, endpoint, now),
      atMinute(endpoint.created_at),
    ]);
    const manage = may(state.user, 'manage');
    const create = manage
      ? html`<form method="post" action="${base(ctx)}" class="console-form wide">
${csrfField(csrf)}
<fieldset><legend>${t('webhooks.create')}</legend>
<label for="url">${t('webhooks.url')}</label>
<input id="url" name="url" type="url" required maxlength="${URL_MAX}" placeholder="https://" value="${draft?.url ?? ''}">
<label for="description">${t('webhooks.description_label')}</label>
<input id="description" name="description" maxlength="${DESCRIPTION_MAX}" value="${draft?.description ?? ''}">
${eventChoices(ctx, draft?.events ?? [])}
<button type="submit" class="primary">${t('webhooks.create_submit')}</button>
</fieldset>
</form>`
      : '';
    const fire = manage && state.scope.mode === 'test' ? await fireForm(ctx) : '';
    kit.send(
      ctx,
      status,
      layout(
        kit.pageContext(ctx, '/webhooks'),
        t('webhooks.title'),
        html`<p>${deliveriesLink(ctx, {}, t('webhooks.all_deliveries'))}</p>${notice}${table(
          t('webhooks.caption'),
          ['ID', t('webhooks.url'), t('webhooks.events'), t('webhooks.state'), t('webhooks.created')],
          rows,
          t('webhooks.empty'),
        )}${pager(base(ctx), ctx.query, window.page, total, pagerWords(state.locale))}${create}${fire}`,
      ),
    );
  };

  /** A change: allowed for `needed`; an error of the request is shown on `page` (nothing changed). */
  const change =
    (
      needed: ConsoleAction,
      page: (ctx: Context, status: number, notice: HtmlValue) => Promise<void>,
      work: (ctx: Context, now: number) => Promise<Html>,
    ) =>
    async (ctx: Context) => {
      const state = kit.state(ctx);
      if (!may(state.user, needed)) return kit.refuse(ctx, 403, 'error.forbidden');
      let shown: Html;
      try {
        shown = await work(ctx, clock.now());
      } catch (error) {
        if (error instanceof ApiError && error.status < 500 && error.status !== 404)
          return page(ctx, error.status, problemHtml(error.message));
        throw error;
      }
      await page(ctx, 200, shown);
    };

  const secret = (ctx: Context, label: string, value: string) => {
    const t = words(ctx);
    return secretOnce(label, value, t('webhooks.once_warning'), t('keys.copy'));
  };

  router.get('/o/:org/:mode/webhooks', kit.scoped, (ctx) => renderEndpoints(ctx, 200, null));

  router.post('/o/:org/:mode/webhooks', kit.scoped, async (ctx) => {
    const { form } = kit.state(ctx);
    // A refused creation shows the form again as it was typed, the problem above it.
    const draft = {
      url: (form.url ?? '').slice(0, URL_MAX),
      description: (form.description ?? '').slice(0, DESCRIPTION_MAX),
      events: eventsOfForm(form).filter((type) => EVENT_CHOICES.includes(type)),
    };
    await change(
      'manage',
      (ctx, status, notice) => renderEndpoints(ctx, status, notice, status === 200 ? undefined : draft),
      async (ctx, now) => {
        const body = endpointOfForm(ctx);
        const created = await db.transaction((trx) => createEndpoint(trx, principal(ctx), body, policy, now));
        return secret(ctx, words(ctx)('webhooks.created_once', { id: created.id }), created.secret!);
      },
    )(ctx);
  });

  // ---------------------------------------------------------------- deliveries (before /:endpoint)

  router.get('/o/:org/:mode/webhooks/deliveries', kit.scoped, async (ctx) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const query = (name: string) => queryText(ctx.query, name);
    const endpointId = ENDPOINT_ID.test(query('endpoint_id')) ? query('endpoint_id') : undefined;
    const eventId = EVENT_ID.test(query('event_id')) ? query('event_id') : undefined;
    const status = DELIVERY_STATUSES.find((known) => known === query('status'));
    const window = pageWindow(ctx.query);
    const [{ rows, total }, endpoints] = await Promise.all([
      listDeliveries(
        db.reader,
        { orgId: state.scope.orgId, mode: state.scope.mode, endpointId, eventId, status },
        window.offset,
        window.limit,
      ),
      listEndpoints(db.reader, principal(ctx), 0, CHOICES),
    ]);
    const cells = rows
      .map(presentDelivery)
      .map((delivery) => [
        html`<a href="${base(ctx)}/deliveries/${delivery.id}"><code>${delivery.id}</code></a>`,
        stateWord(state.locale, delivery.status),
        lastAnswer(delivery),
        delivery.event_type,
        html`<a href="${base(ctx)}/${delivery.endpoint_id}"><code>${delivery.endpoint_id}</code></a>`,
        cellText(delivery.attempts),
        when(delivery.created_at),
      ]);
    const filters = html`<form method="get" action="${base(ctx)}/deliveries" class="search-form">
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
    kit.send(
      ctx,
      200,
      layout(
        kit.pageContext(ctx, '/webhooks/deliveries'),
        t('webhooks.deliveries_title'),
        html`<p><a href="${base(ctx)}">${t('webhooks.back')}</a></p>${filters}${table(
          t('webhooks.deliveries_caption'),
          [
            'ID',
            t('webhooks.status'),
            t('webhooks.last_answer'),
            t('webhooks.event_type'),
            t('webhooks.endpoint'),
            t('webhooks.attempts'),
            t('webhooks.created'),
          ],
          cells,
          t('webhooks.deliveries_empty'),
        )}${pager(`${base(ctx)}/deliveries`, ctx.query, window.page, total, pagerWords(state.locale))}`,
      ),
    );
  });

  const renderDelivery = async (ctx: Context, status: number, notice: HtmlValue) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const delivery = await scopedDelivery(ctx);
    const facts: [string, HtmlValue][] = [
      [t('webhooks.event_id'), html`<code>${delivery.event_id}</code>`],
      [t('webhooks.event_type'), delivery.event_type],
      [
        t('webhooks.endpoint'),
        html`<a href="${base(ctx)}/${delivery.endpoint_id}"><code>${delivery.endpoint_id}</code></a>`,
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
      ? html`<form method="post" action="${base(ctx)}/deliveries/${delivery.id}/redeliver" class="inline-form">${csrfField(state.claims.csrf)}<button type="submit">${t('webhooks.redeliver')}</button></form>`
      : '';
    kit.send(
      ctx,
      status,
      layout(
        kit.pageContext(ctx, '/webhooks/deliveries'),
        delivery.id,
        html`<p><a href="${base(ctx)}/deliveries">${t('webhooks.back_deliveries')}</a></p>
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
  };

  router.get('/o/:org/:mode/webhooks/deliveries/:delivery', kit.scoped, (ctx) =>
    renderDelivery(ctx, 200, null),
  );

  router.post(
    '/o/:org/:mode/webhooks/deliveries/:delivery/redeliver',
    kit.scoped,
    async (ctx, next) => {
      // The delivery must be this scope's before anything else is said about it (else 404).
      await scopedDelivery(ctx);
      await next();
    },
    change('operate', renderDelivery, async (ctx, now) => {
      const original = (ctx.params as { delivery: string }).delivery;
      const created = await db.transaction((trx) => redeliver(trx, principal(ctx), original, now));
      return html`<p class="notice" role="status">${words(ctx)('webhooks.redelivered', { id: created.id })} <a href="${base(ctx)}/deliveries/${created.id}">${words(ctx)('webhooks.open_delivery', { id: created.id })}</a></p>`;
    }),
  );

  // ---------------------------------------------------------------- sandbox fire (test mode)

  /** The form that fires a sandbox event at a test link (the newest ones offered). */
  const fireForm = async (ctx: Context) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const { rows } = await searchLinks(db.reader, state.scope, {}, { offset: 0, limit: CHOICES });
    if (rows.length === 0) return html`<h2>${t('webhooks.fire')}</h2><p>${t('webhooks.fire_no_links')}</p>`;
    return html`<form method="post" action="${base(ctx)}/fire" class="console-form wide">
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
  };

  /** Where each endpoint's first attempt of a fired event stands. */
  const outcomesHtml = (ctx: Context, outcomes: DeliveryOutcome[], complete: boolean) => {
    const t = words(ctx);
    if (outcomes.length === 0) return html`<p>${t('webhooks.fire_nobody')}</p>`;
    // Where it stands first: on a phone the table scrolls, and the outcome is what was asked.
    const rows = outcomes.map((outcome) => [
      html`<a href="${base(ctx)}/${outcome.endpoint_id}"><code>${outcome.endpoint_id}</code></a>`,
      stateWord(kit.state(ctx).locale, outcome.status),
      lastAnswer(outcome),
      cellText(outcome.attempts),
      html`<a href="${base(ctx)}/deliveries/${outcome.delivery_id}"><code>${outcome.delivery_id}</code></a>`,
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
  };

  // The address a fire's answer leaves in the browser: opened again (a reload, a bookmark), the form's page.
  router.get('/o/:org/:mode/webhooks/fire', kit.scoped, (ctx) => {
    ctx.redirect(base(ctx));
    ctx.status = 303;
  });

  router.post('/o/:org/:mode/webhooks/fire', kit.scoped, async (ctx) => {
    // Sandbox events are test mode's alone: in live mode there is nothing here.
    if (kit.state(ctx).scope.mode !== 'test') return kit.refuse(ctx, 404, 'error.not_found');
    await change('manage', renderEndpoints, async (ctx, now) => {
      const t = words(ctx);
      const { form } = kit.state(ctx);
      // The menu offers the catalogue's types: another is no choice of this form (the service would refuse it
      // in English).
      if (!EVENT_TYPES.some((known) => known === form.type))
        throw errors.invalidParameter('type', t('webhooks.fire_bad_type'));
      const body = readFire({ type: form.type, link_id: form.link_id ?? '' }, () => t('webhooks.fire_bad_link'));
      const { type, link_id: linkId } = body;
      const event = await db.transaction((trx) =>
        fireSandboxEvent(
          trx,
          principal(ctx),
          body,
          { syncIntervalMinutes: config.scheduler.syncIntervalMinutes },
          now,
        ),
      );
      const { outcomes, complete } = await waitForOutcomes(db.reader, event.id, FIRE_WAIT_MS);
      return html`${noticeHtml(t('webhooks.fired', { type, id: event.id, link: linkId }))}${outcomesHtml(
        ctx,
        outcomes,
        complete,
      )}`;
    })(ctx);
  });

  // ---------------------------------------------------------------- one endpoint

  const renderEndpoint = async (ctx: Context, status: number, notice: HtmlValue) => {
    const state = kit.state(ctx);
    const t = words(ctx);
    const endpoint = await scopedEndpoint(ctx);
    const now = clock.now();
    const csrf = state.claims.csrf;
    const here = `${base(ctx)}/${endpoint.id}`;
    // Counts by status, from the tallies the API's list total reads; each links to the filtered list.
    const counts = await Promise.all(
      DELIVERY_STATUSES.map(async (deliveryStatus: DeliveryStatus) => {
        const { total } = await listDeliveries(
          db.reader,
          {
            orgId: state.scope.orgId,
            mode: state.scope.mode,
            endpointId: endpoint.id,
            status: deliveryStatus,
          },
          0,
          1,
        );
        return deliveriesLink(
          ctx,
          { endpoint_id: endpoint.id, status: deliveryStatus },
          `${stateWord(state.locale, deliveryStatus)}: ${total}`,
        );
      }),
    );
    const previousUntil = await previousSecretSignsUntil(db.reader, endpoint.id, now);
    const facts: [string, HtmlValue][] = [
      [t('webhooks.url'), html`<code class="wrap">${endpoint.url}</code>`],
      [t('webhooks.description'), cellText(endpoint.description)],
      [t('webhooks.events'), endpoint.enabled_events.join(', ')],
      [t('webhooks.state'), health(ctx, endpoint, now)],
      [t('webhooks.unanswered'), cellText(endpoint.unanswered_attempts)],
      [t('webhooks.deliveries'), join(counts, ' · ')],
      [t('webhooks.created'), when(endpoint.created_at)],
      [t('webhooks.updated'), when(endpoint.updated_at)],
      ...(previousUntil !== null
        ? ([[t('webhooks.previous_secret'), when(toIso(previousUntil))]] as [string, HtmlValue][])
        : []),
    ];
    const defaultGrace = GRACE_HOURS.includes(config.webhooks.secretRollGraceSeconds / 3600)
      ? config.webhooks.secretRollGraceSeconds / 3600
      : 24;
    const forms = may(state.user, 'manage')
      ? html`<form method="post" action="${here}" class="console-form wide">${csrfField(csrf)}
<fieldset><legend>${t('webhooks.edit')}</legend>
<label for="url">${t('webhooks.url')}</label>
<input id="url" name="url" type="url" required maxlength="${URL_MAX}" value="${endpoint.url}">
<label for="description">${t('webhooks.description_label')}</label>
<input id="description" name="description" maxlength="${DESCRIPTION_MAX}" value="${endpoint.description ?? ''}">
${eventChoices(ctx, endpoint.enabled_events)}
<button type="submit">${t('webhooks.save')}</button>
</fieldset></form>
<form method="post" action="${here}/roll" class="console-form">${csrfField(csrf)}
<fieldset><legend>${t('webhooks.roll')}</legend>
<label for="grace">${t('webhooks.grace')}</label>
<select id="grace" name="grace_hours">${GRACE_HOURS.map((hours) => html`<option value="${hours}"${hours === defaultGrace && SELECTED}>${hours === 0 ? t('webhooks.grace_none') : t('keys.grace_hours', { hours: String(hours) })}</option>`)}</select>
<button type="submit">${t('webhooks.roll')}</button></fieldset></form>
<form method="post" action="${here}/${endpoint.disabled ? 'enable' : 'disable'}" class="console-form">${csrfField(csrf)}
<fieldset${!endpoint.disabled && DANGER}><legend>${t(endpoint.disabled ? 'webhooks.enable' : 'webhooks.disable')}</legend>
<p class="hint">${t(endpoint.disabled ? 'webhooks.enable_hint' : 'webhooks.disable_hint')}</p>
<button type="submit"${!endpoint.disabled && DANGER}>${t(endpoint.disabled ? 'webhooks.enable' : 'webhooks.disable')}</button></fieldset></form>`
      : '';
    kit.send(
      ctx,
      status,
      layout(
        kit.pageContext(ctx, '/webhooks'),
        endpoint.id,
        html`<p><a href="${base(ctx)}">${t('webhooks.back')}</a></p>
${notice}
${factsHtml(facts)}
<p>${deliveriesLink(ctx, { endpoint_id: endpoint.id }, t('webhooks.its_deliveries'))}</p>
${forms}`,
      ),
    );
  };

  router.get('/o/:org/:mode/webhooks/:endpoint', kit.scoped, (ctx) => renderEndpoint(ctx, 200, null));

  /** An endpoint's change: the endpoint must be this scope's first (else 404, whatever the role). */
  const endpointChange = (work: (ctx: Context, endpoint: WebhookEndpoint, now: number) => Promise<Html>) => [
    kit.scoped,
    async (ctx: Context, next: () => Promise<unknown>) => {
      await scopedEndpoint(ctx);
      await next();
    },
    change('manage', renderEndpoint, async (ctx, now) => work(ctx, await scopedEndpoint(ctx), now)),
  ];

  router.post(
    '/o/:org/:mode/webhooks/:endpoint',
    ...endpointChange(async (ctx, endpoint, now) => {
      const t = words(ctx);
      const fields = endpointOfForm(ctx);
      // Only what changed: the URL of `svc webhooks listen`'s endpoint may not, its events may.
      const patch: Partial<CreateEndpointBody> = {};
      if (fields.url !== endpoint.url) patch.url = fields.url;
      if (!sameSet(fields.enabled_events, endpoint.enabled_events)) patch.enabled_events = fields.enabled_events;
      if ((fields.description ?? null) !== endpoint.description) patch.description = fields.description;
      if (Object.keys(patch).length === 0) return noticeHtml(t('webhooks.unchanged'));
      await db.transaction((trx) => updateEndpoint(trx, principal(ctx), endpoint.id, patch, policy, now));
      return noticeHtml(t('webhooks.saved'));
    }),
  );

  for (const disabled of [true, false]) {
    router.post(
      `/o/:org/:mode/webhooks/:endpoint/${disabled ? 'disable' : 'enable'}`,
      ...endpointChange(async (ctx, endpoint, now) => {
        await db.transaction((trx) =>
          updateEndpoint(trx, principal(ctx), endpoint.id, { disabled }, policy, now),
        );
        return noticeHtml(words(ctx)(disabled ? 'webhooks.disabled_done' : 'webhooks.enabled_done'));
      }),
    );
  }

  router.post(
    '/o/:org/:mode/webhooks/:endpoint/roll',
    ...endpointChange(async (ctx, endpoint, now) => {
      const t = words(ctx);
      const raw = kit.state(ctx).form.grace_hours ?? '';
      const hours = Number(raw);
      const graceBad = () => t('webhooks.grace_bad', { choices: GRACE_HOURS.join(', ') });
      // The menu's hours; the API's schema has the last word on the seconds.
      if (raw === '' || !GRACE_HOURS.includes(hours)) throw errors.invalidParameter('grace_hours', graceBad());
      const { grace_seconds: grace = 0 } = readRoll({ grace_seconds: hours * 3600 }, graceBad);
      const rolled = await db.transaction((trx) =>
        rollEndpointSecret(trx, principal(ctx), endpoint.id, grace, policy, now),
      );
      const label =
        hours === 0
          ? t('webhooks.rolled_once_now', { id: endpoint.id })
          : t('webhooks.rolled_once', {
              id: endpoint.id,
              until: when(toIso(now + hours * 3_600_000)),
            });
      return secret(ctx, label, rolled.secret!);
    }),
  );
}

/** The last attempt's HTTP status, or why it got none (the attempts table has the rest). */
function lastAnswer(delivery: Pick<WebhookDelivery, 'last_response_status' | 'last_error'>): string {
  if (delivery.last_response_status !== null) return `HTTP ${delivery.last_response_status}`;
  return delivery.last_error ?? '-';
}

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
