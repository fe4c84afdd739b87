import { errors } from '../../errors/api-error.js';
import { html } from '../../html/html.js';
import { pageOrganisations } from '../../orgs/orgs.js';
import { shownName } from '../format.js';
import type { ConsoleRoute } from '../kit.js';
import { layout } from '../layout.js';
import { pageWindow, pager, pagerWords, table } from '../views.js';

/*
 * The organisations, for a user of all of them (an operator, support for all): each links to its overview in
 * test mode. To a user of one organisation the page does not exist (404); the console sends them to theirs.
 */

const allOrganisationsOnly: ConsoleRoute['find'] = async (ctx, kit) => {
  if (kit.state(ctx).user.org_id !== null) throw errors.notFound('This user sees one organisation.');
};

const showOrganisations: ConsoleRoute['handle'] = async (ctx, kit) => {
  const state = kit.state(ctx);
  const window = pageWindow(ctx.query);
  const { data, total } = await pageOrganisations(kit.services.db.reader, window);
  const t = kit.words(ctx);
  const rows = data.map((org) => [
    html`<a href="/console/o/${org.id}/test">${shownName(state.locale, org.name)}</a>`,
    html`<code>${org.id}</code>`,
    org.created_at.slice(0, 10),
  ]);
  kit.send(
    ctx,
    200,
    layout(
      kit.pageContext(ctx),
      t('orgs.title'),
      html`${table(t('orgs.caption'), [t('orgs.name'), 'ID', t('orgs.created')], rows, t('orgs.empty'))}${pager('/console/orgs', ctx.query, window.page, total, pagerWords(state.locale))}`,
    ),
  );
};

export const organisationRoutes: ConsoleRoute[] = [
  {
    method: 'get',
    under: 'console',
    path: '/orgs',
    needs: 'read',
    find: allOrganisationsOnly,
    handle: showOrganisations,
  },
];
