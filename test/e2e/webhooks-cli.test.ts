import t from 'tap';
import type { Test } from 'tap';
import { HANG_GUARD_MS, forEachEngine, linkBody } from '../helpers/harness.js';
import {
  installedHome,
  killGroup,
  runCli,
  runCliJson,
  spawnCli,
  startServe,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';
import { systemClock } from '../../src/clock/clock.js';
import { loadConfig } from '../../src/config/load-config.js';
import { silentLogger } from '../../src/logging/logger.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { loadSecretBox } from '../../src/secrets/master-key-file.js';
import { TEMPORARY_ENDPOINT_TTL_MS } from '../../src/webhooks/endpoints.js';

interface Outcome {
  endpoint_id: string;
  url: string;
  delivery_id: string;
  status: string;
  attempts: number;
  last_response_status: number | null;
}

/** `svc webhooks listen --json` on a home, its JSON lines collected as they come. */
function startListener(
  t: Test,
  home: string,
  forwardTo: string,
  extra: string[] = [],
  env: Record<string, string> = {},
) {
  const child = spawnCli(
    ['webhooks', 'listen', '--forward-to', forwardTo, ...extra, '--json'],
    { home, env },
    t,
  );
  const lines: Record<string, unknown>[] = [];
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    for (const part of parts) if (part.trim()) lines.push(JSON.parse(part) as Record<string, unknown>);
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, lines, stderr: () => stderr, exited };
}

