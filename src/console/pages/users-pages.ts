import type { Context } from 'koa';
import { toIso } from '../../clock/clock.js';
import { ApiError, errors } from '../../errors/api-error.js';
import { isId } from '../../ids/ids.js';
import { getOrganisation, pageOrganisations } from '../../orgs/orgs.js';
import { html, type Html, type HtmlValue } from '../../html/html.js';
import type { ConsoleKit, ConsoleRoute } from '../kit.js';
import { shownName } from '../format.js';
import { consoleLink } from '../links.js';
import { type ConsoleMessageKey } from '../messages.js';
import { layout } from '../layout.js';
import {
  CONSOLE_ROLES,
  disableConsoleUser,
  findConsoleUser,
  INVITATION_TTL_MS,
  inviteConsoleUser,
  isConsoleEmail,
  pageConsoleUsers,
  resetConsoleUser,
  RESET_TTL_MS,
  type ConsoleRole,
  type ConsoleUserRow,
} from '../users.js';
import {
  atMinute,
  csrfField,
  factsHtml,
  noticeHtml,
  pager,
  pagerWords,
  pageWindow,
  problemHtml,
  secretOnce,
  SELECTED,
  table,
} from '../views.js';

/*
 * Console users, for operators only (everyone else gets 404, as for a page that does not exist for them):
 * the list, an invitation (its link shown once, as `svc console users create` prints it), and a user's page
 * to reset (a new link, shown once) or disable them after a confirmation. Every change goes through
 * users.ts, as the CLI's do, and is audited with the operator as `console:cu_…`.
 */

/** What the invite form was sent with, kept on the page when it is refused. */
interface InviteForm {
  email: string;
  role: string;
  org: string;
}

const EMPTY_FORM: InviteForm = { email: '', role: 'admin', org: '' };

/**
 * The invite form offers the organisations as a menu, oldest first, up to this many; an appliance with more
 * (none we know of has more than a few dozen) gets the typed `org_…` field instead, as a menu that long is
 * no help.
 */
const ORG_CHOICES = 500;

/** A refusal of the form, worded for the person: nothing was written. */
class FormProblem extends Error {
  constructor(
    readonly status: number,
    readonly key: ConsoleMessageKey,
  ) {
    super(key);
  }
}

/** The invite form's fields, trimmed, from the POST's form. */
function inviteFields(form: Record<string, string>): InviteForm {
  return {
    email: (form.email ?? '').trim().slice(0, 1000),
    role: form.role ?? '',
    org: (form.org ?? '').trim().slice(0, 100),
  };
}

/** Checks an invitation's fields before anything is written; the organisation is checked to exist. */
export function inviteProblem(form: InviteForm): ConsoleMessageKey | null {
  if (form.email.trim() === '' || !isConsoleEmail(form.email)) return 'users.bad_email';
  if (!CONSOLE_ROLES.includes(form.role as ConsoleRole)) return 'users.bad_role';
  if (form.role === 'operator' && form.org !== '') return 'users.operator_org';
  if (form.role === 'admin' && form.org === '') return 'users.admin_org';
  if (form.org !== '' && !isId('org', form.org)) return 'users.no_org';
  return null;
}

const actor = (ctx: Context, kit: ConsoleKit) => `console:${kit.state(ctx).user.id}`;

/** Only an operator manages console users; to anyone else these pages do not exist. */
const operatorsOnly: ConsoleRoute['find'] = async (ctx, kit) => {
  if (kit.state(ctx).user.role !== 'operator')
    throw errors.notFound('Console users are managed by operators alone.');
};

const roleWord = (ctx: Context, kit: ConsoleKit, role: ConsoleRole) => kit.words(ctx)(`role.${role}`);

const orgWord = (ctx: Context, kit: ConsoleKit, user: { org_id: string | null; org_name?: string | null }) =>
  user.org_id === null
    ? kit.words(ctx)('users.all_orgs')
    : user.org_name
      ? shownName(kit.state(ctx).locale, user.org_name)
      : user.org_id;

