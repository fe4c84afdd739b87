import type { Context } from 'koa';
import { RATE_GROUPS } from '../../config/defaults.js';
import { aboveCeiling, parseRateLimitOverrides, type RateLimitOverrides } from '../../ratelimit/overrides.js';
import { getOrganisation, organisationCeilings, setOrganisationCeilings } from '../../orgs/orgs.js';
import { ApiError, errors } from '../../errors/api-error.js';
import {
  countLiveKeys,
  createApiKey,
  findScopedKey,
  pageApiKeys,
  revokeApiKey,
  rotateApiKey,
  setKeyRateLimits,
} from '../../keys/keys.js';
import { html, join, type Html, type HtmlValue } from '../../html/html.js';
import { may, scopePath } from '../access.js';
import type { ConsoleKit, ConsoleRoute } from '../kit.js';
import { sendListPage } from '../list-page.js';
import { shownName } from '../format.js';
import { codeWord } from '../messages.js';
import { layout } from '../layout.js';
import {
  atMinute,
  csrfField,
  factsHtml,
  noticeHtml,
  pageWindow,
  problemHtml,
  secretOnce,
  SELECTED,
} from '../views.js';

/*
 * Keys: an organisation's API keys in one mode, paginated; issue (the key shown once, with a copy
 * button), rotate with a grace period, revoke, raise a rate limit. Changing keys is an operator's or an
 * admin's (`manage`); support reads. Every change goes through keys.ts, as the CLI's do, with the console
 * user as the actor in the audit log.
 */

/** Grace periods offered when rotating, in hours (the CLI's default is 24). */
const GRACE_HOURS = [1, 24, 72, 168];

/** The keys page, with `notice` (HTML) above the table: a secret shown once, or what just changed. */
async function renderKeys(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue) {
  const { db, clock, config } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = `${scopePath(state.scope)}/keys`;
  const window = pageWindow(ctx.query);
  const { data, total } = await pageApiKeys(db.reader, state.scope, window, clock.now());
  const manage = may(state.user, 'manage');
  const csrf = state.claims.csrf;
  const rows = data.map((key) => [
    html`<a href="${base}/${key.id}"><code>${key.id}</code></a>`,
    html`<code>${key.redacted}</code>`,
    codeWord(state.locale, 'key_type', key.type),
    shownName(state.locale, key.name ?? ''),
    codeWord(state.locale, 'key_status', key.status),
    atMinute(key.created_at),
    atMinute(key.last_used_at) || t('keys.never'),
    atMinute(key.expires_at) || '-',
  ]);
  const headers = [
    t('keys.id'),
    t('keys.key'),
    t('keys.type'),
    t('keys.name'),
    t('keys.status'),
    t('keys.created'),
    t('keys.last_used'),
    t('keys.expires'),
  ];
  const ceilings = await organisationCeilings(db.reader, state.scope.orgId, config.rateLimits);
  const organisation = await getOrganisation(db.reader, state.scope.orgId);
  const liveKeys = await countLiveKeys(db.reader, state.scope.orgId, kit.services.clock.now());
  // One row a group: a `group=rate:burst` list ran 72 px past a phone's width.
  const ceilingFacts = html`<h2>${t('keys.ceilings')}</h2>
<p>${t('keys.ceilings_shared')}</p>${factsHtml([
    ...Object.entries(ceilings).map(([group, limit]): [string, string] => [
      group,
      t('keys.ceiling_value', { per_minute: String(limit.perMinute), burst: String(limit.burst) }),
    ]),
    [
      t('keys.live_keys'),
      t('keys.live_keys_value', { live: String(liveKeys), max: String(organisation.max_live_keys) }),
    ],
  ])}`;
  const govern = may(state.user, 'govern')
    ? html`<form method="post" action="${scopePath(state.scope)}/ceilings" class="console-form">${csrfField(csrf)}
<fieldset><legend>${t('keys.ceilings_set')}</legend>
${limitFields(t, 'ceiling')}
<button type="submit">${t('keys.ceilings_set')}</button></fieldset></form>`
    : '';
  const issue = manage
    ? html`<form method="post" action="${base}" class="console-form">
${csrfField(csrf)}
<fieldset><legend>${t('keys.issue')}</legend>
<label><input type="radio" name="type" value="secret" checked> ${t('keys.type.secret')}</label>
<label><input type="radio" name="type" value="publishable"> ${t('keys.type.publishable')}</label>
<label for="key-name">${t('keys.name_label')}</label>
<input id="key-name" name="name" maxlength="100">
<button type="submit" class="primary">${t('keys.submit')}</button>
</fieldset>
</form>`
    : '';
  sendListPage(ctx, kit, {
    status,
    section: '/keys',
    title: t('keys.title'),
    above: notice,
    caption: t('keys.caption'),
    headers,
    rows,
    empty: t('keys.empty'),
    base,
    page: window.page,
    total,
    below: html`${issue}${ceilingFacts}${govern}`,
  });
}

