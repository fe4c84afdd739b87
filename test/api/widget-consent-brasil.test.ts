import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { findGrantRow, openGrant, openGrantId } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { inspectLink } from '../../src/inspect/inspect.js';
import { consentView } from '../../src/links/consent/consent-life.js';
import type { Database } from '../../src/db/database.js';
import { mtlsAgent, testCa } from '../helpers/consent-bank.js';
import { BRASIL, BRASIL_PERMISSIONS } from '../helpers/consent-countries.js';
import { consentTrips, consentTripCount as trips, linkCounts as counts } from '../helpers/consent-flow.js';
import { createTenant, forEachEngine, runSyncs, setTimeLimit, startTestApp } from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * The end user's path to an Open Finance Brasil bank (`fapi1-br`) through the widget, over real HTTP against
 * the simulated Brazilian bank the API serves (mTLS on loopback): the CPF on the consent screen, the consent
 * created at the bank, the PAR naming it, the bank's sign-in and consent pages, the JARM callback, the code
 * exchange, the first sync in BRL, the exchange token; the link's delete revoking the consent, a consent
 * revoked at the bank ending the link, and a renewal through the reconnect. Each refusal gets its problem and
 * records nothing but the trip's outcome.
 */
setTimeLimit(t, 300_000);

const BANK_ID = BRASIL.bankId;
const BANK_NAME = BRASIL.bankName;

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, { consentBank: true });
  const brasil = app.consentBank!.brasil!;
  t.ok(brasil, 'the Brazilian bank is served beside the Chilean one');
  const tenant = await createTenant(app);
  const sk = tenant.keys.sk_test.secret;
  const trip = consentTrips(t, app, sk, BRASIL);
  const { start: startAt, callbackPage, connect } = trip;
  const open = async (...args: Parameters<typeof trip.open>) =>
    (await trip.open(...args)).bootstrap.session as string;
  /** The customer at the Brazilian bank: sign-in with a CPF, then the consent page's button. */
  const atTheBank = (authorizationUrl: string, cpf: string, decision: 'confirm' | 'abort' = 'confirm') =>
    trip.atBank(authorizationUrl, { user: cpf, decision });
  const consentIdOf = async (linkId: string) =>
    openGrantId((await findGrantRow(app.db.knex, linkId))!, app.services.secrets);

  t.test('the whole path: CPF, consent, the bank, JARM, the first sync in BRL, the exchange', async (t) => {
    const before = await counts(app);
    const opened = await openWidget(app, await widgetToken(app, sk, {}), undefined, 'es');
    const bank = opened.bootstrap.banks.find((b: { id: string }) => b.id === BANK_ID);
    t.match(
      bank,
      {
        connection: 'consent',
        asks_cpf: true,
        consent: {
          items: [
            { coverage: 'identification' },
            { coverage: 'accounts' },
            {},
            {},
            { coverage: 'credit_cards' },
          ],
        },
      },
      'the widget lists the Brazilian bank, asking for a CPF (and the identification, which names the holder)',
    );
    t.match(
      opened.bootstrap.banks.find((b: { id: string }) => b.id === 'bancoabierto'),
      { asks_cpf: false },
      'the Chilean consent bank asks for none',
    );
    const session = opened.bootstrap.session as string;
    const started = await startAt(session, { bank_id: BANK_ID, cpf: '529.982.247-25' });
    t.equal(started.status, 200, started.text);
    const authorization = new URL(started.body.authorization_url);
    t.equal(authorization.origin + authorization.pathname, `${brasil.issuer}/auth`, "the bank's page");
    t.ok(authorization.searchParams.get('request_uri'), 'pushed (PAR)');
    t.notOk(authorization.searchParams.has('scope'), 'the consent travels in the pushed request only');

    const trip = await app.db.knex('widget_consent_requests').orderBy('created_at', 'desc').first();
    const [detail] = JSON.parse(trip.authorization_details);
    t.match(detail.identifier, /^urn:bancoabierto-br:/, 'the trip keeps the consent it created');
    const created = await brasil.consent(detail.identifier);
    t.match(
      created,
      {
        status: 'AWAITING_AUTHORISATION',
        cpf: '52998224725',
        permissions: ['CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ', ...BRASIL_PERMISSIONS],
      },
      'the bank holds the consent, naming the customer, before the customer sees it',
    );
    const months = (created!.expirationDateTime! - app.clock.now()) / (30.44 * 86_400_000);
    t.ok(months > 11.5 && months <= 12.1, `it ends in 12 months (${months.toFixed(2)})`);

    const { callback, pages } = await atTheBank(started.body.authorization_url, '529.982.247-25');
    t.match(pages[1], /529\.982\.247-25/, "the bank's consent page names the customer");
    const url = new URL(callback);
    t.ok(url.searchParams.get('response'), 'the answer is a signed JWT (JARM)');
    t.notOk(url.searchParams.has('code'), 'no bare code');
    const returned = await callbackPage(callback);
    t.equal(returned.status, 200);
    t.match(returned.bootstrap, { returned_from_bank: true, error: null });
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'in_progress' });

    t.equal(await runSyncs(app), 1, 'the first sync runs through the bank API');
    const succeeded = (await widgetApi(app, session, 'GET', 'status')).body;
    t.match(succeeded, { state: 'succeeded' });
    const finished = await widgetApi(app, session, 'POST', 'finish');
    const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key: sk,
    });
    t.match(exchanged.body, { object: 'link', bank_id: BANK_ID, status: 'active' });
    const linkId = exchanged.body.id as string;
    t.equal(await consentIdOf(linkId), detail.identifier, "the link's grant is the consent id");
    t.equal((await brasil.consent(detail.identifier))?.status, 'AUTHORISED');
    const after = await counts(app);
    t.same(
      { links: after.links - before.links, grants: after.grants - before.grants },
      { links: 1, grants: 1 },
    );
    t.equal(after.linkCreated, before.linkCreated + 1, '`link.created` at the exchange');

    const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
    t.ok(accounts.body.length >= 3, `accounts read (${accounts.body.length})`);
    t.equal(accounts.body.length, succeeded.accounts_count);
    t.ok(
      accounts.body.every((a: { currency: string }) => a.currency === 'BRL'),
      'every account of 529.982.247-25 is in BRL',
    );
    t.ok(
      accounts.body.some((a: { type: string }) => a.type === 'credit_card'),
      'the card is read too',
    );
    const checking = accounts.body.find((a: { type: string }) => a.type === 'checking');
    const movements = await app.request('GET', `/v1/accounts/${checking.id}/movements?per_page=100`, {
      key: sk,
    });
    t.ok(movements.body.length > 0, 'and the movements');
    t.ok(
      movements.body.every((m: { amount: number }) => Number.isInteger(m.amount)),
      'amounts in centavos (minor units)',
    );
    // What the bank said, in its own terms (decimal strings in BRL), against what the API shows in centavos.
    const agent = mtlsAgent(t, await testCa());
    const token = openGrant((await findGrantRow(app.db.knex, linkId))!, app.services.secrets).accessToken;
    const bankGet = async (path: string) =>
      (await (
        await undiciFetch(`${brasil.mtlsBase}${path}`, {
          dispatcher: agent,
          headers: { authorization: `Bearer ${token}`, 'x-fapi-interaction-id': crypto.randomUUID() },
        })
      ).json()) as { data: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
    const listed = await bankGet('/open-banking/accounts/v2/accounts');
    const atBank = listed.data.find((a: { number: string }) => a.number.endsWith(checking.last_4));
    t.ok(atBank, 'the checking account is the bank’s, by its number');
    const balances = await bankGet(`/open-banking/accounts/v2/accounts/${atBank.accountId}/balances`);
    t.equal(balances.data.availableAmount.currency, 'BRL');
    t.equal(
      checking.balance.available,
      Math.round(Number(balances.data.availableAmount.amount) * 100),
      `R$ ${balances.data.availableAmount.amount} is ${checking.balance.available} centavos`,
    );
    t.ok(
      movements.body.every(
        (m: { counterparty: { rut: string | null } | null }) => m.counterparty?.rut == null,
      ),
      'a CPF or CNPJ counterparty is not shown as a RUT',
    );

    await t.test('deleting the link revokes the consent at the bank (DELETE)', async (t) => {
      const deleted = await app.request('DELETE', `/v1/links/${linkId}`, { key: sk });
      t.equal(deleted.status, 200, deleted.text);
      t.equal((await brasil.consent(detail.identifier))?.status, 'AUTHORISED', 'told after the delete');
      t.ok((await revokeDueGrants(app.services)) >= 1);
      const revoked = await brasil.consent(detail.identifier);
      t.match(revoked, {
        status: 'REJECTED',
        rejection: { rejectedBy: 'TPP', code: 'CUSTOMER_MANUALLY_REVOKED' },
      });
      const row = await app.db.knex('grant_revocations').where({ link_id: linkId }).first();
      t.match(row, { status: 'revoked', attempts: 1, last_error: null });
    });
  });

  t.test('a consent the customer revokes at the bank ends the link at its next sync', async (t) => {
    const linkId = await connect('111.444.777-35');
    const accounts = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
    t.ok(
      accounts.body.some((a: { currency: string }) => a.currency === 'USD'),
      'a USD account stays USD',
    );
    const consentId = await consentIdOf(linkId);
    const bank = await app.services.consentClients.forBank(app.db.knex, BANK_ID, 'test');
    t.match(await bank!.profile.revokeGrant(bank!, consentId, app.clock.now()), { kind: 'revoked' });
    const refresh = await app.request('POST', '/v1/refresh_intents', { key: sk, body: { link_id: linkId } });
    t.equal(refresh.status, 200, refresh.text);
    await runSyncs(app);
    const link = await app.request('GET', `/v1/links/${linkId}`, { key: sk });
    t.match(link.body, { status: 'expired', last_error_code: 'consent_revoked' }, 'the link expired');
    const inspection = await inspectLink(app.db.reader, linkId, consentView(app.services, app.clock.now()));
    t.match(
      inspection.diagnosis[0],
      /the bank says the consent was revoked \(consents API: revoked\) \(consent_revoked\)/,
      "the reason is the consent's status, not Grant Management's",
    );
  });

  t.test('a renewal through the reconnect: same link, same accounts, a new consent', async (t) => {
    const linkId = await connect();
    const accountsBefore = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
    const oldConsent = await consentIdOf(linkId);
    const session = await open({ intent: 'reconnect', link_id: linkId });

    // The typed CPF is not compared with the link's subject before the bank (the ID token's `sub` is the
    // bank's opaque id, not a CPF): another person is refused when they come back from the bank.
    const other = await startAt(session, { cpf: '111.444.777-35' });
    t.equal(other.status, 200, 'no answer about the holder before the bank');
    const elsewhere = await atTheBank(other.body.authorization_url, '111.444.777-35');
    t.match(
      (await callbackPage(elsewhere.callback)).bootstrap,
      { error: { code: 'holder_mismatch' } },
      "another person's consent is refused at the callback, on the ID token's subject",
    );
    t.equal(await consentIdOf(linkId), oldConsent, 'the link keeps its consent');

    const started = await startAt(session, { cpf: '52998224725' });
    t.equal(started.status, 200, started.text);
    const { callback } = await atTheBank(started.body.authorization_url, '529.982.247-25');
    t.equal((await callbackPage(callback)).status, 200);
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'succeeded' });
    const newConsent = await consentIdOf(linkId);
    t.not(newConsent, oldConsent, 'the link holds the new consent');
    const accountsAfter = await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key: sk });
    t.same(
      accountsAfter.body.map((a: { id: string }) => a.id).sort(),
      accountsBefore.body.map((a: { id: string }) => a.id).sort(),
      'the same accounts',
    );
    await revokeDueGrants(app.services);
    t.equal((await brasil.consent(oldConsent))?.status, 'REJECTED', 'the old consent is revoked');
    t.equal((await brasil.consent(newConsent))?.status, 'AUTHORISED');
  });

  t.test('refusals: declined, the bank refuses, another customer signs in; nothing recorded', async (t) => {
    for (const [consentCpf, signInCpf, decision, what] of [
      ['529.982.247-25', '529.982.247-25', 'abort', 'the customer declines'],
      ['390.533.447-05', '390.533.447-05', 'confirm', 'the bank refuses every consent of 390.533.447-05'],
      ['529.982.247-25', '111.444.777-35', 'confirm', "another customer than the consent's signs in"],
    ] as const) {
      const before = await counts(app);
      const session = await open({ institution_id: BANK_ID });
      const started = await startAt(session, { cpf: consentCpf });
      t.equal(started.status, 200, started.text);
      const { callback } = await atTheBank(started.body.authorization_url, signInCpf, decision);
      t.ok(new URL(callback).searchParams.get('response'), `${what}: the refusal is signed too`);
      const page = await callbackPage(callback);
      t.match(
        page.bootstrap,
        {
          returned_from_bank: true,
          error: { code: 'consent_denied', title: `You did not authorise ${BANK_NAME}` },
        },
        what,
      );
      t.match((await widgetApi(app, session, 'GET', 'status')).body, {
        state: 'failed',
        error: { code: 'consent_denied', retry: true },
      });
      t.same(await counts(app), before, `${what}: no link, no grant, no event`);
    }
  });

  t.test('a JARM answer with a bad signature or an unknown state: refused, nothing recorded', async (t) => {
    const before = await counts(app);
    const session = await open({ institution_id: BANK_ID });
    const started = await startAt(session, { cpf: '529.982.247-25' });
    const { callback } = await atTheBank(started.body.authorization_url, '529.982.247-25');
    const jwt = new URL(callback).searchParams.get('response')!;
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());

    /** The callback with the answer's claims changed by `change`, under the bank's signature of the real ones. */
    const tampered = (change: Record<string, string>) => {
      const url = new URL(callback);
      const payload = Buffer.from(JSON.stringify({ ...claims, ...change })).toString('base64url');
      url.searchParams.set('response', `${header}.${payload}.${signature}`);
      return url.href;
    };
    const unknown = await callbackPage(tampered({ state: 'B'.repeat(32) }));
    t.equal(unknown.status, 400);
    t.match(unknown.bootstrap.error, { code: 'consent_unknown' }, 'a state no trip has');

    const invalid = await callbackPage(tampered({ code: 'x'.repeat(43) }));
    t.match(
      invalid.bootstrap,
      { returned_from_bank: true, error: { code: 'consent_invalid' } },
      'a signature that does not match',
    );
    t.same(await counts(app), before, 'nothing made');
    t.equal((await callbackPage(callback)).status, 409, 'the trip is spent: the real answer is refused too');
  });

  t.test('bad starts: the envelope naming cpf, no call to the bank, nothing written', async (t) => {
    const session = await open({ institution_id: BANK_ID });
    const before = await trips(app);
    const consentsBefore = await bankConsents(app);
    const cases: [Record<string, unknown>, string][] = [
      [{}, 'parameter_missing'],
      [{ cpf: '123.456.789-00' }, 'parameter_invalid'],
      [{ cpf: '111.111.111-11' }, 'parameter_invalid'],
      [{ cpf: 'not a cpf' }, 'parameter_invalid'],
      [{ cpf: '1'.repeat(21) }, 'parameter_invalid'],
    ];
    for (const [body, code] of cases) {
      const response = await startAt(session, body);
      t.equal(response.status, 400, JSON.stringify(body));
      t.match(
        response.body.error,
        { code, param: 'cpf', type: 'invalid_request_error' },
        JSON.stringify(body),
      );
    }
    t.equal(await trips(app), before, 'no trip recorded');
    t.equal(await bankConsents(app), consentsBefore, 'no consent created at the bank');
  });
});

/** The bank's own records (its state rows), to see that a refused start never reached it. */
async function bankConsents(app: { db: Database }): Promise<number> {
  return Number((await app.db.knex('consent_bank_state').count({ n: '*' }).first())!.n);
}
