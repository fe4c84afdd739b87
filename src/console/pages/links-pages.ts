import type { Context } from 'koa';
import { toIso } from '../../clock/clock.js';
import { ApiError, errors } from '../../errors/api-error.js';
import {
  consentNeedsUser,
  consentsOfLinks,
  consentView,
  presentConsent,
  type LinkConsent,
} from '../../links/consent/consent-life.js';
import {
  inspectDeletedLink,
  inspectLink,
  type DeletedLinkInspection,
  type Finding,
} from '../../inspect/inspect.js';
import { deleteLink, pauseLink, resumeLink } from '../../links/links.js';
import { rutSearchDigests } from '../../links/rut-search.js';
import { findLink, searchLinks, type LinkStatus } from '../../links/store.js';
import { recentMovementsOfAccounts } from '../../movements/store.js';
import { requestRefresh } from '../../refresh/refresh.js';
import { html, type Html, type HtmlValue } from '../../html/html.js';
import { consolePrincipal, may, scopePath } from '../access.js';
import type { ConsoleKit, ConsoleRoute } from '../kit.js';
import { bankName, money, productKind } from '../format.js';
import { codeWord, stateWord, type ConsoleMessageKey, type Words } from '../messages.js';
import { layout } from '../layout.js';
import { sendListPage } from '../list-page.js';
import {
  cellText,
  csrfField,
  DANGER,
  factsHtml,
  filterSelect,
  noticeHtml,
  pageWindow,
  problemHtml,
  table,
  when,
} from '../views.js';

/*
 * Links, for support's question "why is this link stale?": find a link by id, RUT, external_user_id or the
 * start of the holder's name; read what `svc links inspect` says (the diagnosis first, then accounts, syncs,
 * refreshes, events and deliveries); pause, resume and refresh it (support may), delete it (operators and
 * admins, after a confirmation). Each action is in the audit log with the console user.
 */

const STATUSES: LinkStatus[] = ['active', 'expired'];
/** Movements shown on a link's page: enough to see whether money is arriving, not a statement. */
const RECENT_MOVEMENTS = 10;

/** A finding of `inspect` for support: in their language, pointing at this page's buttons, not the CLI. */
export function findingText(t: Words, finding: Finding): string {
  switch (finding.code) {
    case 'expired':
      if (finding.error === 'consent_revoked')
        return t('finding.expired_consent_revoked', { at: when(finding.at) });
      return t('finding.expired', {
        at: when(finding.at),
        failures: String(finding.failures),
        error: finding.error ?? '-',
      });
    case 'paused':
      return t('finding.paused', { since: when(finding.since) });
    case 'sync_failed':
      return finding.credentialFailures > 0
        ? t('finding.sync_failed_credentials', {
            error: finding.error,
            failures: String(finding.credentialFailures),
          })
        : t('finding.sync_failed_bank', { error: finding.error });
    case 'scheduler_late':
      return t('finding.scheduler_late', { at: when(finding.nextSyncAt) });
    case 'sync_deferred':
      return t('finding.sync_deferred', { at: when(finding.until) });
    case 'waiting_for_budget':
      return t('finding.waiting_for_budget', { at: when(finding.until) });
    case 'consent_expired':
      return t('finding.consent_expired', { at: when(finding.at) });
    case 'consent_expiring':
      return t('finding.consent_expiring', { at: when(finding.expiresAt) });
    case 'grant_revocation':
      return finding.status === 'failed'
        ? t('finding.grant_revocation_failed', { attempts: String(finding.attempts) })
        : t('finding.grant_revocation_pending', { at: when(finding.nextAttemptAt) });
    case 'healthy':
      return t('finding.healthy', { last: when(finding.lastSyncedAt), next: when(finding.nextSyncAt) });
    default:
      return t(`finding.${finding.code}`);
  }
}

/**
 * The bank's own words behind a finding (the failed job's reason, or a revocation's last error: the bank's
 * status, code and description, masked when they were kept), under the finding, so support reads what the
 * bank said rather than only our code.
 */
