import t from 'tap';
import type { ManualClock } from '../../src/clock/clock.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { authenticateSession } from '../../src/widget/sessions.js';
import { BRASIL } from '../helpers/consent-countries.js';
import { consentTrips } from '../helpers/consent-flow.js';
import { widgetApi } from '../helpers/widget.js';
import { createTenant, forEachEngine, setTimeLimit, startTestApp } from '../helpers/harness.js';

/*
 * Abandoned consent trips at an Open Finance Brasil bank (issue 43, item 4; src/widget/consent/abandoned-trips.ts), over
 * real HTTP against the simulated Brazilian bank the API serves (mTLS on loopback). A start creates the consent
 * at the bank before the person is sent there (consents API 3.3.1, POST /consents: AWAITING_AUTHORISATION); a
 * trip that never comes back, one replaced by a new start, or one that comes back too late, leaves it there.
 * The appliance revokes it through the revoke outbox: DELETE /consents/{consentId} (consents-3.3.1.yml,
 * `consentsDeleteConsentsConsentId`), after which the bank holds it REJECTED by the TPP, in the background
 * share of the bank's budget. The bank's own 60-minute rule (an unauthorised consent is REJECTED by the ASPSP,
 * CONSENT_EXPIRED) is not what ends it here: the clock moves 11 minutes only.
 */
setTimeLimit(t, 300_000);

const BANK_ID = BRASIL.bankId;
/** Past the trip's 10 minutes (CONSENT_WAIT_MS), far within the bank's own 60. */
const PAST_THE_TRIP_MS = 11 * 60_000;

