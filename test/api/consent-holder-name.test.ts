import t, { type Test } from 'tap';
import { formatLinkInspection } from '../../src/cli/views/link-view.js';
import { inspectLink } from '../../src/inspect/inspect.js';
import { consentView } from '../../src/links/consent/consent-life.js';
import type { CustomerData } from '../../src/consent-bank/customer-data.js';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import { callsDuring, scheduledSync as scheduledSyncOf } from '../helpers/consent-bank.js';
import { BRASIL, CHILE, type ConsentCountry } from '../helpers/consent-countries.js';
import { consentTrips } from '../helpers/consent-flow.js';
import { signedIn } from '../helpers/console.js';
import { createTenant, forEachEngine, runSyncs, setTimeLimit, startTestApp } from '../helpers/harness.js';
import { widgetApi } from '../helpers/widget.js';

/*
 * Issue 45: a consent link names its holder as its bank vouches for it, over real HTTP against the simulated
 * banks the API serves. Chile (the CMF's draft, OpenID Connect): the consent asks for the ID token's `name`
 * claim (OpenID Connect Core 1.0 §5.1, with the `claims` parameter of §5.5), which the code exchange's and each
 * refresh's ID token carry (§12.2). Brazil: the consent asks for
 * CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ and the link's sync reads customers 2.2.1 `GET
 * /personal/identifications` (`civilName`). Both screens list it first, in one wording. The name reaches the API,
 * the console and `svc links inspect` after the first sync; it is read again on the daily full pass, never on a
 * steady-state scheduled sync, so a name changed at the bank shows a day later at most.
 */
setTimeLimit(t, 300_000);

const HOUR = 3_600_000;
/** The sandbox person whose data each bank's holder (consent-countries.ts) reads, and so whose name. */
const DATA_RUT = '11111111-1';

/** The sandbox's people, whose names the test may change at the bank. */
class RenamingData implements CustomerData {
  private readonly base = sandboxCustomerData();
  readonly renamed = new Map<string, string>();
  name(customer: string): string | null {
    return this.renamed.get(customer) ?? this.base.name(customer);
  }
  accounts: CustomerData['accounts'] = (...args) => this.base.accounts(...args);
  entries: CustomerData['entries'] = (...args) => this.base.entries(...args);
  balance: CustomerData['balance'] = (...args) => this.base.balance(...args);
}

