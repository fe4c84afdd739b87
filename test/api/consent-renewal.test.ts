import t from 'tap';
import { queryGrant } from '../../src/banks/consent/grant-management.js';
import { findGrantRow, openGrant } from '../../src/links/consent/grants.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { runConsentExpiry } from '../../src/scheduler/consent-expiry.js';
import { atTheBank } from '../helpers/consent-bank.js';
import { createTenant, forEachEngine, runSyncs, setTimeLimit, startTestApp } from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * Renewing a consent through the widget's reconnect (issue 31, item 2), over real HTTP against the simulated
 * bank the API serves: the same link id, the same account ids, no duplicate movements and nothing read
 * beyond the reconnect's window; the consent's end moves forward and its warnings fire again; the old grant
 * is revoked at the bank; another person's consent is refused and the link left exactly as it was; an
 * active consent may be renewed early; a renewal whose first sync is refused sends no second `link.expired`.
 */
setTimeLimit(t, 300_000);

const DAY = 86_400_000;
const CALLBACK_PATH = '/widget/consent/callback';
const BANK = 'bancoabierto';

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, { consentBank: true });
  const tenant = await createTenant(app);
  const key = tenant.keys.sk_test.secret;
  const redirectUri = `${app.url}${CALLBACK_PATH}`;
  const knex = app.db.knex;

  const getLink = async (id: string) => (await app.request('GET', `/v1/links/${id}`, { key })).body;
  const eventsOf = async (type: string, linkId: string) =>
    ((await app.request('GET', `/v1/events?type=${type}&link_id=${linkId}`, { key })).body as unknown[])
      .length;
  const accountIds = async (linkId: string) =>
    ((await app.request('GET', `/v1/accounts?link_id=${linkId}`, { key })).body as { id: string }[])
      .map((account) => account.id)
      .sort();
  const movements = async (linkId: string) =>
    (await knex('movements')
      .where({ link_id: linkId })
      .select('id', 'account_id', 'bank_ref', 'posted_at')) as {
      id: string;
      account_id: string;
      bank_ref: string | null;
      posted_at: number | string;
    }[];
  const grantIdOf = async (linkId: string) =>
    openGrant((await findGrantRow(knex, linkId))!, app.services.secrets).grantId;
  const bankSays = async (grantId: string) =>
    queryGrant((await app.services.consentClients.forBank(knex, BANK, 'test'))!, grantId);
  const revokedAtBank = async () =>
    Number((await knex('consent_bank_state').where({ model: 'RevokedGrant' }).count({ n: '*' }).first())!.n);

  /** Through the widget to the bank and back: the widget's session, and the callback page's answer. */
  const throughTheBank = async (body: Record<string, unknown>, rut: string) => {
    const opened = await openWidget(app, await widgetToken(app, key, body), undefined, 'en');
    t.equal(opened.status, 200, 'the widget opens');
    const session = opened.bootstrap.session as string;
    const started = await widgetApi(app, session, 'POST', 'consent', body.link_id ? {} : { bank_id: BANK });
    t.equal(started.status, 200, started.text);
    const { callback } = await atTheBank(started.body.authorization_url, redirectUri, {
      rut,
      language: 'en',
    });
    const page = await fetch(callback, { headers: { 'accept-language': 'en' } });
    const html = await page.text();
    const bootstrap = JSON.parse(
      /<script type="application\/json" id="widget-bootstrap">(.*?)<\/script>/s.exec(html)![1]!,
    ) as { error: { code: string; retry?: boolean } | null; returned_from_bank?: boolean };
    return { session, bootstrap, opened };
  };
  /** The widget finished and its exchange token exchanged: the link as the customer reads it. */
  const finishAndExchange = async (session: string) => {
    const finished = await widgetApi(app, session, 'POST', 'finish');
    t.equal(finished.status, 200, finished.text);
    const exchanged = await app.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
      key,
    });
    t.equal(exchanged.status, 200, exchanged.text);
    return exchanged.body as { id: string; status: string; consent: { expires_at: string; status: string } };
  };
  const connect = async (rut: string) => {
    const { session } = await throughTheBank({}, rut);
    await runSyncs(app);
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'succeeded' }, 'the first sync');
    return (await finishAndExchange(session)).id;
  };
  const renew = (linkId: string, rut: string) =>
    throughTheBank({ intent: 'reconnect', link_id: linkId }, rut);
  /** The consent ended: the bank granted 3 days (a bank may grant less than asked), the tick expires it. */
  const endConsent = async (linkId: string) => {
    const ends = app.clock.now() + 3 * DAY;
    await knex('link_grants').where({ link_id: linkId }).update({ expires_at: ends });
    app.clock.set(ends - 2 * DAY);
    await runConsentExpiry(app.services);
    app.clock.set(ends + 60_000);
    await runConsentExpiry(app.services);
    t.match(await getLink(linkId), { status: 'expired', last_error_code: 'consent_expired' });
  };

  t.test('an ended consent renewed: same link, accounts and movements; its clock starts again', async (t) => {
    const linkId = await connect('11.111.111-1');
    const accountsBefore = await accountIds(linkId);
    const movementsBefore = await movements(linkId);
    t.ok(movementsBefore.length > 20, `movements read (${movementsBefore.length})`);
    const oldGrant = await grantIdOf(linkId);
    await endConsent(linkId);
    t.equal(await eventsOf('link.consent_expiring', linkId), 1, 'warned once');
    t.equal(await eventsOf('link.expired', linkId), 1, 'expired once');

    const { session, bootstrap } = await renew(linkId, '11.111.111-1');
    t.match(bootstrap, { returned_from_bank: true, error: null }, 'the bank sends the person back');
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'in_progress' });
    t.equal(await runSyncs(app), 1, 'the renewal syncs once');
    t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'succeeded' });
    const renewed = await finishAndExchange(session);
    t.equal(renewed.id, linkId, 'the exchange token names the same link');
    t.equal(renewed.status, 'active');
    t.equal(renewed.consent.status, 'active');
    t.ok(
      Date.parse(renewed.consent.expires_at) > app.clock.now() + 300 * DAY,
      `the consent ends a year on (${renewed.consent.expires_at})`,
    );

    t.same(await accountIds(linkId), accountsBefore, 'the same account ids');
    const movementsAfter = await movements(linkId);
    const ids = new Set(movementsAfter.map((m) => m.id));
    t.ok(
      movementsBefore.every((m) => ids.has(m.id)),
      'every movement read before is still there, with its id',
    );
    const link = await knex('links').where({ id: linkId }).first();
    t.equal(
      movementsAfter.length,
      movementsBefore.length + Number(link.new_movements_count),
      `only the ${link.new_movements_count} movements of the 3 days since were added`,
    );
    const refs = movementsAfter
      .filter((m) => m.bank_ref !== null)
      .map((m) => `${m.account_id}/${m.bank_ref}`);
    t.equal(new Set(refs).size, refs.length, 'no bank movement is stored twice');
    // The first sync read 90 days back from 3 days ago; the renewal's reads 90 days back from now, so what
    // it adds is newer than that (a re-import of older history would add rows from before it).
    const known = new Set(movementsBefore.map((m) => m.id));
    const added = movementsAfter.filter((m) => !known.has(m.id));
    t.ok(
      added.every((m) => Number(m.posted_at) >= app.clock.now() - 90 * DAY - DAY),
      `what the renewal added (${added.length}) lies within its 90-day window`,
    );

    t.equal(await eventsOf('link.expired', linkId), 1, 'no second link.expired');
    t.equal(await eventsOf('link.created', linkId), 1, 'the renewal is no new link');
    t.equal(await eventsOf('link.refreshed', linkId), 2, 'its sync says link.refreshed, as a reconnect');

    const grant = await knex('link_grants').where({ link_id: linkId }).first();
    t.match(grant, { expiry_warned_at: null, consent_ended_at: null }, 'the warning markers are cleared');
    t.not(await grantIdOf(linkId), oldGrant, 'the link holds the new grant');
    t.match(await bankSays(await grantIdOf(linkId)), { kind: 'authorised' });
    const revocation = await knex('grant_revocations').where({ link_id: linkId }).first();
    t.match(revocation, { status: 'pending' }, "the old grant's revoke is queued");
    await revokeDueGrants(app.services);
    t.match(await knex('grant_revocations').where({ id: revocation.id }).first(), { status: 'revoked' });
    t.match(
      await bankSays(oldGrant),
      { kind: 'ended', status: 'revoked' },
      'the bank has revoked the old grant',
    );

    // The new consent's life: warned once again before its end, and ended at it.
    const ends = Date.parse(renewed.consent.expires_at);
    app.clock.set(ends - 6 * DAY);
    t.same(await runConsentExpiry(app.services), { ended: 0, warned: 1 }, 'consent_expiring fires again');
    t.equal(await eventsOf('link.consent_expiring', linkId), 2);
    app.clock.set(ends + 60_000);
    t.same(await runConsentExpiry(app.services), { ended: 1, warned: 0 }, 'and the new consent ends');
    t.equal(await eventsOf('link.expired', linkId), 2);
  });

  t.test('another person consents: refused, the new grant revoked, the link as it was', async (t) => {
    const linkId = await connect('55.555.555-5');
    await endConsent(linkId);
    const before = {
      link: await knex('links').where({ id: linkId }).first(),
      grant: await knex('link_grants').where({ link_id: linkId }).first(),
      revocations: Number((await knex('grant_revocations').count({ n: '*' }).first())!.n),
      jobs: Number((await knex('jobs').where({ link_id: linkId }).count({ n: '*' }).first())!.n),
      movements: (await movements(linkId)).length,
      revokedAtBank: await revokedAtBank(),
    };
    const { session, bootstrap } = await renew(linkId, '12.345.678-5');
    t.match(bootstrap.error, { code: 'holder_mismatch', retry: true }, "the bank's window says why");
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'holder_mismatch', title: 'This is a different bank login' },
    });
    t.same(await knex('links').where({ id: linkId }).first(), before.link, 'the link is untouched');
    t.same(await knex('link_grants').where({ link_id: linkId }).first(), before.grant, 'and its grant');
    t.equal(
      Number((await knex('grant_revocations').count({ n: '*' }).first())!.n),
      before.revocations + 1,
      "the other person's grant is queued in the retried revoke outbox, not tried once and dropped",
    );
    t.equal(
      Number((await knex('jobs').where({ link_id: linkId }).count({ n: '*' }).first())!.n),
      before.jobs,
    );
    t.equal((await movements(linkId)).length, before.movements);
    t.ok((await revokeDueGrants(app.services)) >= 1, 'the outbox revokes it');
    t.equal(
      await revokedAtBank(),
      before.revokedAtBank + 1,
      "the other person's grant is revoked at the bank",
    );
    t.match(await getLink(linkId), { status: 'expired', last_error_code: 'consent_expired' });

    const again = await widgetApi(app, session, 'POST', 'consent', {});
    t.equal(again.status, 200, 'the same widget may send the right person to the bank');
  });

  t.test('an active consent renewed early: the link stays active, its consent ends later', async (t) => {
    const linkId = await connect('12.345.678-5');
    const first = (await getLink(linkId)).consent;
    t.equal(first.status, 'active');
    const oldGrant = await grantIdOf(linkId);
    const accountsBefore = await accountIds(linkId);
    app.clock.advance(DAY);
    const { session, bootstrap } = await renew(linkId, '12.345.678-5');
    t.equal(bootstrap.error, null);
    await runSyncs(app);
    const renewed = await finishAndExchange(session);
    t.equal(renewed.id, linkId);
    t.ok(Date.parse(renewed.consent.expires_at) > Date.parse(first.expires_at), 'the end moved forward');
    t.same(await accountIds(linkId), accountsBefore);
    t.equal(await eventsOf('link.expired', linkId), 0, 'never expired');
    t.match(await knex('grant_revocations').where({ link_id: linkId }).first(), { status: 'pending' });
    await revokeDueGrants(app.services);
    t.match(await bankSays(oldGrant), { kind: 'ended' });

    const credential = await app.request('POST', '/v1/links', {
      key,
      body: {
        bank_id: 'bancochile',
        holder_type: 'individual',
        credentials: { rut: '11.111.111-1', password: 'sandbox' },
        consent_version: '1',
        consent_text_hash: 'a'.repeat(64),
      },
    });
    const refused = await app.request('POST', '/v1/widget_tokens', {
      key,
      body: { intent: 'reconnect', link_id: credential.body.id },
    });
    t.equal(refused.status, 409, 'a working bank-login link is still not reconnected');
    t.equal(refused.body.error.code, 'link_not_expired');
  });

  t.test('a renewal whose first sync is refused: expired as before, no second link.expired', async (t) => {
    const linkId = await connect('21.212.121-5');
    await endConsent(linkId);
    const expiredAt = (await getLink(linkId)).expired_at;
    const { session } = await renew(linkId, '21.212.121-5');
    // The person withdraws the new consent at the bank before the first sync reads it.
    const client = (await app.services.consentClients.forBank(knex, BANK, 'test'))!;
    const { revokeGrant } = await import('../../src/banks/consent/grant-management.js');
    await revokeGrant(client, await grantIdOf(linkId), app.clock.now());
    await runSyncs(app);
    t.match(await getLink(linkId), { status: 'expired', expired_at: expiredAt }, 'expired as of before');
    t.equal(await eventsOf('link.expired', linkId), 1, 'the customer heard of it once');
    t.match((await widgetApi(app, session, 'GET', 'status')).body, {
      state: 'failed',
      error: { code: 'consent_revoked' },
    });
    t.equal((await getLink(linkId)).status, 'expired', 'the widget settling it changes nothing');
  });
});