forEachEngine(t, async (t, engine) => {
  const { database, home, key: sk, orgId } = await installedHome(t, engine);
  // Three attempts 0.3 s apart, so a failing receiver is `failed` within a second.
  const serve = await startServe(t, {
    home,
    args: ['--roles', 'api,dispatcher'],
    env: {
      SVC_DISPATCHER_RETRY_SCHEDULE_SECONDS: '[0, 0.3, 0.3]',
      SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
      SVC_RATE_LIMITS_RESOURCE_WRITE_BURST: '1000',
      SVC_RATE_LIMITS_RESOURCE_WRITE_PER_MINUTE: '1000',
    },
  });
  const good = await startReceiver(t);
  const bad = await startReceiver(t, (_request, response) => {
    response.writeHead(500);
    response.end('no');
  });
  const createEndpoint = async (url: string, events: string[]) =>
    (await serve.request('POST', '/v1/webhook_endpoints', { key: sk, body: { url, enabled_events: events } }))
      .body as {
      id: string;
      secret: string;
    };
  const goodHook = await createEndpoint(good.url, ['link.expired', 'refresh_intent.succeeded']);
  const badHook = await createEndpoint(bad.url, ['link.expired']);
  const link = (await serve.request('POST', '/v1/links', { key: sk, body: linkBody() })).body.id as string;
  const audit = (action: string) =>
    withDatabase(database.url, (db) => db.knex('audit_log').where({ action }).orderBy('created_at'));

  let firedEvent = '';
  t.test('svc sandbox fire waits for and prints each endpoint outcome', async (t) => {
    const result = await runCliJson<{
      event: { id: string; type: string };
      deliveries: Outcome[];
      complete: boolean;
    }>(t, ['sandbox', 'fire', 'link.expired', '--link', link], { home });
    firedEvent = result.event.id;
    t.match(result.event, {
      object: 'event',
      type: 'link.expired',
      mode: 'test',
      data: { id: link, status: 'expired' },
    });
    t.equal(result.complete, true);
    const byEndpoint = new Map(result.deliveries.map((d) => [d.endpoint_id, d]));
    t.match(byEndpoint.get(goodHook.id), {
      status: 'succeeded',
      attempts: 1,
      last_response_status: 200,
      url: good.url,
    });
    t.match(byEndpoint.get(badHook.id), { attempts: 1, last_response_status: 500 });
    const got = good.received.find((r) => r.event.id === result.event.id)!;
    t.ok(got, 'the receiver got it');
    t.equal(independentlyVerified(got.body, got.headers['svc-signature'], goodHook.secret), 1);
    t.equal((await audit('sandbox.fire')).length, 1, 'audited');

    const human = await runCli(['sandbox', 'fire', 'refresh_intent.succeeded', '--link', link], { home });
    t.equal(human.code, 0);
    t.match(
      human.stdout,
      new RegExp(
        `${goodHook.id}\\s+${good.url.replace(/[.]/g, '\\.')}\\s+succeeded \\(1 attempt, HTTP 200\\)`,
      ),
    );

    const unknownType = await runCli(['sandbox', 'fire', 'link.exploded', '--link', link, '--json'], {
      home,
    });
    t.not(unknownType.code, 0);
    t.match(JSON.parse(unknownType.stdout), { error: { code: 'parameter_invalid' } });
    const unknownLink = await runCli(
      ['sandbox', 'fire', 'link.created', '--link', 'link_0000000000000000', '--json'],
      {
        home,
      },
    );
    t.equal(unknownLink.code, 4, 'exit 4: not found');
    t.match(JSON.parse(unknownLink.stdout), { error: { code: 'resource_missing' } });
  });

  t.test('svc webhooks deliveries filters by status, event and endpoint', async (t) => {
    const failed = await waitFor(
      async () => {
        const rows = await runCliJson<{ id: string; event_id: string; status: string }[]>(
          t,
          ['webhooks', 'deliveries', '--status', 'failed'],
          { home },
        );
        return rows.some((row) => row.event_id === firedEvent) ? rows : undefined;
      },
      HANG_GUARD_MS,
      300,
    );
    t.ok(failed, 'the 500 delivery ends failed after its three attempts');
    t.ok(failed!.every((row) => row.status === 'failed'));
    const byEvent = await runCliJson<{ endpoint_id: string }[]>(
      t,
      ['webhooks', 'deliveries', '--event', firedEvent],
      {
        home,
      },
    );
    t.same(byEvent.map((d) => d.endpoint_id).sort(), [goodHook.id, badHook.id].sort());
    const byEndpoint = await runCliJson<{ endpoint_id: string; attempts: number; org_id: string }[]>(
      t,
      ['webhooks', 'deliveries', '--endpoint', badHook.id],
      { home },
    );
    t.ok(byEndpoint.length >= 1 && byEndpoint.every((d) => d.endpoint_id === badHook.id));
    t.equal(byEndpoint[0]!.org_id, orgId);
    const human = await runCli(['webhooks', 'deliveries', '--status', 'failed'], { home });
    t.match(human.stdout, /failed\s+3 attempt\(s\) HTTP 500\s+HTTP 500/);
  });

  t.test('svc webhooks redeliver starts a new series; the receiver gets one more attempt', async (t) => {
    const [failed] = await runCliJson<{ id: string }[]>(
      t,
      ['webhooks', 'deliveries', '--status', 'failed', '--event', firedEvent],
      { home },
    );
    const before = bad.received.filter((r) => r.event.id === firedEvent).length;
    t.equal(before, 3);
    const created = await runCliJson<{ id: string; status: string; event_id: string }>(
      t,
      ['webhooks', 'redeliver', failed!.id],
      { home },
    );
    t.match(created, { object: 'webhook_delivery', status: 'pending', attempts: 0, event_id: firedEvent });
    t.not(created.id, failed!.id);
    t.ok(
      await waitFor(
        async () =>
          bad.received.filter((r) => r.event.id === firedEvent).length > before ? true : undefined,
        HANG_GUARD_MS,
      ),
      'one more attempt arrived',
    );
    const [entry] = await audit('webhook_delivery.redeliver');
    t.match(entry, { target_id: failed!.id, org_id: orgId });
    const missing = await runCli(['webhooks', 'redeliver', 'wd_0000000000000000', '--json'], { home });
    t.equal(missing.code, 4);
  });

  t.test('svc webhooks endpoints lists every endpoint without secrets', async (t) => {
    const result = await runCli(['webhooks', 'endpoints', '--json'], { home });
    const listed = JSON.parse(result.stdout) as { id: string; org_id: string; url: string }[];
    t.same(listed.map((e) => e.id).sort(), [goodHook.id, badHook.id].sort());
    t.notOk(result.stdout.includes('whsec_'), 'no secret printed');
    const other = await runCliJson<unknown[]>(t, ['webhooks', 'endpoints', '--org', 'org_0000000000000000'], {
      home,
    });
    t.same(other, []);
  });

  t.test(
    'svc webhooks listen forwards exact bodies and signatures, and removes its endpoint on SIGTERM',
    async (t) => {
      const target = await startReceiver(t);
      const { child, lines, stderr, exited } = startListener(t, home, target.url, [
        '--events',
        'account.created',
      ]);

      const ready = await waitFor(async () => lines.find((l) => l.type === 'ready'), HANG_GUARD_MS, 50);
      t.ok(ready, `listen is ready ${stderr()}`);
      const endpointId = ready!.endpoint_id as string;
      const secret = ready!.secret as string;
      t.match(ready, { enabled_events: ['account.created'], url: /^http:\/\/127\.0\.0\.1:\d+\/$/ });
      const row = await withDatabase(database.url, (db) =>
        db.knex('webhook_endpoints').where({ id: endpointId }).first(),
      );
      t.match(row, { mode: 'test', org_id: orgId });

      const fired = await serve.request('POST', '/v1/sandbox/events/fire', {
        key: sk,
        body: { type: 'account.created', link_id: link },
      });
      t.equal(fired.status, 200);
      const [got] = await target.waitFor(1, HANG_GUARD_MS);
      t.equal(got!.event.id, fired.body.id);
      t.equal(got!.headers['svc-event-id'], fired.body.id);
      t.equal(got!.headers['content-type'], 'application/json');
      t.equal(
        independentlyVerified(got!.body, got!.headers['svc-signature'], secret),
        1,
        'verifies with the printed secret',
      );
      const stored = await serve.request('GET', `/v1/events/${fired.body.id}`, { key: sk });
      t.equal(got!.body, JSON.stringify(stored.body), 'the exact body');
      const printed = await waitFor(async () => lines.find((l) => l.type === 'event'), HANG_GUARD_MS, 50);
      t.match(printed, {
        type: 'event',
        event_id: fired.body.id,
        event_type: 'account.created',
        status: 200,
      });
      const delivery = await waitFor(
        () =>
          withDatabase(database.url, async (db) => {
            const d = await db.knex('webhook_deliveries').where({ endpoint_id: endpointId }).first();
            return d?.status === 'succeeded' ? d : undefined;
          }),
        HANG_GUARD_MS,
      );
      t.ok(delivery, "the dispatcher was answered with the receiver's 200");

      child.kill('SIGTERM');
      t.equal(await exited, 0, 'exits 0 on SIGTERM');
      t.match(lines.at(-1), {
        type: 'stopped',
        endpoint_id: endpointId,
        endpoint_deleted: true,
        forwarded: 1,
      });
      const gone = await withDatabase(database.url, (db) =>
        db.knex('webhook_endpoints').where({ id: endpointId }).first(),
      );
      t.equal(gone, undefined, 'the temporary endpoint is deleted');
      // The API's endpoints are in the log too (by their key): these are the listener's, by the CLI's user.
      for (const action of ['webhook_endpoint.create', 'webhook_endpoint.delete']) {
        const rows = (await audit(action)).filter((row) => row.target_id === endpointId);
        t.equal(rows.length, 1, action);
        t.match(rows[0], { actor: /^cli:/, details: /"temporary":true/ });
      }
    },
  );

  t.test("a killed listener's endpoint expires: events skip it, then housekeeping removes it", async (t) => {
    const target = await startReceiver(t);
    const { child, lines, exited } = startListener(t, home, target.url);
    const ready = await waitFor(async () => lines.find((line) => line.type === 'ready'), HANG_GUARD_MS, 50);
    const endpointId = ready!.endpoint_id as string;
    killGroup(child.pid!, 'SIGKILL');
    await exited;

    await withDatabase(database.url, async (db) => {
      const row = await db.knex('webhook_endpoints').where({ id: endpointId }).first();
      const expiresAt = Number(row.expires_at);
      t.ok(
        Math.abs(expiresAt - (Date.now() + TEMPORARY_ENDPOINT_TTL_MS)) < 30_000,
        'left behind with an expiry two minutes out',
      );
      const fire = async () => {
        const fired = await serve.request('POST', '/v1/sandbox/events/fire', {
          key: sk,
          body: { type: 'account.created', link_id: link },
        });
        t.equal(fired.status, 200);
        return fired.body.id as string;
      };
      const deliveredTo = async (eventId: string) =>
        (await db.knex('webhook_deliveries').where({ event_id: eventId }).select('endpoint_id')).map(
          (d: { endpoint_id: string }) => d.endpoint_id,
        );
      t.ok((await deliveredTo(await fire())).includes(endpointId), 'receives events until it expires');
      // Two minutes on, as far as the endpoint is concerned.
      await db
        .knex('webhook_endpoints')
        .where({ id: endpointId })
        .update({ expires_at: Date.now() - 1 });
      t.notOk((await deliveredTo(await fire())).includes(endpointId), 'and none after');

      await runHousekeeping({
        db,
        clock: systemClock,
        config: loadConfig({ home, env: {} }),
        logger: silentLogger,
        secrets: loadSecretBox(loadConfig({ home, env: {} })),
      });
      t.equal(await db.knex('webhook_endpoints').where({ id: endpointId }).first(), undefined, 'removed');
      t.equal(
        (await db.knex('webhook_deliveries').where({ endpoint_id: endpointId })).length,
        0,
        'with its deliveries',
      );
    });
    const removal = (await audit('webhook_endpoint.delete')).find(
      (entry: { target_id: string }) => entry.target_id === endpointId,
    );
    t.match(removal, { actor: 'housekeeping' });
    t.same(JSON.parse(removal.details), { temporary: true, expired: true });
  });
});