function bankSaid(t: Words, finding: Finding): Html | '' {
  const said =
    finding.code === 'sync_failed' || finding.code === 'expired'
      ? finding.reason
      : finding.code === 'grant_revocation'
        ? finding.lastError
        : null;
  return said ? html`<br /><small class="bank-said">${t('finding.bank_said')} ${said}</small>` : '';
}

/**
 * A consent link's consent as a badge: marked (`badge attention`) when the end user must act (it is expiring,
 * expired or revoked), so support sees at a glance which links wait for a person rather than for a bank.
 */
export function consentBadge(t: Words, consent: LinkConsent): Html {
  const word = t(`consent.${consent.status}`);
  return consentNeedsUser(consent.status)
    ? html`<span class="badge attention">${word}</span>`
    : html`<span class="badge">${word}</span>`;
}

/** The consent's facts on a link's page: its badge, when it ends, what it covers. */
function consentFacts(t: Words, consent: LinkConsent): HtmlValue {
  const until = consent.expires_at
    ? t('consent.until', { at: when(consent.expires_at) })
    : t('consent.until_revoked');
  const covers = consent.covers.map((coverage) => t(`coverage.${coverage}`)).join(', ');
  return html`${consentBadge(t, consent)} ${until}; ${t('consent.covers', { covers: covers || '-' })}`;
}

export async function showLinks(ctx: Context, kit: ConsoleKit) {
  const { db, secrets } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const base = `${scopePath(state.scope)}/links`;
  const query = typeof ctx.query.q === 'string' ? ctx.query.q : '';
  const status = STATUSES.find((value) => value === ctx.query.status);
  const window = pageWindow(ctx.query);
  const rutDigests = rutSearchDigests(secrets, query);
  const { rows, total } = await searchLinks(db.reader, state.scope, { query, status, rutDigests }, window);
  // One read for the page's consents; only those that need the end user get a badge here.
  const view = consentView(kit.services, kit.services.clock.now());
  const consents = await consentsOfLinks(
    db.reader,
    rows.map((row) => row.id),
  );
  const badgeOf = (row: (typeof rows)[number]): HtmlValue => {
    const facts = consents.get(row.id);
    const consent = facts ? presentConsent(facts, view, row) : null;
    return consent && consentNeedsUser(consent.status) ? html` ${consentBadge(t, consent)}` : null;
  };
  const cells = rows.map((row) => [
    html`<a href="${base}/${row.id}"><code>${row.id}</code></a>`,
    bankName(row.bank_id),
    row.holder_name ?? '-',
    row.external_user_id ?? '-',
    // One element: on a phone the cell is a flex row, where a bare word and its badge would be two items
    // squeezing each other ("activ/a", the badge past the card's edge); in one span the badge wraps below.
    html`<span>${stateWord(state.locale, row.status) + (row.paused ? `, ${t('links.paused')}` : '')}${badgeOf(row)}</span>`,
    when(toIso(row.last_synced_at)),
  ]);
  const search = html`<form method="get" action="${base}" class="search-form" role="search">
<label for="q">${t('links.search')}</label>
<input id="q" name="q" type="search" value="${query}" maxlength="200">
<span class="search-field"><label for="status">${t('links.status_label')}</label>
${filterSelect(
  { id: 'status', name: 'status', any: t('links.status_any') },
  STATUSES.map((value) => [value, stateWord(state.locale, value)]),
  status,
)}</span>
<button type="submit">${t('links.search_submit')}</button>
</form>`;
  sendListPage(ctx, kit, {
    section: '/links',
    title: t('links.title'),
    above: search,
    caption: t('links.caption'),
    headers: [
      'ID',
      t('links.bank'),
      t('links.holder'),
      t('links.external_user'),
      t('links.status_label'),
      t('links.last_synced'),
    ],
    rows: cells,
    empty: t('links.empty'),
    base,
    page: window.page,
    total,
  });
}

/** The link of the URL when it is this scope's, else 404 (another organisation's or mode's does not exist). */
async function scopedLink(ctx: Context, kit: ConsoleKit) {
  const { scope } = kit.state(ctx);
  const id = (ctx.params as { link: string }).link;
  const row = await findLink(kit.services.db.reader, id);
  if (!row || row.org_id !== scope.orgId || row.mode !== scope.mode)
    throw errors.notFound(`No link ${id}.`, 'link');
  return row;
}