forEachEngine(t, async (t, engine) => {
  const data = new RenamingData();
  const app = await startTestApp(t, engine, { consentBank: { data } });
  const tenant = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  const chileBank = app.consentBank!;
  const brasilBank = app.consentBank!.brasil!;
  const expected = sandboxCustomerData().name(DATA_RUT)!;
  t.ok(expected.length > 3, `the sandbox person has a name (${expected})`);
  let signIns = 0;

  /**
   * A whole connect of the country's holder through the widget, up to the link's first sync and the exchange:
   * with the widget's consent screen and the bank's consent page (in English).
   */
  const connect = async (country: ConsentCountry) => {
    const trip = consentTrips(t, app, sk, country);
    const opened = await trip.open({ institution_id: country.bankId });
    const screen = opened.bootstrap.banks.find((b: { id: string }) => b.id === country.bankId).consent;
    const session = opened.bootstrap.session as string;
    const started = await trip.start(session, country.startBody(country.users.holder));
    t.equal(started.status, 200, started.text);
    const { callback, pages } = await trip.atBank(started.body.authorization_url, { language: 'en' });
    const page = pages[1]!;
    t.equal((await fetch(callback)).status, 200, 'the callback records the link');
    t.equal(await runSyncs(app), 1, 'its first sync');
    const finished = await widgetApi(app, session, 'POST', 'finish');
    const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key: sk,
    });
    t.equal(exchanged.status, 200, exchanged.text);
    return { linkId: exchanged.body.id as string, screen, page };
  };

  /** The bank's calls while `run` ran, by name (`callName`). */
  const callsAt = callsDuring;

  /** The link's next scheduled sync, `hours` on (the job the scheduler's tick would queue). */
  const scheduledSync = async (linkId: string, hours: number) => {
    app.clock.advance(hours * HOUR);
    await scheduledSyncOf(t, app, linkId, tenant.orgId);
  };

  /** Where the name shows: the API's link and accounts, the console's link page, `svc links inspect`. */
  const shownName = async (linkId: string) => {
    const link = await app.request('GET', `/v1/links/${linkId}`, { key: sk });
    const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
    // Signed in now: the test's clock moves a day on, beyond a console session's life.
    const support = await signedIn(app, 'support', tenant.orgId, `holder-${engine}-${++signIns}@a.cl`);
    const page = await support('GET', `/console/o/${tenant.orgId}/test/links/${linkId}`);
    const inspection = await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()));
    return {
      api: link.body.holder_name as string | null,
      accounts: [...new Set((accounts.body as { holder_name: string | null }[]).map((a) => a.holder_name))],
      console: /<dt>Holder<\/dt>\s*<dd>([^<]*)<\/dd>/.exec(page.text)?.[1] ?? null,
      cli: formatLinkInspection(inspection, 200).find((line) => line.trim().startsWith('holder ')) ?? '',
    };
  };

  const expectNamed = async (t: Test, linkId: string, name: string) => {
    const shown = await shownName(linkId);
    t.equal(shown.api, name, 'the API names the holder');
    t.same(shown.accounts, [name], 'and every account');
    t.equal(shown.console, name, "the console's link page shows the holder");
    t.match(shown.cli, `holder ${name},`, '`svc links inspect` shows the holder');
  };

  for (const [label, bank, listed, source] of [
    ['Chile: the ID token names the holder', CHILE, 'Your name, as the bank has it on record', 'token'],
    [
      "Brazil: the customers API's identification names the holder",
      BRASIL,
      'Your registration data: name, documents, date of birth and contact details',
      'customers',
    ],
  ] as const)
    t.test(label, async (t) => {
      const running = bank === CHILE ? chileBank : brasilBank;
      let linkId = '';
      let screen: { items: { coverage: string; text: string }[] } = { items: [] };
      let page = '';
      const first = await callsAt(running, async () => ({ linkId, screen, page } = await connect(bank)));
      t.equal(
        screen.items[0]!.coverage,
        bank === CHILE ? 'name' : 'identification',
        "the widget's screen lists what names the holder first",
      );
      t.match(page, new RegExp(`<ul><li[^>]*>${listed}</li>`), "and so does the bank's consent page");
      if (bank === CHILE)
        t.equal(screen.items[0]!.text, listed, 'in the same words (src/open-finance/consent-wording.ts)');
      await expectNamed(t, linkId, expected);
      if (source === 'customers') t.equal(first.customers, 1, 'one identification read at the first sync');
      else
        t.equal(
          first.token,
          1,
          'the code exchange named the holder: the first sync refreshed nothing for it',
        );

      // A name changed at the bank: a steady-state scheduled sync does not ask, the daily full pass does.
      data.renamed.set(DATA_RUT, 'Nombre Cambiado En El Banco');
      t.teardown(() => data.renamed.clear());
      const steady = await callsAt(running, () => scheduledSync(linkId, 4));
      t.notOk(steady['accounts list'], 'a steady-state sync (balances only)');
      t.notOk(steady.customers, 'asks for no identification');
      t.ok((steady.token ?? 0) <= 1, 'and no token call beyond the one refresh of an expired token');
      t.equal((await shownName(linkId)).api, expected, 'the name is as the first sync read it');
      const later = await callsAt(running, () => scheduledSync(linkId, 21));
      t.equal(later['accounts list'], 1, 'a day after the first sync: the daily full pass');
      if (source === 'customers') t.equal(later.customers, 1, 'reads the identification again');
      else t.equal(later.token, 1, "its one refresh's ID token carries the name: no call of its own");
      await expectNamed(t, linkId, 'Nombre Cambiado En El Banco');
    });
});