async function renderList(
  ctx: Context,
  kit: ConsoleKit,
  status: number,
  notice: HtmlValue,
  form: InviteForm,
): Promise<void> {
  const { db } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const window = pageWindow(ctx.query);
  const [{ rows, total }, orgs] = await Promise.all([
    pageConsoleUsers(db.reader, window),
    pageOrganisations(db.reader, { offset: 0, limit: ORG_CHOICES }),
  ]);
  const cells = rows.map((user) => [
    html`<a href="/console/users/${user.id}">${user.email}</a>`,
    roleWord(ctx, kit, user.role),
    orgWord(ctx, kit, user),
    t(`users.status.${user.status}`),
    user.totp_secret_sealed !== null ? t('users.yes') : t('users.no'),
    atMinute(toIso(user.last_login_at)) || t('keys.never'),
  ]);
  const option = (role: ConsoleRole) =>
    html`<option value="${role}"${form.role === role && SELECTED}>${roleWord(ctx, kit, role)}</option>`;
  const invite = html`<form method="post" action="/console/users" class="console-form">
${csrfField(state.claims.csrf)}
<fieldset><legend>${t('users.invite')}</legend>
<label for="invite-email">${t('signin.email')}</label>
<input id="invite-email" name="email" type="email" required maxlength="254" autocomplete="off" value="${form.email}">
<label for="invite-role">${t('users.role')}</label>
<select id="invite-role" name="role">${CONSOLE_ROLES.map(option)}</select>
<label for="invite-org">${t('users.org_label')}</label>
${
  orgs.total <= ORG_CHOICES
    ? html`<select id="invite-org" name="org" aria-describedby="invite-org-hint"><option value="">${t('users.org_none')}</option>${orgs.data.map((org) => html`<option value="${org.id}"${form.org === org.id && SELECTED}>${shownName(state.locale, org.name)}</option>`)}</select>`
    : html`<input id="invite-org" name="org" maxlength="24" autocomplete="off" aria-describedby="invite-org-hint" placeholder="org_…" value="${form.org}">`
}
<p id="invite-org-hint" class="hint">${t('users.org_hint')}</p>
<button type="submit" class="primary">${t('users.invite_submit')}</button>
</fieldset>
</form>`;
  kit.send(
    ctx,
    status,
    layout(
      kit.pageContext(ctx),
      t('users.title'),
      html`${notice}${table(
        t('users.caption'),
        [
          t('signin.email'),
          t('users.role'),
          t('users.org'),
          t('keys.status'),
          t('users.totp'),
          t('users.last_sign_in'),
        ],
        cells,
        t('users.empty'),
      )}${pager('/console/users', ctx.query, window.page, total, pagerWords(state.locale))}${invite}`,
    ),
  );
}

/** The user of the URL, or 404 (an id that is not a console user's is a page that does not exist). */
async function userOfUrl(
  ctx: Context,
  kit: ConsoleKit,
): Promise<ConsoleUserRow & { org_name: string | null }> {
  const { db } = kit.services;
  const id = (ctx.params as { user: string }).user;
  if (!isId('cu', id)) throw new FormProblem(404, 'error.not_found');
  const user = await findConsoleUser(db.reader, id).catch(() => null);
  if (!user || user.id !== id) throw new FormProblem(404, 'error.not_found');
  const org = user.org_id ? await getOrganisation(db.reader, user.org_id).catch(() => null) : null;
  return { ...user, org_name: org?.name ?? null };
}

async function renderUser(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue): Promise<void> {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const user = await userOfUrl(ctx, kit);
  const csrf = state.claims.csrf;
  const facts: [string, string][] = [
    [t('signin.email'), user.email],
    [t('users.role'), roleWord(ctx, kit, user.role)],
    [t('users.org'), orgWord(ctx, kit, user)],
    [t('keys.status'), t(`users.status.${user.status}`)],
    [t('users.totp'), user.totp_secret_sealed !== null ? t('users.yes') : t('users.no')],
    [t('users.last_sign_in'), atMinute(toIso(user.last_login_at)) || t('keys.never')],
    [t('keys.created'), atMinute(toIso(user.created_at))],
  ];
  const self = user.id === state.user.id;
  const forms =
    user.status === 'disabled' || self
      ? ''
      : html`<form method="post" action="/console/users/${user.id}/reset" class="console-form">${csrfField(csrf)}
<fieldset><legend>${t('users.reset')}</legend>
<p>${t('users.reset_explained')}</p>
${user.totp_secret_sealed !== null ? html`<label class="check"><input type="checkbox" name="remove_totp" value="yes"> ${t('users.reset_remove_totp')}</label>` : ''}
<label class="check"><input type="checkbox" name="confirm" value="yes" required> ${t('users.reset_confirm')}</label>
<button type="submit">${t('users.reset')}</button></fieldset></form>
<form method="post" action="/console/users/${user.id}/disable" class="console-form">${csrfField(csrf)}
<fieldset class="danger"><legend>${t('users.disable')}</legend>
<label class="check"><input type="checkbox" name="confirm" value="yes" required> ${t('users.disable_confirm')}</label>
<button type="submit" class="danger">${t('users.disable')}</button></fieldset></form>`;
  kit.send(
    ctx,
    status,
    layout(
      kit.pageContext(ctx),
      user.email,
      html`<p><a href="/console/users">${t('users.back')}</a></p>
${notice}
${factsHtml(facts)}
${self ? html`<p>${t('users.self')}</p>` : ''}
${forms}`,
    ),
  );
}

/** A link shown once, with its copy button, and when it stops working. */
function linkOnce(ctx: Context, kit: ConsoleKit, label: string, token: string) {
  const t = kit.words(ctx);
  return secretOnce(
    label,
    consoleLink(kit.services.config, 'accept', token),
    t('users.once_warning'),
    t('keys.copy'),
  );
}