async function renderLink(ctx: Context, kit: ConsoleKit, status: number, notice: HtmlValue) {
  const { db, clock } = kit.services;
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const row = await scopedLink(ctx, kit);
  const inspection = await inspectLink(db.reader, row.id, consentView(kit.services, clock.now()));
  const movements = await recentMovementsOfAccounts(
    db.reader,
    inspection.accounts.map((account) => account.id),
    RECENT_MOVEMENTS,
  );
  const link = inspection.link;
  const base = `${scopePath(state.scope)}/links/${row.id}`;
  const csrf = state.claims.csrf;
  const button = (action: string, label: ConsoleMessageKey, extra: HtmlValue = null, danger = false) =>
    html`<form method="post" action="${base}/${action}" class="inline-form">${csrfField(csrf)}${extra}<button type="submit"${danger && DANGER}>${t(label)}</button></form>`;
  const actions = [
    may(state.user, 'operate')
      ? button(link.paused ? 'resume' : 'pause', link.paused ? 'link.resume' : 'link.pause')
      : '',
    may(state.user, 'operate') && link.status === 'active' ? button('refresh', 'link.refresh') : '',
    may(state.user, 'manage')
      ? button(
          'delete',
          'link.delete',
          html`<label class="check"><input type="checkbox" name="confirm" value="yes" required> ${t('link.delete_confirm')}</label>`,
          true,
        )
      : '',
  ];
  const facts: [string, HtmlValue][] = [
    [t('links.bank'), bankName(link.bank_id)],
    [t('links.holder'), link.holder_name ?? '-'],
    [t('links.external_user'), link.external_user_id ?? '-'],
    [
      t('links.status_label'),
      stateWord(state.locale, link.status) + (link.paused ? `, ${t('links.paused')}` : ''),
    ],
    [t('links.last_synced'), when(link.last_synced_at)],
    ...(link.consent ? [[t('links.consent'), consentFacts(t, link.consent)] as [string, HtmlValue]] : []),
  ];
  const section = (title: ConsoleMessageKey, headers: string[], rows: HtmlValue[][]) =>
    html`<h2>${t(title)}</h2>${table(t(title), headers, rows, t('link.none'))}`;
  const stateOf = (value: string) => stateWord(state.locale, value);
  kit.send(
    ctx,
    status,
    layout(
      kit.pageContext(ctx, '/links'),
      row.id,
      html`<p><a href="${scopePath(state.scope)}/links">${t('link.back')}</a></p>
${notice}
<h2>${t('link.diagnosis')}</h2>
<ul class="diagnosis">${inspection.findings.map((finding) => html`<li>${findingText(t, finding)}${bankSaid(t, finding)}</li>`)}</ul>
${factsHtml(facts)}
<div class="actions">${actions}</div>
${section(
  'link.accounts',
  [
    'ID',
    t('col.name'),
    t('col.type'),
    t('col.currency'),
    t('col.last_4'),
    t('col.movements'),
    t('col.pending'),
    t('col.refreshed'),
  ],
  inspection.accounts.map((a) =>
    [
      a.id,
      a.name,
      productKind(a.name, codeWord(state.locale, 'account_type', a.type)),
      a.currency,
      a.last_4,
      a.movements,
      a.pending,
      when(a.refreshed_at),
    ]
      .map(cellText)
      // The bank's words (a product's name, a movement's text) are data: not the console's to translate.
      .map((cell, column): HtmlValue => (column === 1 ? html`<span translate="no">${cell}</span>` : cell)),
  ),
)}
${section(
  'link.movements',
  [t('col.posted'), t('col.account'), t('col.description'), t('col.amount')],
  movements.map((m) =>
    [when(toIso(m.posted_at)), m.account_id, m.description, money(m.amount, m.currency, state.locale)]
      .map(cellText)
      .map((cell, column): HtmlValue => (column === 2 ? html`<span translate="no">${cell}</span>` : cell)),
  ),
)}
${section(
  'link.intents',
  ['ID', t('col.type'), t('col.status'), t('col.error'), t('col.created'), t('col.completed')],
  inspection.refresh_intents.map((i) =>
    [
      i.id,
      codeWord(state.locale, 'refresh_type', i.refresh_type),
      stateOf(i.status),
      i.error_code,
      when(i.created_at),
      when(i.completed_at),
    ].map(cellText),
  ),
)}
${section(
  'link.jobs',
  ['ID', t('col.status'), t('col.type'), t('col.attempts'), t('col.run_at'), t('col.last_error')],
  inspection.jobs.map((j) =>
    [
      j.id,
      stateOf(j.status),
      codeWord(state.locale, 'refresh_type', j.refresh_type),
      j.attempts,
      when(j.run_at),
      j.last_error,
    ].map(cellText),
  ),
)}
${section(
  'link.events',
  ['ID', t('col.type'), t('col.created')],
  inspection.events.map((e) => [e.id, e.type, when(e.created_at)].map(cellText)),
)}
${section(
  'link.deliveries',
  [
    'ID',
    t('col.event'),
    t('col.endpoint'),
    t('col.status'),
    t('col.attempts'),
    t('col.last_answer'),
    t('col.last_error'),
  ],
  inspection.deliveries.map((d) =>
    [
      d.id,
      d.event_type,
      d.endpoint_id,
      stateOf(d.status),
      d.attempts,
      d.last_response_status,
      d.last_error,
    ].map(cellText),
  ),
)}`,
    ),
  );
}

