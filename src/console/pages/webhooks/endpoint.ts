import type { Context } from 'koa';
import { toIso } from '../../../clock/clock.js';
import { errors } from '../../../errors/api-error.js';
import { DELIVERY_STATUSES, listDeliveries, type DeliveryStatus } from '../../../webhooks/deliveries.js';
import { previousSecretSignsUntil, rollEndpointSecret, updateEndpoint } from '../../../webhooks/endpoints.js';
import { ROLL_SECRET_BODY, type CreateEndpointBody } from '../../../webhooks/schemas.js';
import { html, join, type HtmlValue } from '../../../html/html.js';
import { may } from '../../access.js';
import { formReader } from '../../forms.js';
import type { ConsoleKit } from '../../kit.js';
import { stateWord } from '../../messages.js';
import { layout } from '../../layout.js';
import {
  cellText,
  csrfField,
  DANGER,
  factsHtml,
  noticeHtml,
  secretOnce,
  SELECTED,
  when,
} from '../../views.js';
import {
  changeOn,
  deliveriesLink,
  endpointPolicy,
  health,
  hooksBase,
  principal,
  scopedEndpoint,
} from './common.js';
import { DESCRIPTION_MAX, URL_MAX, endpointOfForm, eventChoices } from './endpoint-form.js';

/*
 * One endpoint: its facts and delivery counts, and for `manage` the forms that edit it, roll its signing
 * secret (the new one shown once) and disable or enable it.
 */

/** Grace periods offered when rolling a secret, in hours: 0 stops the old secret at once. */
const GRACE_HOURS = [0, 1, 24, 72, 168];
const readRoll = formReader(ROLL_SECRET_BODY);

const sameSet = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');

async function renderEndpoint(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const { db, clock, config } = kit.services;
  const endpoint = await scopedEndpoint(ctx, kit);
  const now = clock.now();
  const csrf = state.claims.csrf;
  const here = `${hooksBase(kit, ctx)}/${endpoint.id}`;
  // Counts by status, from the tallies the API's list total reads; each links to the filtered list.
  const counts = await Promise.all(
    DELIVERY_STATUSES.map(async (deliveryStatus: DeliveryStatus) => {
      const { total } = await listDeliveries(
        db.reader,
        { orgId: state.scope.orgId, mode: state.scope.mode, endpointId: endpoint.id, status: deliveryStatus },
        0,
        1,
      );
      return deliveriesLink(
        kit,
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
    [t('webhooks.state'), health(kit, ctx, endpoint, now)],
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
${eventChoices(t, endpoint.enabled_events)}
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
      html`<p><a href="${hooksBase(kit, ctx)}">${t('webhooks.back')}</a></p>
${notice}
${factsHtml(facts)}
<p>${deliveriesLink(kit, ctx, { endpoint_id: endpoint.id }, t('webhooks.its_deliveries'))}</p>
${forms}`,
    ),
  );
}

export const showEndpoint = (ctx: Context, kit: ConsoleKit) => renderEndpoint(ctx, kit, 200, null);

export const updateEndpointAction = changeOn(renderEndpoint, async (ctx, kit, now) => {
  const t = kit.words(ctx);
  const endpoint = await scopedEndpoint(ctx, kit);
  const fields = endpointOfForm(ctx, kit);
  // Only what changed: the URL of `svc webhooks listen`'s endpoint may not, its events may.
  const patch: Partial<CreateEndpointBody> = {};
  if (fields.url !== endpoint.url) patch.url = fields.url;
  if (!sameSet(fields.enabled_events, endpoint.enabled_events)) patch.enabled_events = fields.enabled_events;
  if ((fields.description ?? null) !== endpoint.description) patch.description = fields.description;
  if (Object.keys(patch).length === 0) return noticeHtml(t('webhooks.unchanged'));
  await kit.services.db.transaction((trx) =>
    updateEndpoint(trx, principal(kit, ctx), endpoint.id, patch, endpointPolicy(kit), now),
  );
  return noticeHtml(t('webhooks.saved'));
});

const setDisabled = (disabled: boolean) =>
  changeOn(renderEndpoint, async (ctx, kit, now) => {
    const endpoint = await scopedEndpoint(ctx, kit);
    await kit.services.db.transaction((trx) =>
      updateEndpoint(trx, principal(kit, ctx), endpoint.id, { disabled }, endpointPolicy(kit), now),
    );
    return noticeHtml(kit.words(ctx)(disabled ? 'webhooks.disabled_done' : 'webhooks.enabled_done'));
  });
export const disableEndpointAction = setDisabled(true);
export const enableEndpointAction = setDisabled(false);

export const rollSecretAction = changeOn(renderEndpoint, async (ctx, kit, now) => {
  const t = kit.words(ctx);
  const endpoint = await scopedEndpoint(ctx, kit);
  const raw = kit.state(ctx).form.grace_hours ?? '';
  const hours = Number(raw);
  const graceBad = () => t('webhooks.grace_bad', { choices: GRACE_HOURS.join(', ') });
  // The menu's hours; the API's schema has the last word on the seconds.
  if (raw === '' || !GRACE_HOURS.includes(hours)) throw errors.invalidParameter('grace_hours', graceBad());
  const { grace_seconds: grace = 0 } = readRoll({ grace_seconds: hours * 3600 }, graceBad);
  const rolled = await kit.services.db.transaction((trx) =>
    rollEndpointSecret(trx, principal(kit, ctx), endpoint.id, grace, endpointPolicy(kit), now),
  );
  const label =
    hours === 0
      ? t('webhooks.rolled_once_now', { id: endpoint.id })
      : t('webhooks.rolled_once', { id: endpoint.id, until: when(toIso(now + hours * 3_600_000)) });
  return secretOnce(label, rolled.secret!, t('webhooks.once_warning'), t('keys.copy'));
});