const secret = (kit: ConsoleKit, ctx: Context, label: string, value: string) => {
  const t = kit.words(ctx);
  return secretOnce(label, value, t('keys.once_warning'), t('keys.copy'));
};

/** A change to keys (the router checked the right): an error of the request is shown on the page, nothing changed. */
const change =
  (work: (ctx: Context, kit: ConsoleKit) => Promise<Html>) => async (ctx: Context, kit: ConsoleKit) => {
    let shown: Html;
    try {
      shown = await work(ctx, kit);
    } catch (error) {
      if (error instanceof ApiError && error.status < 500 && error.status !== 404)
        return renderKeys(ctx, kit, error.status, problemHtml(error.message));
      throw error;
    }
    await renderKeys(ctx, kit, 200, shown);
  };
const actor = (kit: ConsoleKit, ctx: Context) => `console:${kit.state(ctx).user.id}`;
/** The key named in the URL, when it is this scope's (else 404). */
const scopedKey = (ctx: Context, kit: ConsoleKit) =>
  findScopedKey(
    kit.services.db.reader,
    kit.state(ctx).scope,
    (ctx.params as { key: string }).key,
    kit.services.clock.now(),
  );

const showKeys = (ctx: Context, kit: ConsoleKit) => renderKeys(ctx, kit, 200, null);

/** One key: what it is, and (for those who may) rotate, revoke and limits. */
async function showKey(ctx: Context, kit: ConsoleKit) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const key = await scopedKey(ctx, kit);
  const base = `${scopePath(state.scope)}/keys`;
  const csrf = state.claims.csrf;
  const limits = Object.entries(key.rate_limits ?? {})
    .map(([name, limit]) => `${name}=${limit.perMinute}:${limit.burst}`)
    .join(', ');
  const facts: [string, HtmlValue][] = [
    [t('keys.key'), html`<code>${key.redacted}</code>`],
    [t('keys.type'), codeWord(state.locale, 'key_type', key.type)],
    [t('keys.name'), shownName(state.locale, key.name ?? '-')],
    [t('keys.status'), codeWord(state.locale, 'key_status', key.status)],
    [t('keys.created'), atMinute(key.created_at)],
    [t('keys.last_used'), atMinute(key.last_used_at) || t('keys.never')],
    [t('keys.expires'), atMinute(key.expires_at) || '-'],
    [t('keys.limits'), limits || t('keys.limits_default')],
  ];
  const active = key.status !== 'revoked' && key.status !== 'expired';
  const forms =
    may(state.user, 'manage') && active
      ? join(
          [
            key.rotated_to
              ? null
              : html`<form method="post" action="${base}/${key.id}/rotate" class="console-form">${csrfField(csrf)}
<fieldset><legend>${t('keys.rotate')}</legend>
<label for="grace">${t('keys.grace')}</label>
<select id="grace" name="grace_hours">${GRACE_HOURS.map((hours) => html`<option value="${hours}"${hours === 24 && SELECTED}>${t('keys.grace_hours', { hours: String(hours) })}</option>`)}</select>
<button type="submit">${t('keys.rotate')}</button></fieldset></form>`,
            html`<form method="post" action="${base}/${key.id}/limits" class="console-form">${csrfField(csrf)}
<fieldset><legend>${t('keys.limits')}</legend>
${limitFields(t, 'limit')}
<button type="submit">${t('keys.limits_set')}</button></fieldset></form>`,
            html`<form method="post" action="${base}/${key.id}/revoke" class="console-form">${csrfField(csrf)}
<fieldset class="danger"><legend>${t('keys.revoke')}</legend>
<label class="check"><input type="checkbox" name="confirm" value="yes" required> ${t('keys.revoke_confirm')}</label>
<button type="submit" class="danger">${t('keys.revoke')}</button></fieldset></form>`,
          ],
          '\n',
        )
      : null;
  kit.send(
    ctx,
    200,
    layout(
      kit.pageContext(ctx, '/keys'),
      key.id,
      html`<p><a href="${base}">${t('keys.back')}</a></p>
${factsHtml(facts)}
${forms}`,
    ),
  );
}