forEachEngine(t, async (t, engine) => {
  // The draft's 60 calls a minute (the background share: 24), and seconds that never fill at a clock that
  // does not move.
  const app = await startTestApp(t, engine, {
    consentBank: true,
    config: { banks: { budget: { perSecond: 1_000, perMinute: 60 } } },
  });
  const clock = app.clock as ManualClock;
  const brasil = app.consentBank!.brasil!;
  const sk = (await createTenant(app)).keys.sk_test.secret;

  const trips = consentTrips(t, app, sk, BRASIL);
  const open = async () => (await trips.open({ institution_id: BANK_ID })).bootstrap.session as string;
  /** A start at the Brazilian bank: the consent it created there, and the bank's page. */
  const start = async (session: string) => {
    const started = await trips.start(session, BRASIL.startBody(BRASIL.users.holder));
    t.equal(started.status, 200, started.text);
    // The session's trip still at the bank (two starts in one ms of the test's clock share created_at).
    const { id } = (await authenticateSession(app.db.knex, session, clock.now()))!;
    const trip = await app.db
      .knex('widget_consent_requests')
      .where({ session_id: id })
      .whereNull('completed_at')
      .first();
    const consentId = JSON.parse(trip.authorization_details)[0].identifier as string;
    t.equal((await brasil.consent(consentId))?.status, 'AWAITING_AUTHORISATION', 'the bank holds a consent');
    return { tripId: trip.id as string, consentId, url: started.body.authorization_url as string };
  };
  /** The scheduler's tick, as far as trips go: housekeeping, then the revoke outbox. */
  const tick = async () => {
    await runHousekeeping(app.services);
    return revokeDueGrants(app.services);
  };
  const revocationOf = (tripId: string) =>
    app.db.knex('grant_revocations').where({ link_id: tripId }).first();

  t.test(
    'a trip that never comes back: its consent is deleted at the bank once the trip expires',
    async (t) => {
      const session = await open();
      const { tripId, consentId } = await start(session);
      await tick();
      t.equal(
        (await brasil.consent(consentId))?.status,
        'AWAITING_AUTHORISATION',
        'left while the trip may end',
      );
      t.notOk(await revocationOf(tripId), 'nothing queued before the trip expires');

      clock.advance(PAST_THE_TRIP_MS);
      t.equal(
        (await brasil.consent(consentId))?.status,
        'AWAITING_AUTHORISATION',
        'the bank would keep it another 49 minutes',
      );
      t.equal(await tick(), 1, 'one revoke tried');
      t.match(
        await brasil.consent(consentId),
        { status: 'REJECTED', rejection: { rejectedBy: 'TPP', code: 'CUSTOMER_MANUALLY_REJECTED' } },
        'DELETE /consents/{consentId}: the bank holds it REJECTED, by the TPP',
      );
      const trip = await app.db.knex('widget_consent_requests').where({ id: tripId }).first();
      t.match(trip, { outcome: 'abandoned' }, 'the trip ended as abandoned');
      t.match(await revocationOf(tripId), { status: 'revoked', attempts: 1, bank_id: BANK_ID });
      const audit = await app.db
        .knex('audit_log')
        .where({ target_id: tripId })
        .orderBy('created_at')
        .select('action', 'actor');
      t.same(
        audit.map((row: { action: string; actor: string }) => [row.action, row.actor]),
        [
          ['link.consent_revocation_queued', 'scheduler:abandoned-trips'],
          ['link.consent_revoked', 'scheduler:grant-revocations'],
        ],
        'queued and revoked, in the audit log',
      );
      t.equal(await tick(), 0, 'once: the next tick finds nothing');

      const status = await widgetApi(app, session, 'GET', 'status');
      t.not(status.body.state, 'awaiting_bank', 'the widget no longer waits for the bank');
    },
  );

  t.test('a trip replaced by a new start: the first consent is deleted, the second kept', async (t) => {
    const session = await open();
    const first = await start(session);
    const second = await start(session);
    t.match(await revocationOf(first.tripId), { status: 'pending' }, 'queued by the start that replaced it');
    t.equal(await revokeDueGrants(app.services), 1);
    t.match(await brasil.consent(first.consentId), { status: 'REJECTED', rejection: { rejectedBy: 'TPP' } });
    t.equal(
      (await brasil.consent(second.consentId))?.status,
      'AWAITING_AUTHORISATION',
      'the live trip’s kept',
    );
  });

  t.test('authorised, but back too late: the callback refuses it and the consent is revoked', async (t) => {
    const session = await open();
    const { tripId, consentId, url } = await start(session);
    const { callback } = await trips.atBank(url);
    t.equal((await brasil.consent(consentId))?.status, 'AUTHORISED', 'the person consented at the bank');
    clock.advance(PAST_THE_TRIP_MS);
    const page = await fetch(callback, { headers: { 'accept-language': 'en' } });
    t.match(await page.text(), /"code":"consent_expired"/, 'the callback says the trip expired');
    t.equal(await revokeDueGrants(app.services), 1);
    t.match(
      await brasil.consent(consentId),
      { status: 'REJECTED', rejection: { rejectedBy: 'TPP', code: 'CUSTOMER_MANUALLY_REVOKED' } },
      'no consent stays authorised for a link that was never made',
    );
    t.match(await revocationOf(tripId), { status: 'revoked' });
    t.notOk(await app.db.knex('links').where({ bank_id: BANK_ID }).first(), 'no link');
  });

  t.test("below the syncs: the revoke waits while the bank's minute holds 24 calls", async (t) => {
    const session = await open();
    const { tripId, consentId } = await start(session);
    clock.advance(PAST_THE_TRIP_MS);
    // 10 s into a minute, so the revoke's wait for a permit (5 s at most) ends before the minute does.
    clock.advance(70_000 - (app.clock.now() % 60_000));
    await runHousekeeping(app.services);
    // 30 calls this minute: a scheduled sync may still call (48 of 60), a background call may not (24).
    const now = app.clock.now();
    const minute = now - (now % 60_000);
    await app.db
      .knex('bank_call_budgets')
      .where({ bank_id: BANK_ID, mode: 'test' })
      .update({ minute_start: minute, minute_count: 30, second_start: 0, second_count: 0 });
    const calls = brasil.callLog().length;
    await revokeDueGrants(app.services);
    t.equal(brasil.callLog().length, calls, 'no call reached the bank');
    const waiting = await revocationOf(tripId);
    t.match(
      waiting,
      { status: 'pending', attempts: 0, last_error: /^bank_budget: / },
      'its attempt not spent',
    );
    t.equal(Number(waiting.next_attempt_at), minute + 60_000, 'it waits for the next minute');
    t.equal((await brasil.consent(consentId))?.status, 'AWAITING_AUTHORISATION');
    clock.advance(minute + 60_000 - now);
    t.ok((await revokeDueGrants(app.services)) >= 1);
    t.match(await revocationOf(tripId), { status: 'revoked', attempts: 1 });
    t.equal((await brasil.consent(consentId))?.status, 'REJECTED');
  });
});
