import type { Context } from 'koa';
import { ApiError, errors } from '../../../errors/api-error.js';
import { getDelivery, type WebhookDelivery } from '../../../webhooks/deliveries.js';
import { getEndpoint, type EndpointPolicy, type WebhookEndpoint } from '../../../webhooks/endpoints.js';
import { html, type Html, type HtmlValue } from '../../../html/html.js';
import { consolePrincipal, scopePath } from '../../access.js';
import type { ConsoleKit } from '../../kit.js';
import { problemHtml } from '../../views.js';
import { atMinute } from '../../views.js';

/*
 * What the webhooks pages share: where they are, whom they act as, the scope's own endpoint or delivery
 * of the URL, and how a change answers. Every change goes through the services the API and the CLI use
 * (src/webhooks/), so the URL policy, the event catalogue, the ownership checks and the audit row are theirs.
 */

const ENDPOINT_ID = /^we_[0-9a-f]{16}$/;
const DELIVERY_ID = /^wd_[0-9a-f]{16}$/;

/** A page that shows `notice` (a result, or a problem) above its content, with `status`. */
export type PageRenderer = (
  ctx: Context,
  kit: ConsoleKit,
  status: number,
  notice: HtmlValue,
) => Promise<void>;

export const principal = (kit: ConsoleKit, ctx: Context) =>
  consolePrincipal(kit.state(ctx).scope, kit.state(ctx).user);

export const hooksBase = (kit: ConsoleKit, ctx: Context) => `${scopePath(kit.state(ctx).scope)}/webhooks`;

export const endpointPolicy = (kit: ConsoleKit): EndpointPolicy => ({
  secrets: kit.services.secrets,
  addresses: kit.services.config.webhooks,
});

/**
 * A page only knows its own mode: the other mode's endpoint or delivery is as missing as another
 * organisation's (the services answer 403 `wrong_mode` there, which tells an API caller to switch keys).
 */
async function ownOnly<T>(id: string, pattern: RegExp, load: () => Promise<T>): Promise<T> {
  if (!pattern.test(id)) throw errors.notFound(`No such resource: '${id}'.`, 'id');
  try {
    return await load();
  } catch (error) {
    if (error instanceof ApiError && error.code === 'wrong_mode')
      throw errors.notFound(`No such resource: '${id}'.`, 'id');
    throw error;
  }
}

export function scopedEndpoint(ctx: Context, kit: ConsoleKit): Promise<WebhookEndpoint> {
  const id = (ctx.params as { endpoint: string }).endpoint;
  return ownOnly(id, ENDPOINT_ID, () => getEndpoint(kit.services.db.reader, principal(kit, ctx), id));
}

export function scopedDelivery(ctx: Context, kit: ConsoleKit): Promise<WebhookDelivery> {
  const id = (ctx.params as { delivery: string }).delivery;
  return ownOnly(id, DELIVERY_ID, () => getDelivery(kit.services.db.reader, principal(kit, ctx), id));
}

/**
 * A change's answer: `work`'s result on `page`, or the request's problem there with its status (nothing
 * changed). The router has checked the user's right already.
 */
export function changeOn(
  page: PageRenderer,
  work: (ctx: Context, kit: ConsoleKit, now: number) => Promise<Html>,
) {
  return async (ctx: Context, kit: ConsoleKit) => {
    let shown: Html;
    try {
      shown = await work(ctx, kit, kit.services.clock.now());
    } catch (error) {
      if (error instanceof ApiError && error.status < 500 && error.status !== 404)
        return page(ctx, kit, error.status, problemHtml(error.message));
      throw error;
    }
    await page(ctx, kit, 200, shown);
  };
}

/** A link to the deliveries list with `filter`. */
export function deliveriesLink(kit: ConsoleKit, ctx: Context, filter: Record<string, string>, label: string) {
  const query = new URLSearchParams(filter).toString();
  return html`<a href="${`${hooksBase(kit, ctx)}/deliveries${query ? `?${query}` : ''}`}">${label}</a>`;
}

/** An endpoint's health in words: disabled, backed off, failing (attempts going unanswered), or enabled. */
export function health(kit: ConsoleKit, ctx: Context, endpoint: WebhookEndpoint, now: number): string {
  const t = kit.words(ctx);
  const unanswered = String(endpoint.unanswered_attempts);
  if (endpoint.disabled && endpoint.disabled_reason === 'failing')
    return t('webhooks.state.disabled_failing', { since: atMinute(endpoint.failing_since) });
  if (endpoint.disabled) return t('webhooks.state.disabled');
  if (endpoint.backoff_until !== null && Date.parse(endpoint.backoff_until) > now)
    return t('webhooks.state.backed_off', { until: atMinute(endpoint.backoff_until), unanswered });
  if (endpoint.unanswered_attempts > 0) return t('webhooks.state.failing', { unanswered });
  return t('webhooks.state.enabled');
}

/** The last attempt's HTTP status, or why it got none (the attempts table has the rest). */
export function lastAnswer(delivery: Pick<WebhookDelivery, 'last_response_status' | 'last_error'>): string {
  if (delivery.last_response_status !== null) return `HTTP ${delivery.last_response_status}`;
  return delivery.last_error ?? '-';
}
