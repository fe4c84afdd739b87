import t from 'tap';

import { consentStatus } from '../../src/links/consent/consent-life.js';
import type { LinkInspection } from '../../src/inspect/inspect.js';
import { runConsentExpiry } from '../../src/scheduler/consent-expiry.js';
import { appBesideBank, consentLink } from '../helpers/consent-bank.js';
import { runCliJson } from '../helpers/cli.js';
import { forEachEngine, linkBody, runSyncs } from '../helpers/harness.js';

/*
 * A consent's life on its link (issue 31, item 1): the link says when its consent ends and whether the end
 * user must act (active → expiring → expired), in the API, `svc links inspect` and its JSON; the scheduler's
 * tick warns once before the end (`link.consent_expiring`) and expires the link once at the end
 * (`link.expired`, `consent_expired`). A credential link has no consent.
 */

const DAY = 86_400_000;

t.test('the status: revoked first, then the date, expiring within the warning days', async (t) => {
  const now = 1_000 * DAY;
  const view = { now, warningDays: 7 };
  const active = { status: 'active' as const, last_error_code: null };
  t.equal(consentStatus(null, view, active), 'active', 'no end: active until revoked');
  t.equal(consentStatus(now + 8 * DAY, view, active), 'active');
  t.equal(consentStatus(now + 7 * DAY, view, active), 'expiring', 'exactly the warning days away');
  t.equal(consentStatus(now + 1, view, active), 'expiring');
  t.equal(consentStatus(now, view, active), 'expired', 'ended, before the tick expires the link');
  t.equal(consentStatus(now + DAY, { now, warningDays: 0 }, active), 'active', '0 days: no expiring');
  const revoked = { status: 'expired' as const, last_error_code: 'consent_revoked' };
  t.equal(consentStatus(now + 30 * DAY, view, revoked), 'revoked');
  t.equal(
    consentStatus(now - DAY, view, { ...revoked, expired_at: now - DAY + 60_000 }),
    'expired',
    'refused by the bank after its end (a sync before the tick): it ended, it was not revoked',
  );
  t.equal(
    consentStatus(now - DAY, view, { ...revoked, expired_at: now - 2 * DAY }),
    'revoked',
    'revoked before its end: revoked',
  );
  const ended = { status: 'expired' as const, last_error_code: 'consent_expired' };
  t.equal(consentStatus(now + 30 * DAY, view, ended), 'expired', 'the link expired for its consent');
  const refused = { status: 'expired' as const, last_error_code: 'rejected_credentials' };
  t.equal(
    consentStatus(now + 30 * DAY, view, refused),
    'active',
    'a link expired otherwise: the consent lives',
  );
});