// The operator's own path to a first local webhook: with the address policy as shipped, a tenant's
// endpoint may not point at loopback, and `svc webhooks listen` still forwards to a local receiver.
forEachEngine(t, async (t, engine) => {
  t.test('svc webhooks listen works where tenants may not reach loopback', async (t) => {
    const { home, key: sk } = await installedHome(t, engine);
    const shipped = { SVC_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES_IN_TEST_MODE: 'false' };
    const serve = await startServe(t, {
      home,
      args: ['--roles', 'api,dispatcher'],
      env: { ...shipped, SVC_DISPATCHER_POLL_INTERVAL_MS: '100' },
    });
    const target = await startReceiver(t);
    const direct = await serve.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: target.url, enabled_events: ['*'] },
    });
    t.equal(direct.status, 400, "a tenant's endpoint at a loopback receiver is refused");
    t.match(direct.body, { error: { code: 'parameter_invalid', param: 'url' } });

    const { child, lines, stderr, exited } = startListener(t, home, target.url, [], shipped);
    const ready = await waitFor(async () => lines.find((l) => l.type === 'ready'), HANG_GUARD_MS, 50);
    t.ok(ready, `listen is ready ${stderr()}`);
    const link = (await serve.request('POST', '/v1/links', { key: sk, body: linkBody() })).body.id as string;
    const fired = await serve.request('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type: 'link.refreshed', link_id: link },
    });
    t.equal(fired.status, 200);
    const forwarded = await waitFor(
      async () => target.received.find((got) => got.event.id === fired.body.id),
      HANG_GUARD_MS,
      50,
    );
    t.ok(forwarded, 'the listener forwarded the event to the local receiver');
    child.kill('SIGTERM');
    t.equal(await exited, 0);
  });
});