export const showLink = async (ctx: Context, kit: ConsoleKit) => {
  const found = await scopedLinkOrDeleted(ctx, kit);
  if ('deleted' in found) return renderDeletedLink(ctx, kit, found);
  return renderLink(ctx, kit, 200, null);
};

/**
 * The link of the URL, or what this scope's deleted link left (issue 44, item 9): support can still see
 * what it was, who deleted it and whether its consent was revoked at the bank, as `svc links inspect` shows.
 */
async function scopedLinkOrDeleted(ctx: Context, kit: ConsoleKit) {
  const { scope } = kit.state(ctx);
  const id = (ctx.params as { link: string }).link;
  const row = await findLink(kit.services.db.reader, id);
  if (row && row.org_id === scope.orgId && row.mode === scope.mode) return row;
  const deleted = row ? null : await inspectDeletedLink(kit.services.db.reader, id);
  if (!deleted || deleted.org_id !== scope.orgId || deleted.mode !== scope.mode)
    throw errors.notFound(`No link ${id}.`, 'link');
  return deleted;
}

/** A deleted link's page: its last state and its consent's revocation, in the reader's language. */
function renderDeletedLink(ctx: Context, kit: ConsoleKit, deleted: DeletedLinkInspection) {
  const state = kit.state(ctx);
  const t = kit.words(ctx);
  const last = deleted.last_state;
  const revocation = deleted.grant_revocation;
  const facts: [string, HtmlValue][] = [
    [t('links.bank'), bankName(deleted.bank_id)],
    [t('link.deleted_at'), when(deleted.deleted_at)],
    [t('link.deleted_by'), deleted.deleted_by ?? '-'],
    ...(last
      ? ([
          [
            t('link.last_state'),
            stateWord(state.locale, last.status) + (last.paused ? `, ${t('links.paused')}` : ''),
          ],
          [t('links.external_user'), last.external_user_id ?? '-'],
          [t('link.accounts'), String(last.accounts_count)],
          [t('links.last_synced'), when(last.last_synced_at)],
          [t('link.last_error'), last.last_error_code ?? '-'],
        ] as [string, HtmlValue][])
      : []),
  ];
  const revocationText = !revocation
    ? t('link.revocation_none')
    : revocation.status === 'revoked'
      ? t('link.revocation_revoked', { at: when(revocation.revoked_at) })
      : revocation.status === 'failed'
        ? t('link.revocation_failed', { attempts: String(revocation.attempts) })
        : t('link.revocation_pending', {
            attempt: String(revocation.attempts + 1),
            max: String(revocation.max_attempts),
            at: when(revocation.next_attempt_at),
          });
  kit.send(
    ctx,
    200,
    layout(
      kit.pageContext(ctx, '/links'),
      deleted.id,
      html`<p><a href="${scopePath(state.scope)}/links">${t('link.back')}</a></p>
${noticeHtml(t('link.deleted_notice'))}
${factsHtml(facts)}
<h2>${t('link.revocation')}</h2>
<p class="revocation ${revocation?.status ?? 'none'}">${revocationText}</p>
${revocation?.last_error ? html`<p>${t('link.revocation_last_error', { error: revocation.last_error })}</p>` : ''}`,
    ),
  );
}