/** The column holds 255; a name is a label for people, and the list shows it in one line. */
const KEY_NAME_MAX = 100;

const issueAction = change(async (ctx, kit) => {
  const { db, clock, config } = kit.services;
  const words = kit.words;
  const { scope, form } = kit.state(ctx);
  const type = form.type === 'publishable' ? 'publishable' : form.type === 'secret' ? 'secret' : null;
  if (!type) throw errors.invalidParameter('type', words(ctx)('keys.type_missing'));
  const name = (form.name ?? '').trim();
  if (name.length > KEY_NAME_MAX)
    throw errors.invalidParameter('name', words(ctx)('keys.name_too_long', { max: String(KEY_NAME_MAX) }));
  const issued = await db
    .transaction((trx) =>
      createApiKey(trx, {
        brand: config.brand,
        orgId: scope.orgId,
        mode: scope.mode,
        type,
        name: name || null,
        actor: actor(kit, ctx),
        now: clock.now(),
      }),
    )
    .catch((error: unknown) => {
      // The service's sentence names the CLI; a console user reads it in their language.
      if (error instanceof ApiError && error.code === 'key_limit_reached')
        throw errors.conflict('key_limit_reached', words(ctx)('keys.cap_reached'));
      throw error;
    });
  return secret(kit, ctx, words(ctx)('keys.created_once', { id: issued.key.id }), issued.secret);
});

const rotateAction = change(async (ctx, kit) => {
  const { db, clock, config } = kit.services;
  const words = kit.words;
  const key = await scopedKey(ctx, kit);
  const hours = Number(kit.state(ctx).form.grace_hours);
  if (!GRACE_HOURS.includes(hours))
    throw errors.invalidParameter(
      'grace_hours',
      words(ctx)('keys.grace_bad', { choices: GRACE_HOURS.join(', ') }),
    );
  const rotated = await db.transaction((trx) =>
    rotateApiKey(trx, {
      brand: config.brand,
      keyId: key.id,
      graceSeconds: hours * 3600,
      actor: actor(kit, ctx),
      now: clock.now(),
      defaultLimits: config.rateLimits,
    }),
  );
  kit.services.authenticator.forgetKey(key.id);
  const until = atMinute(rotated.previous.expires_at);
  return secret(
    kit,
    ctx,
    words(ctx)('keys.rotated_once', { id: rotated.key.id, previous: key.id, until }),
    rotated.secret,
  );
});

const revokeAction = change(async (ctx, kit) => {
  const { db, clock } = kit.services;
  const key = await scopedKey(ctx, kit);
  if (kit.state(ctx).form.confirm !== 'yes')
    throw errors.missingParameter('confirm', kit.words(ctx)('error.confirm'));
  await db.transaction((trx) =>
    revokeApiKey(trx, { keyId: key.id, actor: actor(kit, ctx), now: clock.now() }),
  );
  kit.services.authenticator.forgetKey(key.id);
  return noticeHtml(kit.words(ctx)('keys.revoked', { id: key.id }));
});

