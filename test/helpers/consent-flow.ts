import type { Test } from 'tap';
import { atTheBank } from './consent-bank.js';
import type { ConsentCountry } from './consent-countries.js';
import { runSyncs, type TestApp } from './harness.js';
import { openWidget, widgetApi, widgetPage, widgetToken, type WidgetTokenBody } from './widget.js';

/*
 * A person's trip to a consent bank through the widget over HTTP, told once for every country
 * (consent-countries.ts). The Chilean bank answers with a code in the query (FAPI 2.0), the Brazilian one with
 * a signed JARM or a `code id_token` form post (FAPI 1.0 Advanced): the steps here do not look at the answer,
 * the tests do.
 */

export const CONSENT_CALLBACK_PATH = '/widget/consent/callback';

/**
 * The widget's consent trip over HTTP for one country's bank, as the API tests walk it: the widget opened,
 * the consent started, the person at the bank's pages (a browser without JavaScript), the widget's callback
 * page. `open` checks with `t` that the widget opens.
 */
export function consentTrips(t: Test, app: TestApp, sk: string, country: ConsentCountry) {
  const redirectUri = `${app.url}${CONSENT_CALLBACK_PATH}`;
  const open = async (body: WidgetTokenBody = {}, language = 'en', hosted = false) => {
    const opened = await openWidget(app, await widgetToken(app, sk, body), hosted ? '' : undefined, language);
    t.equal(opened.status, 200, 'the widget opens');
    return opened;
  };
  const start = (session: string, body: Record<string, unknown> = { bank_id: country.bankId }) =>
    widgetApi(app, session, 'POST', 'consent', body);
  /** Sign-in as `user` (the country's holder unless given), then the consent page's button. */
  const atBank = (
    authorizationUrl: string,
    options: { user?: string; language?: string; decision?: 'confirm' | 'abort' } = {},
  ) =>
    atTheBank(authorizationUrl, redirectUri, {
      ...(country.idField === 'cpf'
        ? { cpf: options.user ?? country.users.holder }
        : { rut: options.user ?? country.users.holder }),
      language: options.language ?? country.language,
      decision: options.decision,
    });
  const callbackPage = (url: string, cookie?: string, language = 'en') =>
    widgetPage(url, { language, cookie });
  return {
    redirectUri,
    open,
    start,
    atBank,
    callbackPage,
    /** A whole connect of `user` to a token naming the bank: the callback, the first sync, the exchange. */
    async connect(user = country.users.holder, body: WidgetTokenBody = {}): Promise<string> {
      const session = (await open({ institution_id: country.bankId, ...body })).bootstrap.session as string;
      const started = await start(session, country.startBody(user));
      t.equal(started.status, 200, started.text);
      const { callback } = await atBank(started.body.authorization_url, { user });
      t.equal((await callbackPage(callback)).status, 200);
      await runSyncs(app);
      t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'succeeded' });
      const finished = await widgetApi(app, session, 'POST', 'finish');
      const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
        key: sk,
      });
      t.equal(exchanged.status, 200, exchanged.text);
      return exchanged.body.id as string;
    },
  };
}

/** What a consent trip may make: links, their grants and `link.created` events. */
export async function linkCounts(
  app: Pick<TestApp, 'db'>,
): Promise<{ links: number; grants: number; linkCreated: number }> {
  const count = async (table: string, where: Record<string, string> = {}) =>
    Number((await app.db.knex(table).where(where).count({ n: '*' }).first())!.n);
  return {
    links: await count('links'),
    grants: await count('link_grants'),
    linkCreated: await count('events', { type: 'link.created' }),
  };
}

/** The widget's consent trips recorded (one a start that reached the bank). */
export async function consentTripCount(app: Pick<TestApp, 'db'>): Promise<number> {
  return Number((await app.db.knex('widget_consent_requests').count({ n: '*' }).first())!.n);
}
