import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { ApiError } from '../../src/errors/api-error.js';
import { inspectLink } from '../../src/links/inspect.js';
import {
  afterAttempt,
  retryDelayMs,
  revokeDueGrants,
  REVOKE_ATTEMPTS,
  type GrantRevocationRow,
} from '../../src/links/consent/revocations.js';
import { consentLink, mtlsAgent, registerApp, startBank } from '../helpers/consent-bank.js';
import { createTenant, forEachEngine, request, startTestApp, tableCounts } from '../helpers/harness.js';

/*
 * Deleting a consent link revokes its grant at the bank (Grant Management): the delete queues the revoke in
 * its transaction, the scheduler's tick tells the bank, a bank that cannot be reached is tried again later,
 * and `svc links inspect` says whether the bank was told.
 */

t.test('the retry schedule: 1 minute doubling to 6 hours, 20 attempts, Retry-After respected', async (t) => {
  t.equal(retryDelayMs(1), 60_000);
  t.equal(retryDelayMs(2), 120_000);
  t.equal(retryDelayMs(30), 6 * 3_600_000);
  const failed = { kind: 'failed' as const, reason: 'HTTP 503', retryAt: null };
  t.match(afterAttempt({ attempts: 0 }, failed, 1_000), {
    status: undefined,
    attempts: 1,
    next_attempt_at: 61_000,
  });
  t.match(afterAttempt({ attempts: 0 }, { ...failed, retryAt: 1_000_000 }, 1_000), {
    next_attempt_at: 1_000_000,
  });
  t.match(afterAttempt({ attempts: REVOKE_ATTEMPTS - 1 }, failed, 1_000), {
    status: 'failed',
    last_error: 'HTTP 503',
  });
  t.match(afterAttempt({ attempts: 2 }, { kind: 'gone' }, 5), {
    status: 'revoked',
    revoked_at: 5,
    last_error: null,
  });
});

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const app = await startTestApp(t, engine);
  const [a, b] = [await createTenant(app), await createTenant(app)];
  const registration = await registerApp(fixture, app);
  const agent = mtlsAgent(t, fixture.ca);
  const consentLinkOf = (rut: string) =>
    consentLink(fixture, app, registration, a.orgId, rut).then((made) => ({
      ...made,
      link: { id: made.linkId },
    }));
  const grantStatus = async (grantId: string) =>
    (
      (await (
        await undiciFetch(`${fixture.bank.mtlsBase}/grants/${grantId}`, { dispatcher: agent })
      ).json()) as { status: string }
    ).status;
  const inspected = async (linkId: string) => {
    try {
      await inspectLink(app.db.reader, linkId, app.clock.now());
      return 'found';
    } catch (error) {
      t.type(error, ApiError);
      return (error as Error).message;
    }
  };
  const revocation = async (linkId: string) =>
    (await app.db.knex<GrantRevocationRow>('grant_revocations').where({ link_id: linkId }).first())!;

  t.test('a delete is refused for another organisation and nothing is queued', async (t) => {
    const { link, grantId } = await consentLinkOf('11.111.111-1');
    const before = await tableCounts(app.db);
    const refused = await request(app.url, 'DELETE', `/v1/links/${link.id}`, { key: b.keys.sk_test.secret });
    t.equal(refused.status, 404);
    t.same(await tableCounts(app.db), before, 'nothing written');
    t.equal(await grantStatus(grantId), 'Authorised');
  });

  t.test('deleting the link revokes its grant at the bank; inspect says so', async (t) => {
    const { link, grantId, accessToken } = await consentLinkOf('12.345.678-5');
    const deleted = await request(app.url, 'DELETE', `/v1/links/${link.id}`, { key: a.keys.sk_test.secret });
    t.equal(deleted.status, 200);
    t.match(await revocation(link.id), { status: 'pending', attempts: 0, bank_id: 'bancoabierto' });
    t.notOk(JSON.stringify(await revocation(link.id)).includes(grantId), 'the grant id is kept sealed');
    t.equal(await grantStatus(grantId), 'Authorised', 'the bank is told after the delete, not in it');
    t.match(
      await inspected(link.id),
      /was deleted\. Its grant at bancoabierto is being revoked: attempt 1 of 20/,
    );

    t.ok((await revokeDueGrants(app.services)) >= 1);
    t.equal(await grantStatus(grantId), 'Revoked');
    const resources = await undiciFetch(`${fixture.bank.mtlsBase}/open-banking/accounts/v2/accounts`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${accessToken}` },
    });
    t.equal(resources.status, 401, 'the token stopped with its grant');
    t.match(await revocation(link.id), { status: 'revoked', attempts: 1, last_error: null });
    t.match(await inspected(link.id), /Its grant at bancoabierto was revoked at \d{4}-/);
    t.equal(await revokeDueGrants(app.services), 0, 'a revoked grant is not tried again');
  });

  t.test('a bank out of reach is tried again later, and inspect shows the wait', async (t) => {
    const { link, grantId } = await consentLinkOf('55.555.555-5');
    t.equal(
      (await request(app.url, 'DELETE', `/v1/links/${link.id}`, { key: a.keys.sk_test.secret })).status,
      200,
    );
    // The registration now names an issuer where nothing listens: discovery fails as a down bank's would.
    const moved = {
      issuer: 'http://127.0.0.1:9/sandbox/consent-bank',
      updated_at: registration.updated_at + 1,
    };
    await app.db.knex('consent_clients').where({ id: registration.id }).update(moved);
    await revokeDueGrants(app.services);
    const waiting = await revocation(link.id);
    t.match(waiting, { status: 'pending', attempts: 1, last_error: /could not be read over mutual TLS/ });
    t.equal(Number(waiting.next_attempt_at), app.clock.now() + 60_000);
    t.match(
      await inspected(link.id),
      /attempt 2 of 20 at .*Last error: the bank's discovery could not be read/,
    );
    t.equal(await revokeDueGrants(app.services), 0, 'not before its time');

    await app.db
      .knex('consent_clients')
      .where({ id: registration.id })
      .update({ issuer: registration.issuer, updated_at: registration.updated_at + 2 });
    app.clock.advance(61_000);
    await revokeDueGrants(app.services);
    t.match(await revocation(link.id), { status: 'revoked', attempts: 2 });
    t.equal(await grantStatus(grantId), 'Revoked');
  });
});