const limitsAction = change(async (ctx, kit) => {
  const { db, clock, config } = kit.services;
  const words = kit.words;
  const key = await scopedKey(ctx, kit);
  const rateLimits = limitOfForm(ctx, kit);
  const { user, scope } = kit.state(ctx);
  const updated = await db.transaction(async (trx) => {
    // An admin works within the operator's ceilings; the operator sets them and is not bound.
    const above = may(user, 'govern')
      ? null
      : aboveCeiling(rateLimits, await organisationCeilings(trx, scope.orgId, config.rateLimits));
    if (above)
      throw errors.invalidParameter(
        'per_minute',
        words(ctx)('keys.above_ceiling', {
          group: above.group,
          per_minute: String(above.ceiling.perMinute),
          burst: String(above.ceiling.burst),
        }),
      );
    return setKeyRateLimits(trx, {
      keyId: key.id,
      rateLimits,
      actor: actor(kit, ctx),
      now: clock.now(),
    });
  });
  kit.services.authenticator.forgetKey(key.id);
  const limits = Object.entries(updated.rate_limits ?? {})
    .map(([name, limit]) => `${name}=${limit.perMinute}:${limit.burst}`)
    .join(', ');
  return noticeHtml(words(ctx)('keys.limits_changed', { id: key.id, limits }));
});

const ceilingsAction = change(async (ctx, kit) => {
  const { db, clock } = kit.services;
  const { scope } = kit.state(ctx);
  const ceiling = limitOfForm(ctx, kit);
  const updated = await db.transaction((trx) =>
    setOrganisationCeilings(trx, {
      orgId: scope.orgId,
      ceilings: ceiling,
      reset: false,
      actor: actor(kit, ctx),
      now: clock.now(),
    }),
  );
  const limits = Object.entries(updated.rate_limit_ceilings ?? {})
    .map(([name, limit]) => `${name}=${limit.perMinute}:${limit.burst}`)
    .join(', ');
  return noticeHtml(kit.words(ctx)('keys.ceilings_changed', { limits }));
});

/** One group's limit from a form's group, per_minute and burst, read as `svc keys limits` reads them. */
function limitOfForm(ctx: Context, kit: ConsoleKit): RateLimitOverrides {
  const { form } = kit.state(ctx);
  const burst = form.burst ? `:${form.burst}` : '';
  try {
    // A burst left out scales with the group's default.
    return parseRateLimitOverrides(
      [`${form.group ?? ''}=${form.per_minute ?? ''}${burst}`],
      kit.services.config.rateLimits,
    );
  } catch (error) {
    throw errors.invalidParameter('per_minute', (error as Error).message);
  }
}

/** Keys and ceilings: reading is everyone's, changing keys `manage`, ceilings the operator's (`govern`). */
export const keyRoutes: ConsoleRoute[] = [
  { method: 'get', path: '/keys', needs: 'read', handle: showKeys },
  { method: 'post', path: '/keys', needs: 'manage', handle: issueAction },
  { method: 'get', path: '/keys/:key', needs: 'read', find: scopedKey, handle: showKey },
  { method: 'post', path: '/keys/:key/rotate', needs: 'manage', find: scopedKey, handle: rotateAction },
  { method: 'post', path: '/keys/:key/revoke', needs: 'manage', find: scopedKey, handle: revokeAction },
  { method: 'post', path: '/keys/:key/limits', needs: 'manage', find: scopedKey, handle: limitsAction },
  { method: 'post', path: '/ceilings', needs: 'govern', handle: ceilingsAction },
];

/** A group's select and its rate and burst inputs; `id` keeps two such forms' labels apart. */
function limitFields(t: ReturnType<ConsoleKit['words']>, id: string): Html {
  return html`<label for="${id}-group">${t('keys.limits_group')}</label>
<select id="${id}-group" name="group">${RATE_GROUPS.map((group) => html`<option>${group}</option>`)}</select>
<label for="${id}-per-minute">${t('keys.limits_per_minute')}</label>
<input id="${id}-per-minute" name="per_minute" type="number" min="1" max="1000000000" required>
<label for="${id}-burst">${t('keys.limits_burst')}</label>
<input id="${id}-burst" name="burst" type="number" min="1" max="1000000000">`;
}
