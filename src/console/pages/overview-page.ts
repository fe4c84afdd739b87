import { RATE_GROUPS } from '../../config/defaults.js';
import { bankHealth, type BankHealth } from '../../banks/health.js';
import { institutionsOf } from '../../banks/institutions.js';
import { failedSyncJobsSince } from '../../jobs/jobs.js';
import { keyFiguresOfScope } from '../../keys/keys.js';
import { linkFiguresOfScope } from '../../links/store.js';
import { failingDeliveryCounts } from '../../webhooks/deliveries.js';
import { html, join, type Html } from '../../html/html.js';
import { scopePath } from '../access.js';
import { bankIntervals } from '../../banks/budget/capacity.js';
import type { ConsoleRoute } from '../kit.js';
import { type ConsoleMessageKey } from '../messages.js';
import { layout } from '../layout.js';
import { table } from '../views.js';

/*
 * An organisation's overview in one mode: what a person checks first. Its links by state, the syncs and
 * webhook deliveries that are failing, the banks' health and the keys and limits in use. Every figure is a
 * count its owner's store answers from an index (links/store.ts, jobs.ts, webhooks/deliveries.ts, keys.ts,
 * banks/health.ts), never a list loaded to be counted here, and a figure links to the page that lists it
 * where there is one.
 */

/** "Recently", for failed syncs and deliveries: a day, the span an on-call person looks back over. */
export const RECENT_MS = 24 * 3_600_000;

/** One figure: its label, its number, and the page that lists what it counts (if any). */
export interface Figure {
  label: string;
  value: number;
  href?: string;
  /** Said after the number, e.g. "(2 paused)". */
  note?: string;
}

/** Figures as a definition list: the label, then the number (a link where a list exists). */
export function figuresHtml(figures: Figure[]): Html {
  const value = (figure: Figure) =>
    html`${figure.href ? html`<a href="${figure.href}">${figure.value}</a>` : html`<span>${figure.value}</span>`}${figure.note && ` ${figure.note}`}`;
  return html`<dl class="facts figures">${figures.map(
    (figure) => html`<dt>${figure.label}</dt><dd>${value(figure)}</dd>`,
  )}</dl>`;
}

/** How many institutions are in each health, and those that are not up (sorted by name). */
export function healthSummary(
  institutions: readonly { id: string; name: string }[],
  health: ReadonlyMap<string, BankHealth>,
): { counts: Record<BankHealth, number>; troubled: { name: string; health: BankHealth }[] } {
  const counts: Record<BankHealth, number> = { up: 0, degraded: 0, down: 0 };
  const troubled: { name: string; health: BankHealth }[] = [];
  for (const institution of institutions) {
    const state = health.get(institution.id) ?? 'up';
    counts[state] += 1;
    if (state !== 'up') troubled.push({ name: institution.name, health: state });
  }
  troubled.sort((a, b) => a.name.localeCompare(b.name));
  return { counts, troubled };
}

const showOverview: ConsoleRoute['handle'] = async (ctx, kit) => {
  const { services } = kit;
  const { db, clock, config } = services;
  const state = kit.state(ctx);
  const { scope } = state;
  const t = kit.words(ctx);
  const now = clock.now();
  const since = now - RECENT_MS;
  const [links, failedSyncs, deliveries, health, keys, intervals] = await Promise.all([
    linkFiguresOfScope(db.reader, scope),
    failedSyncJobsSince(db.reader, scope, since),
    failingDeliveryCounts(db.reader, scope, since),
    bankHealth(db.reader, scope.mode, now),
    keyFiguresOfScope(db.reader, scope, now),
    bankIntervals(db.reader, config),
  ]);
  const nameOf = new Map(institutionsOf(config).map((bank) => [bank.id, bank.name]));
  const consentIntervals = intervals.filter((row) => row.mode === scope.mode);
  const base = scopePath(scope);
  // Only the banks this appliance can reach in the mode, as /v1/institutions lists them.
  const reachable = institutionsOf(services.config).filter(
    (bank) => services.connectors(bank.id, scope.mode) !== null,
  );
  const banks = healthSummary(reachable, health);
  const section = (title: ConsoleMessageKey, body: Html) =>
    html`<section aria-labelledby="ov-${title.replace(/\W/g, '-')}"><h2 id="ov-${title.replace(/\W/g, '-')}">${t(title)}</h2>${body}</section>`;
  const cards = [
    section(
      'overview.links',
      figuresHtml([
        {
          label: t('overview.links_active'),
          value: links.active,
          href: `${base}/links?status=active`,
          note: links.paused > 0 ? t('overview.links_paused', { n: String(links.paused) }) : undefined,
        },
        { label: t('overview.links_expired'), value: links.expired, href: `${base}/links?status=expired` },
      ]),
    ),
    section(
      'overview.syncs',
      figuresHtml([
        { label: t('overview.syncs_failing_links'), value: links.failing },
        { label: t('overview.syncs_failed_recently'), value: failedSyncs },
      ]),
    ),
    section(
      'overview.deliveries',
      figuresHtml([
        { label: t('overview.deliveries_retrying'), value: deliveries.retrying },
        { label: t('overview.deliveries_failed_recently'), value: deliveries.failed },
      ]),
    ),
    section(
      'overview.banks',
      html`<p>${t('overview.banks_counts', {
        up: String(banks.counts.up),
        degraded: String(banks.counts.degraded),
        down: String(banks.counts.down),
      })}</p>${
        banks.troubled.length > 0 &&
        table(
          t('overview.banks_troubled'),
          [t('links.bank'), t('overview.banks_health')],
          banks.troubled.map((bank) => [bank.name, t(`overview.health.${bank.health}`)]),
          '',
        )
      }${
        consentIntervals.length > 0 &&
        table(
          t('overview.banks_intervals'),
          [t('links.bank'), t('overview.banks_interval')],
          consentIntervals.map((row) => [
            nameOf.get(row.bank) ?? row.bank,
            row.stretched
              ? t('overview.banks_interval_stretched', {
                  n: String(row.effective_interval_minutes),
                  configured: String(row.configured_interval_minutes),
                })
              : t('overview.banks_interval_minutes', { n: String(row.effective_interval_minutes) }),
          ]),
          '',
        )
      }`,
    ),
    section(
      'overview.quotas',
      html`${figuresHtml([
        { label: t('overview.keys_secret'), value: keys.secret, href: `${base}/keys` },
        { label: t('overview.keys_publishable'), value: keys.publishable, href: `${base}/keys` },
        { label: t('overview.keys_own_limits'), value: keys.ownLimits },
      ])}${table(
        t('overview.limits_caption'),
        [t('keys.limits_group'), t('keys.limits_per_minute'), t('keys.limits_burst')],
        RATE_GROUPS.map((group) => [
          html`<code>${group}</code>`,
          config.rateLimits[group].perMinute,
          config.rateLimits[group].burst,
        ]),
        '',
      )}`,
    ),
  ];
  const body = join(
    [
      html`<p>${t('overview.signed_in', { email: state.user.email, role: t(`role.${state.user.role}`) })}</p>`,
      // The sections as cards (console.css): side by side on a wide screen, one under the other on a phone.
      html`<div class="cards">${join(cards, '\n')}</div>`,
    ],
    '\n',
  );
  kit.send(ctx, 200, layout(kit.pageContext(ctx, ''), t('nav.overview'), body));
};

/** The organisation's first page, at the scope's own address: read by every role. */
export const overviewRoutes: ConsoleRoute[] = [
  { method: 'get', path: '', needs: 'read', handle: showOverview },
];
