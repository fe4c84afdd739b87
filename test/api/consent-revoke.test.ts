import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { fetch as undiciFetch } from 'undici';
import type { DeletedLinkInspection } from '../../src/inspect/inspect.js';
import type { ApplianceStatus } from '../../src/processes/status.js';
import {
  afterAttempt,
  retryDelayMs,
  revokeDueGrants,
  REVOKE_ATTEMPTS,
  type GrantRevocationRow,
} from '../../src/links/consent/revocations.js';
import { consentLink, grantsAtBank, mtlsAgent, registerApp, startBank } from '../helpers/consent-bank.js';
import { runCli, runCliJson } from '../helpers/cli.js';
import {
  createTenant,
  forEachEngine,
  linkBody,
  request,
  startTestApp,
  tableCounts,
} from '../helpers/harness.js';

/*
 * Deleting a consent link revokes its grant at the bank (Grant Management): the delete queues the revoke in
 * its transaction, the scheduler's tick tells the bank, a bank that cannot be reached or asks to be called
 * later is tried again, and `svc links inspect` (its JSON for scripts), `svc status` and `/metrics` show
 * where the revocations stand.
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
  const grantStatus = (grantId: string) => grantsAtBank(fixture, app, agent).status(grantId);
  const cli = { home: app.config.home, env: { SVC_DATABASE_URL: app.config.databaseUrl } };
  /** `svc links inspect --json`, checked to carry none of the grant's secrets. */
  const inspected = async (t: Test, made: { link: { id: string }; grantId: string; accessToken: string }) => {
    const result = await runCli(['links', 'inspect', made.link.id, '--json'], cli);
    t.equal(result.code, 0, `inspect of ${made.link.id} answers: ${result.message}`);
    for (const secret of [made.grantId, made.accessToken])
      t.notOk(result.stdout.includes(secret) || result.stderr.includes(secret), 'no grant id or token');
    return JSON.parse(result.stdout) as DeletedLinkInspection;
  };
  const queues = async (t: Test) => (await runCliJson<ApplianceStatus>(t, ['status'], cli)).queues!;
  const queueMetric = async (queue: string) => {
    const text = await app.services.metrics.registry.metrics();
    return Number(new RegExp(`svc_queue_depth\\{queue="${queue}"\\} (\\d+)`).exec(text)?.[1]);
  };
  const revocation = async (linkId: string) =>
    (await app.db.knex<GrantRevocationRow>('grant_revocations').where({ link_id: linkId }).first())!;
  const deleteLink = async (linkId: string) =>
    (await request(app.url, 'DELETE', `/v1/links/${linkId}`, { key: a.keys.sk_test.secret })).status;

  t.test('a delete is refused for another organisation and nothing is queued', async (t) => {
    const { link, grantId } = await consentLinkOf('11.111.111-1');
    const before = await tableCounts(app.db);
    const refused = await request(app.url, 'DELETE', `/v1/links/${link.id}`, { key: b.keys.sk_test.secret });
    t.equal(refused.status, 404);
    t.same(await tableCounts(app.db), before, 'nothing written');
    t.equal(await grantStatus(grantId), 'Authorised');
  });

  t.test('deleting the link revokes its grant at the bank; inspect, status and metrics say so', async (t) => {
    const made = await consentLinkOf('12.345.678-5');
    const { link, grantId, accessToken } = made;
    const before = (await queues(t)).grant_revocations_pending;
    t.equal(await deleteLink(link.id), 200);
    t.match(await revocation(link.id), { status: 'pending', attempts: 0, bank_id: 'bancoabierto' });
    t.notOk(JSON.stringify(await revocation(link.id)).includes(grantId), 'the grant id is kept sealed');
    t.equal(await grantStatus(grantId), 'Authorised', 'the bank is told after the delete, not in it');

    const pending = await inspected(t, made);
    t.match(pending, {
      object: 'link',
      id: link.id,
      deleted: true,
      org_id: a.orgId,
      mode: 'test',
      bank_id: 'bancoabierto',
      grant_revocation: {
        status: 'pending',
        attempts: 0,
        max_attempts: 20,
        last_error: null,
        next_attempt_at: new Date(app.clock.now()).toISOString(),
        revoked_at: null,
      },
    });
    t.equal(pending.deleted_at, pending.grant_revocation!.created_at, 'queued as the link was deleted');
    t.match(pending.diagnosis, [/Its grant at bancoabierto is being revoked: attempt 1 of 20/]);
    t.equal((await queues(t)).grant_revocations_pending, before + 1, 'svc status counts it');
    t.equal(await queueMetric('grant_revocations_pending'), before + 1, 'so does /metrics');

    const text = await runCli(['links', 'inspect', link.id], cli);
    t.equal(text.code, 0);
    t.match(text.stdout, new RegExp(`${link.id} bancoabierto deleted`));
    t.match(text.stdout, /status pending, attempts 0 of 20/);
    t.match(text.stdout, /next attempt \d{4}-/);
    t.notOk(text.stdout.includes(grantId) || text.stdout.includes(accessToken), 'no grant id or token');

    t.ok((await revokeDueGrants(app.services)) >= 1);
    t.equal(await grantStatus(grantId), 'Revoked');
    const resources = await undiciFetch(`${fixture.bank.mtlsBase}/open-banking/accounts/v2/accounts`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${accessToken}`, 'x-fapi-interaction-id': randomUUID() },
    });
    t.equal(resources.status, 401, 'the token stopped with its grant');
    t.match(await revocation(link.id), { status: 'revoked', attempts: 1, last_error: null });
    t.match((await inspected(t, made)).grant_revocation, {
      status: 'revoked',
      attempts: 1,
      last_error: null,
      next_attempt_at: null,
      revoked_at: new Date(app.clock.now()).toISOString(),
    });
    t.match((await inspected(t, made)).diagnosis, [/Its grant at bancoabierto was revoked at \d{4}-/]);
    t.match((await runCli(['links', 'inspect', link.id], cli)).stdout, /status revoked, attempts 1 of 20/);
    t.equal((await queues(t)).grant_revocations_pending, before, 'no longer pending');
    t.equal(await queueMetric('grant_revocations_pending'), before);
    t.equal(await revokeDueGrants(app.services), 0, 'a revoked grant is not tried again');
  });

  // Issue 44, item 9 changed this: a deleted password link shows its last state (it was "not found").
  t.test(
    'a deleted link with no grant: its last state, no revocation; a link that never was: not found',
    async (t) => {
      const created = await request(app.url, 'POST', '/v1/links', {
        key: a.keys.sk_test.secret,
        body: linkBody(),
      });
      t.equal(created.status, 200);
      t.equal(await deleteLink(created.body.id), 200);
      const shown = await runCli(['links', 'inspect', created.body.id, '--json'], cli);
      t.equal(shown.code, 0);
      t.match(JSON.parse(shown.stdout), {
        deleted: true,
        grant_revocation: null,
        last_state: { status: 'active' },
        deleted_by: `key:${a.keys.sk_test.id}`,
      });
      const missing = await runCli(['links', 'inspect', 'link_0000000000000000', '--json'], cli);
      t.not(missing.code, 0);
      t.match(missing.stdout + missing.stderr, /No link link_0000000000000000/);
      t.match(JSON.parse(missing.stdout), { error: { code: 'resource_missing' } });
    },
  );

  t.test('a bank out of reach is tried again later, and inspect shows the wait', async (t) => {
    const made = await consentLinkOf('55.555.555-5');
    const { link, grantId } = made;
    t.equal(await deleteLink(link.id), 200);
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
    const shown = await inspected(t, made);
    t.match(shown.grant_revocation, {
      status: 'pending',
      attempts: 1,
      last_error: /discovery could not be read over mutual TLS/,
      next_attempt_at: new Date(app.clock.now() + 60_000).toISOString(),
    });
    t.match(shown.diagnosis, [/attempt 2 of 20 at .*Last error: the bank's discovery could not be read/]);
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

  // Each status as the simulated bank sends it (Retry-After: 2 s for 529, 30 s for 503, 300 s asked here of
  // the 429): the wait is the longer of the bank's and the schedule's first minute.
  for (const [status, retryAfterSeconds, waitMs] of [
    [529, undefined, 60_000],
    [503, undefined, 60_000],
    [429, 300, 300_000],
  ] as const) {
    t.test(
      `a revoke answered ${status} stays pending with the reason, and revokes once it clears`,
      async (t) => {
        const made = await consentLinkOf('11.111.111-1');
        const { link, grantId } = made;
        t.teardown(() => fixture.faults.reset());
        fixture.faults.setFaults({ grantManagementStatus: status, retryAfterSeconds });
        t.equal(await deleteLink(link.id), 200);
        const pendingBefore = await queueMetric('grant_revocations_pending');
        t.equal(await revokeDueGrants(app.services), 1);
        t.equal(await grantStatus(grantId), 'Authorised', 'the bank kept the grant');
        const shown = await inspected(t, made);
        t.match(shown.grant_revocation, {
          status: 'pending',
          attempts: 1,
          last_error: `the bank answered HTTP ${status} temporarily_unavailable`,
          next_attempt_at: new Date(app.clock.now() + waitMs).toISOString(),
          revoked_at: null,
        });
        t.match(shown.diagnosis, [
          new RegExp(`attempt 2 of 20 at .*Last error: the bank answered HTTP ${status}`),
        ]);
        t.equal(await queueMetric('grant_revocations_pending'), pendingBefore, 'still counted as pending');
        t.equal(await revokeDueGrants(app.services), 0, 'not before the bank said');

        fixture.faults.reset();
        app.clock.advance(waitMs + 1_000);
        t.equal(await revokeDueGrants(app.services), 1);
        t.match((await inspected(t, made)).grant_revocation, {
          status: 'revoked',
          attempts: 2,
          last_error: null,
        });
        t.equal(await grantStatus(grantId), 'Revoked');
      },
    );
  }

  t.test('a revoke that runs out of attempts is failed, shown and counted', async (t) => {
    const made = await consentLinkOf('12.345.678-5');
    t.teardown(() => fixture.faults.reset());
    fixture.faults.setFaults({ grantManagementStatus: 503 });
    const failedBefore = (await queues(t)).grant_revocations_failed;
    t.equal(await deleteLink(made.link.id), 200);
    for (let attempt = 1; attempt <= REVOKE_ATTEMPTS; attempt++) {
      t.equal(await revokeDueGrants(app.services), 1, `attempt ${attempt}`);
      app.clock.advance(retryDelayMs(attempt) + 1_000);
    }
    t.equal(await revokeDueGrants(app.services), 0, 'no 21st attempt');
    const shown = await inspected(t, made);
    t.match(shown.grant_revocation, {
      status: 'failed',
      attempts: REVOKE_ATTEMPTS,
      last_error: 'the bank answered HTTP 503 temporarily_unavailable',
      next_attempt_at: null,
      revoked_at: null,
    });
    t.match(shown.diagnosis, [/failed after 20 attempts; the bank may still hold the consent/]);
    t.equal((await queues(t)).grant_revocations_failed, failedBefore + 1, 'svc status counts it');
    t.equal(await queueMetric('grant_revocations_failed'), failedBefore + 1, 'so does /metrics');
    t.equal(await grantStatus(made.grantId), 'Authorised');
  });
});