/** An action on a link (the router checked the right): shown on the link's page, or its problem there. */
const act =
  (
    work: (
      ctx: Context,
      kit: ConsoleKit,
      linkId: string,
      now: number,
    ) => Promise<{ notice: string; gone?: boolean }>,
  ) =>
  async (ctx: Context, kit: ConsoleKit) => {
    const state = kit.state(ctx);
    const t = kit.words(ctx);
    const row = await scopedLink(ctx, kit);
    let outcome: { notice: string; gone?: boolean };
    try {
      outcome = await work(ctx, kit, row.id, kit.services.clock.now());
    } catch (error) {
      if (error instanceof ApiError && error.status < 500 && error.status !== 404)
        return renderLink(ctx, kit, error.status, problemHtml(error.message));
      throw error;
    }
    const notice = noticeHtml(outcome.notice);
    if (!outcome.gone) return renderLink(ctx, kit, 200, notice);
    kit.send(
      ctx,
      200,
      layout(
        kit.pageContext(ctx, '/links'),
        t('links.title'),
        html`${notice}<p><a href="${scopePath(state.scope)}/links">${t('link.back')}</a></p>`,
      ),
    );
  };
const principal = (ctx: Context, kit: ConsoleKit) =>
  consolePrincipal(kit.state(ctx).scope, kit.state(ctx).user);

const pauseAction = act(async (ctx, kit, linkId, now) => {
  await kit.services.db.transaction((trx) =>
    pauseLink(trx, principal(ctx, kit), linkId, consentView(kit.services, now)),
  );
  return { notice: kit.words(ctx)('link.paused_done') };
});

const resumeAction = act(async (ctx, kit, linkId, now) => {
  await kit.services.db.transaction((trx) =>
    resumeLink(trx, principal(ctx, kit), linkId, consentView(kit.services, now)),
  );
  return { notice: kit.words(ctx)('link.resumed_done') };
});

const refreshAction = act(async (ctx, kit, linkId, now) => {
  const { db, config } = kit.services;
  const intent = await db.transaction((trx) =>
    requestRefresh(trx, principal(ctx, kit), { link_id: linkId, refresh_type: 'only_last' }, config, now),
  );
  return { notice: kit.words(ctx)('link.refresh_done', { id: intent.id }) };
});

const deleteAction = act(async (ctx, kit, linkId, now) => {
  if (kit.state(ctx).form.confirm !== 'yes')
    throw errors.missingParameter('confirm', kit.words(ctx)('error.confirm'));
  await kit.services.db.transaction((trx) => deleteLink(trx, principal(ctx, kit), linkId, now));
  return { notice: kit.words(ctx)('link.deleted_done', { id: linkId }), gone: true };
});

/** The links section: reading is everyone's, pause/resume/refresh support's too, deleting `manage`. */
export const linkRoutes: ConsoleRoute[] = [
  { method: 'get', path: '/links', needs: 'read', handle: showLinks },
  { method: 'get', path: '/links/:link', needs: 'read', find: scopedLinkOrDeleted, handle: showLink },
  { method: 'post', path: '/links/:link/pause', needs: 'operate', find: scopedLink, handle: pauseAction },
  { method: 'post', path: '/links/:link/resume', needs: 'operate', find: scopedLink, handle: resumeAction },
  { method: 'post', path: '/links/:link/refresh', needs: 'operate', find: scopedLink, handle: refreshAction },
  { method: 'post', path: '/links/:link/delete', needs: 'manage', find: scopedLink, handle: deleteAction },
];