/** Runs a change; a refusal of the request is shown on the page with its status, nothing written. */
const guarded =
  (
    work: (ctx: Context, kit: ConsoleKit) => Promise<void>,
    onProblem: (ctx: Context, kit: ConsoleKit, problem: string, status: number) => Promise<void>,
  ): ConsoleRoute['handle'] =>
  async (ctx, kit) => {
    try {
      await work(ctx, kit);
    } catch (error) {
      if (error instanceof FormProblem && error.status === 404) return kit.refuse(ctx, 404, error.key);
      if (error instanceof FormProblem) return onProblem(ctx, kit, kit.words(ctx)(error.key), error.status);
      if (error instanceof ApiError && error.status < 500)
        return onProblem(ctx, kit, error.message, error.status === 404 ? 400 : error.status);
      throw error;
    }
  };

const showUsers: ConsoleRoute['handle'] = (ctx, kit) => renderList(ctx, kit, 200, null, EMPTY_FORM);

const inviteAction = guarded(
  async (ctx, kit) => {
    const { db, clock } = kit.services;
    const fields = inviteFields(kit.state(ctx).form);
    const problem = inviteProblem(fields);
    if (problem) throw new FormProblem(400, problem);
    if (fields.org !== '' && !(await getOrganisation(db.reader, fields.org).catch(() => null)))
      throw new FormProblem(400, 'users.no_org');
    const now = clock.now();
    const invited = await db
      .transaction((trx) =>
        inviteConsoleUser(trx, {
          email: fields.email,
          role: fields.role as ConsoleRole,
          orgId: fields.org === '' ? null : fields.org,
          actor: actor(ctx, kit),
          now,
        }),
      )
      .catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 409) throw new FormProblem(409, 'users.exists');
        throw error;
      });
    const label = kit.words(ctx)('users.invited_once', {
      email: invited.user.email,
      role: roleWord(ctx, kit, invited.user.role),
      until: atMinute(toIso(now + INVITATION_TTL_MS)),
    });
    await renderList(ctx, kit, 200, linkOnce(ctx, kit, label, invited.token), EMPTY_FORM);
  },
  // The form comes back as it was sent (cut to the fields' widths), with what to fix above it.
  (ctx, kit, message, status) => {
    const fields = inviteFields(kit.state(ctx).form);
    return renderList(ctx, kit, status, problemHtml(message), {
      ...fields,
      email: fields.email.slice(0, 254),
      org: fields.org.slice(0, 24),
    });
  },
);

const userAgain = (ctx: Context, kit: ConsoleKit, message: string, status: number) =>
  renderUser(ctx, kit, status, problemHtml(message));

const showUser = guarded((ctx, kit) => renderUser(ctx, kit, 200, null), userAgain);

/** A change to one user: confirmed, never to oneself (an operator must not lock themself out). */
const change = (work: (ctx: Context, kit: ConsoleKit, user: ConsoleUserRow) => Promise<Html>) =>
  guarded(async (ctx, kit) => {
    const user = await userOfUrl(ctx, kit);
    if (user.id === kit.state(ctx).user.id) throw new FormProblem(400, 'users.self');
    if (kit.state(ctx).form.confirm !== 'yes') throw new FormProblem(400, 'error.confirm');
    await renderUser(ctx, kit, 200, await work(ctx, kit, user));
  }, userAgain);

const resetAction = change(async (ctx, kit, user) => {
  const { db, clock } = kit.services;
  const now = clock.now();
  const reset = await db.transaction((trx) =>
    resetConsoleUser(trx, user.id, {
      actor: actor(ctx, kit),
      now,
      removeTotp: kit.state(ctx).form.remove_totp === 'yes',
    }),
  );
  const until = atMinute(toIso(now + (reset.purpose === 'invite' ? INVITATION_TTL_MS : RESET_TTL_MS)));
  return linkOnce(
    ctx,
    kit,
    kit.words(ctx)(reset.purpose === 'invite' ? 'users.reinvited_once' : 'users.reset_once', {
      email: user.email,
      until,
    }),
    reset.token,
  );
});

const disableAction = change(async (ctx, kit, user) => {
  const { db, clock } = kit.services;
  await db.transaction((trx) => disableConsoleUser(trx, user.id, actor(ctx, kit), clock.now()));
  return noticeHtml(kit.words(ctx)('users.disabled_done', { email: user.email }));
});

/** Console users, under /console: an operator's pages alone (`operatorsOnly`, 404 to anyone else). */
export const userRoutes: ConsoleRoute[] = [
  { method: 'get', under: 'console', path: '/users', needs: 'read', find: operatorsOnly, handle: showUsers },
  {
    method: 'post',
    under: 'console',
    path: '/users',
    needs: 'read',
    find: operatorsOnly,
    handle: inviteAction,
  },
  {
    method: 'get',
    under: 'console',
    path: '/users/:user',
    needs: 'read',
    find: operatorsOnly,
    handle: showUser,
  },
  {
    method: 'post',
    under: 'console',
    path: '/users/:user/reset',
    needs: 'read',
    find: operatorsOnly,
    handle: resetAction,
  },
  {
    method: 'post',
    under: 'console',
    path: '/users/:user/disable',
    needs: 'read',
    find: operatorsOnly,
    handle: disableAction,
  },
];