forEachEngine(t, async (t, engine) => {
  const { fixture, app, tenant, registration } = await appBesideBank(t, engine);
  const key = tenant.keys.sk_test.secret;
  const getLink = async (id: string) => (await app.request('GET', `/v1/links/${id}`, { key })).body;
  const events = async (type: string, linkId: string) =>
    (await app.request('GET', `/v1/events?type=${type}&link_id=${linkId}`, { key })).body as {
      id: string;
      data: Record<string, unknown>;
    }[];
  const tick = () => runConsentExpiry(app.services);
  /** The next tick is a minute on: a tick is won once per period. */
  const minuteLater = () => app.clock.advance(60_000);
  const cli = () => ({
    home: app.config.home,
    env: {
      SVC_DATABASE_URL: app.config.databaseUrl,
      // The CLI reads the test's moved clock, as an operator's would read the real one.
      SVC_CLOCK_OFFSET_MS: String(app.clock.now() - Date.now()),
    },
  });
  const inspect = (linkId: string) => runCliJson<LinkInspection>(t, ['links', 'inspect', linkId], cli());

  t.test('a credential link has no consent, in the API and the list', async (t) => {
    const created = await app.request('POST', '/v1/links', { key, body: linkBody() });
    t.equal(created.status, 200);
    t.equal(created.body.consent, null);
    t.equal((await getLink(created.body.id)).consent, null);
    const list = await app.request('GET', '/v1/links', { key });
    t.equal(list.body.find((l: { id: string }) => l.id === created.body.id).consent, null);
  });

  /** A consent link of `rut` whose consent ends `ms` from now, on a whole second. */
  const endingIn = async (ms: number, rut: string) => {
    // Whole seconds: the bank keeps validTo as given, and the API answers it in ISO with milliseconds.
    const ends = Math.floor((app.clock.now() + ms) / 1000) * 1000;
    const endsIso = new Date(ends).toISOString();
    const made = await consentLink(fixture, app, registration, tenant.orgId, rut, undefined, endsIso);
    return { linkId: made.linkId, ends, endsIso };
  };

  t.test('active, expiring, expired: the link, its events (once each) and inspect', async (t) => {
    const { linkId, ends, endsIso } = await endingIn(30 * DAY, '11.111.111-1');
    await runSyncs(app);

    const fresh = await getLink(linkId);
    t.equal(fresh.status, 'active');
    t.same(fresh.consent, {
      expires_at: endsIso,
      status: 'active',
      covers: ['accounts', 'balances', 'movements', 'credit_cards'],
    });
    const listed = (await app.request('GET', '/v1/links', { key })).body.find(
      (l: { id: string }) => l.id === linkId,
    );
    t.same(listed.consent, fresh.consent, 'the list shows it too');
    t.same(await tick(), { ended: 0, warned: 0 }, 'a month away: nothing to say');

    app.clock.set(ends - 6.5 * DAY);
    t.equal((await getLink(linkId)).consent.status, 'expiring', 'within 7 days: expiring');
    t.same(await tick(), { ended: 0, warned: 1 });
    const [warning, ...more] = await events('link.consent_expiring', linkId);
    t.same(more, [], 'one warning');
    t.same(warning?.data, {
      object: 'consent',
      link_id: linkId,
      status: 'expiring',
      expires_at: endsIso,
      days_left: 7,
    });
    minuteLater();
    t.same(await tick(), { ended: 0, warned: 0 }, 'the next tick warns no more');
    t.equal((await events('link.consent_expiring', linkId)).length, 1);

    const expiring = await inspect(linkId);
    t.match(expiring.link.consent, { status: 'expiring', expires_at: endsIso });
    t.match(expiring.diagnosis.join('\n'), new RegExp(`consent at the bank ends ${endsIso}`));
    t.match(expiring.findings, [{ code: 'consent_expiring', expiresAt: endsIso }]);

    app.clock.set(ends + 30_000);
    const ended = await getLink(linkId);
    t.equal(ended.consent.status, 'expired', 'past its end the consent is expired, before any tick');
    t.equal(ended.status, 'active', 'the link waits for the tick');
    t.same(await tick(), { ended: 1, warned: 0 });
    const expired = await getLink(linkId);
    t.match(expired, {
      status: 'expired',
      last_error_code: 'consent_expired',
      expired_at: endsIso,
      consent: { status: 'expired', expires_at: endsIso },
    });
    const [end, ...again] = await events('link.expired', linkId);
    t.same(again, [], 'one link.expired');
    t.same(end?.data, {
      object: 'link',
      id: linkId,
      status: 'expired',
      last_error_code: 'consent_expired',
      expired_at: endsIso,
    });
    minuteLater();
    t.same(await tick(), { ended: 0, warned: 0 }, 'the next tick ends nothing more');
    t.equal((await events('link.expired', linkId)).length, 1);
    t.equal((await events('link.consent_expiring', linkId)).length, 1);

    const refresh = await app.request('POST', '/v1/refresh_intents', {
      key,
      body: { link_id: linkId, refresh_type: 'only_last' },
    });
    t.equal(refresh.status, 409, 'an expired link is not refreshed');
    t.equal(refresh.body.error.code, 'link_expired');

    const inspected = await inspect(linkId);
    t.match(inspected.link, { status: 'expired', last_error_code: 'consent_expired' });
    t.match(inspected.link.consent, { status: 'expired', expires_at: endsIso, covers: ['accounts'] });
    t.match(inspected.diagnosis[0], /its consent at the bank ended \(consent_expired\)/);
  });

  t.test('the sandbox fires a consent warning about a consent link, with its end', async (t) => {
    const { linkId, endsIso } = await endingIn(90 * DAY, '12.345.678-5');
    const fire = (type: string) =>
      app.request('POST', '/v1/sandbox/events/fire', { key, body: { type, link_id: linkId } });
    const warning = await fire('link.consent_expiring');
    t.equal(warning.status, 200);
    t.match(warning.body, {
      type: 'link.consent_expiring',
      data: { object: 'consent', link_id: linkId, status: 'expiring', expires_at: endsIso, days_left: 90 },
    });
    const end = await fire('link.expired');
    t.match(end.body.data, { id: linkId, status: 'expired', last_error_code: 'consent_expired' });
    t.equal((await getLink(linkId)).status, 'active', 'firing changes nothing about the link');
  });
});
