import type { Test } from 'tap';
import * as client from 'openid-client';
import type { ConsentClient } from '../../src/banks/consent/client.js';
import type { CallKind } from '../../src/consent-bank/consent-bank.js';
import { findGrantRow, openGrant, type OpenedGrant } from '../../src/links/consent/grants.js';
import { atTheBank } from './consent-bank.js';
import {
  createTenant,
  RAISED_LIMITS,
  runSyncs,
  startTestApp,
  type EngineName,
  type TestApp,
} from './harness.js';
import { openWidget, widgetApi, widgetToken } from './widget.js';

/*
 * The client conformance suite's fixture (docs/open-finance.md, "Client conformance"): the appliance with the
 * simulated Chilean bank it serves, and the end user's whole path through the widget to the bank and back,
 * with what a module checks of the appliance afterwards: what the widget says, what was stored, whether the
 * code reached the token endpoint, what the appliance pushed (PAR).
 */

export const BANK = 'bancoabierto';
const CALLBACK_PATH = '/widget/consent/callback';

export interface Counts {
  links: number;
  grants: number;
  accounts: number;
  jobs: number;
  linkCreated: number;
}

export interface Trip {
  session: string;
  callback: URL;
  /** The callback page's status and the widget's bootstrap on it. */
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  bootstrap: any;
  /** What was stored before the trip. */
  before: Counts;
  /** The bank's mTLS calls made while the appliance handled the callback, by kind. */
  duringCallback: Record<CallKind, number>;
}

export interface ConformanceFixture {
  app: TestApp;
  key: string;
  bank: NonNullable<TestApp['consentBank']>;
  /** The appliance's own client of the bank (discovery made once, then kept, as in a process). */
  bankClient(): Promise<ConsentClient>;
  /** Forgets the appliance's clients, so its next call to the bank starts with discovery again. */
  rediscover(): Promise<void>;
  /** Request bodies the appliance pushed to the bank's PAR endpoint since the client was opened. */
  pushed(): URLSearchParams[];
  /** The token endpoint's answers as the appliance received them, since the client was opened. */
  tokenAnswers(): Record<string, unknown>[];
  /** Through the widget to the bank, consent, and back to the widget's callback page. */
  trip(rut?: string): Promise<Trip>;
  /** The first sync of a trip that made a link, the widget finished, and its exchange token exchanged. */
  linked(t: Test, trip: Trip): Promise<string>;
  /** What the module says of a refused trip: the widget's problem, nothing stored, the token endpoint. */
  refused(
    t: Test,
    trip: Trip,
    expected: { problem: 'consent_invalid' | 'consent_unknown'; exchanged: boolean },
  ): Promise<void>;
  grantOf(linkId: string): Promise<OpenedGrant>;
  counts(): Promise<Counts>;
  /** Queues a sync of a link now and runs it; answers the job's last error (null: it succeeded). */
  syncAgain(linkId: string): Promise<string | null>;
}

export async function conformanceFixture(t: Test, engine: EngineName): Promise<ConformanceFixture> {
  const app = await startTestApp(t, engine, { consentBank: true });
  // A module is one trip through the widget: a file of them asks for more widget tokens a minute than one
  // tenant may.
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const key = tenant.keys.sk_test.secret;
  const bank = app.consentBank!;
  const knex = app.db.knex;
  const redirectUri = `${app.url}${CALLBACK_PATH}`;
  let pushed: URLSearchParams[] = [];
  let tokenAnswers: Record<string, unknown>[] = [];
  const spied = new WeakSet<ConsentClient>();

  const bankClient = async () => {
    const opened = (await app.services.consentClients.forBank(knex, BANK, 'test'))!;
    if (!spied.has(opened)) {
      // Reads what the appliance pushes and what the token endpoint answers it, on the fetch it already uses
      // (nothing of the request or the answer changes).
      spied.add(opened);
      pushed = [];
      tokenAnswers = [];
      const fetch = opened.configuration[client.customFetch]!;
      opened.configuration[client.customFetch] = (async (url: string, init: client.CustomFetchOptions) => {
        const path = new URL(url).pathname;
        if (path.endsWith('/par')) pushed.push(new URLSearchParams(String(init.body)));
        const response = await fetch(url, init);
        if (path.endsWith('/token') && response.status === 200)
          tokenAnswers.push((await response.clone().json()) as Record<string, unknown>);
        return response;
      }) as client.CustomFetch;
    }
    return opened;
  };

  const count = async (table: string, where: Record<string, string> = {}) =>
    Number((await knex(table).where(where).count({ n: '*' }).first())!.n);
  const counts = async (): Promise<Counts> => ({
    links: await count('links'),
    grants: await count('link_grants'),
    accounts: await count('accounts'),
    jobs: await count('jobs'),
    linkCreated: await count('events', { type: 'link.created' }),
  });

  const trip = async (rut = '11.111.111-1'): Promise<Trip> => {
    const before = await counts();
    const opened = await openWidget(app, await widgetToken(app, key), undefined, 'en');
    if (opened.status !== 200) throw new Error(`widget: ${opened.status}`);
    const session = opened.bootstrap.session as string;
    // Discovery happens here when the appliance has no client of the bank yet (the start would make one).
    await bankClient().catch(() => undefined);
    const started = await widgetApi(app, session, 'POST', 'consent', { bank_id: BANK });
    if (started.status !== 200) throw new Error(`start: ${started.status} ${started.text}`);
    const { callback } = await atTheBank(started.body.authorization_url, redirectUri, {
      rut,
      language: 'en',
    });
    const callsBefore = bank.calls();
    const page = await fetch(callback, { headers: { 'accept-language': 'en' } });
    const html = await page.text();
    const match = /<script type="application\/json" id="widget-bootstrap">(.*?)<\/script>/s.exec(html);
    const callsAfter = bank.calls();
    const duringCallback = Object.fromEntries(
      (Object.keys(callsAfter) as CallKind[]).map((kind) => [kind, callsAfter[kind] - callsBefore[kind]]),
    ) as Record<CallKind, number>;
    return {
      session,
      callback: new URL(callback),
      status: page.status,
      bootstrap: match ? JSON.parse(match[1]!) : null,
      before,
      duringCallback,
    };
  };

  const linked = async (t: Test, made: Trip): Promise<string> => {
    t.match(made.bootstrap, { returned_from_bank: true, error: null }, 'the callback is accepted');
    t.equal(made.duringCallback.token, 1, 'the code is exchanged once');
    t.equal(await runSyncs(app), 1, 'the first sync runs');
    const status = await widgetApi(app, made.session, 'GET', 'status');
    t.match(status.body, { state: 'succeeded' }, 'and succeeds');
    const finished = await widgetApi(app, made.session, 'POST', 'finish');
    const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key,
    });
    t.equal(exchanged.status, 200, exchanged.text);
    const linkId = exchanged.body.id as string;
    t.match(exchanged.body, { object: 'link', bank_id: BANK, status: 'active', last_error_code: null });
    const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key });
    t.ok(accounts.body.length >= 3, `the link's accounts are read (${accounts.body.length})`);
    return linkId;
  };

  const refused: ConformanceFixture['refused'] = async (t, made, expected) => {
    // A callback naming no trip is no session's: its page says so, not "back from the bank".
    t.match(
      made.bootstrap,
      {
        ...(expected.problem === 'consent_invalid' ? { returned_from_bank: true } : {}),
        error: { code: expected.problem },
      },
      `the widget says ${expected.problem}`,
    );
    const status = (await widgetApi(app, made.session, 'GET', 'status')).body;
    if (expected.problem === 'consent_invalid')
      t.match(status, { state: 'failed', error: { code: 'consent_invalid' } }, 'the connection failed');
    else
      t.match(
        status,
        { state: 'awaiting_bank' },
        'a callback naming no trip cannot end one: the trip is left to its own end',
      );
    t.same(await counts(), made.before, 'no link, grant, account, job or link.created');
    t.equal(
      made.duringCallback.token,
      expected.exchanged ? 1 : 0,
      expected.exchanged ? 'the code was exchanged, and the tokens dropped' : 'the code is never exchanged',
    );
    t.equal(made.duringCallback.resources, 0, 'no resource is read');
  };

  const grantOf = async (linkId: string) =>
    openGrant((await findGrantRow(knex, linkId))!, app.services.secrets);

  const syncAgain = async (linkId: string): Promise<string | null> => {
    const { enqueueSync } = await import('../../src/jobs/jobs.js');
    const intent = await app.db.transaction(async (trx) => {
      const link = await trx('links').where({ id: linkId }).first();
      return enqueueSync(trx, { link, refreshType: 'full', now: app.clock.now() });
    });
    await runSyncs(app);
    const job = await knex('jobs').where({ refresh_intent_id: intent.id }).first();
    return job.status === 'succeeded' ? null : `${String(job.status)}: ${String(job.last_error)}`;
  };

  return {
    app,
    key,
    bank,
    bankClient,
    rediscover: () => app.services.consentClients.close(),
    pushed: () => pushed,
    tokenAnswers: () => tokenAnswers,
    trip,
    linked,
    refused,
    grantOf,
    counts,
    syncAgain,
  };
}
