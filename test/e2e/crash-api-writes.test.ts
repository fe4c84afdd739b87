import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { loadSecretBox } from '../../src/secrets/master-key-file.js';
import { HANG_GUARD_MS, forEachEngine, linkBody, type TestResponse } from '../helpers/harness.js';
import { installedHome, startServe, waitFor, withDatabase } from '../helpers/cli.js';
import { startWorkers } from '../helpers/serve-roles.js';
import {
  CRASH_SERVE_ENV,
  FAST_SCHEDULER_ENV,
  RAISED_LIMITS_ENV,
  TrafficLog,
  timeLimitForRounds,
  crashRounds,
  nextChildPid,
  randomBetween,
  storeProblems,
} from '../helpers/crash.js';

const ROUNDS = crashRounds(4);
const CLIENTS = 4;
/** A request without an answer is sent again (same Idempotency-Key) up to this many times. */
const RETRIES = 100;
// A round took 3 s on an idle machine.
timeLimitForRounds(t, ROUNDS, 30_000, 120_000);

/** What a client knows of one of its links: null where a request got no answer and its effect is unknown. */
interface KnownLink {
  id: string;
  paused: boolean | null;
  deleted: boolean | null;
}

interface KnownEndpoint {
  id: string;
  disabled: boolean | null;
  description: string | null | undefined;
  /** The signing secret of the last create or roll that was answered; undefined once a roll went unanswered. */
  secret: string | undefined;
  deleted: boolean | null;
}

interface IdempotentCreate {
  key: string;
  /** The link id of the first 200, and whether every later answer replayed the same link. */
  linkId: string | null;
  consistent: boolean;
  /** Still `idempotency_key_in_use` after the last retry: the client could not learn the outcome. */
  blocked: boolean;
}

/**
 * `svc serve --roles api` is `kill -9`ed at random moments while four clients send a stream of state changes
 * (links created, paused, resumed, deleted and refreshed; webhook endpoints created, updated, rolled and
 * deleted; sandbox events fired), each retrying an unanswered request with the same Idempotency-Key as a
 * careful client would. A scheduler in a separate `svc serve` syncs the links meanwhile. Afterwards the
 * database is checked: every answered change is there, every change has its events and each event its
 * deliveries (and nothing else), no link is half-created, and no client was ever answered 5xx.
 */
forEachEngine(t, async (t, engine) => {
  const began = Date.now();
  const { database, home, key } = await installedHome(t, engine);
  const env = {
    ...CRASH_SERVE_ENV,
    ...RAISED_LIMITS_ENV,
    ...FAST_SCHEDULER_ENV,
    SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
  };
  const scheduler = await startWorkers(t, { home, roles: 'scheduler', env });
  const api = await startServe(t, { home, args: ['--roles', 'api'], env });
  const traffic = new TrafficLog();
  const send = (method: string, path: string, body?: unknown, idempotencyKey?: string) =>
    traffic.send(api.url, method, path, {
      key,
      body,
      headers: idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {},
    });

  // Endpoints nobody touches during the run: each event must have exactly the deliveries they call for.
  const stable = async (enabled_events: string[], disabled = false) => {
    const created = await send('POST', '/v1/webhook_endpoints', {
      url: 'http://127.0.0.1:9/stable',
      enabled_events,
    });
    if (disabled) await send('PATCH', `/v1/webhook_endpoints/${created!.body.id}`, { disabled: true });
    return created!.body.id as string;
  };
  const everything = await stable(['*']);
  const linkLifecycle = await stable(['link.created', 'link.deleted']);
  const switchedOff = await stable(['*'], true);

  let stopping = false;
  /** Requests cut off by a kill after their change committed, whose retry got the kept answer back. */
  let replayedAfterCut = 0;
  /**
   * Sends until answered: a connection error means the API is down (or died mid-request); the same request,
   * with the same Idempotency-Key, goes again once it is back. A 409 `idempotency_key_in_use` after such a
   * retry means the key is held by a request that died with its process; it is retried a few times.
   */
  const untilAnswered = async (
    method: string,
    path: string,
    body?: unknown,
    idempotencyKey?: string,
  ): Promise<{ response: TestResponse | null; retried: boolean }> => {
    let retried = false;
    for (let attempt = 0; attempt < RETRIES; attempt++) {
      const response = await send(method, path, body, idempotencyKey);
      const held = response?.status === 409 && response.body?.error?.code === 'idempotency_key_in_use';
      if (response && !(held && retried && attempt < 20)) {
        if (retried && response.headers.get('idempotent-replayed') === 'true') replayedAfterCut += 1;
        return { response, retried };
      }
      retried = true;
      await sleep(held ? 100 : 50);
    }
    return { response: null, retried };
  };

  const clients = Array.from({ length: CLIENTS }, async (_, client) => {
    const links: KnownLink[] = [];
    const endpoints: KnownEndpoint[] = [];
    const creates: IdempotentCreate[] = [];
    const fired: string[] = [];
    const refreshes: string[] = [];
    const live = <T extends { deleted: boolean | null }>(items: T[]) =>
      items.filter((i) => i.deleted === false);
    const pick = <T>(items: T[]): T | undefined => items[randomBetween(0, items.length - 1)];
    let n = 0;
    while (!stopping) {
      n += 1;
      const idempotencyKey = `c${client}-${n}-${randomBytes(4).toString('hex')}`;
      const link = pick(live(links));
      const endpoint = pick(live(endpoints));
      const roll = Math.random();
      if (roll < 0.22 || !link) {
        const create: IdempotentCreate = {
          key: idempotencyKey,
          linkId: null,
          consistent: true,
          blocked: false,
        };
        creates.push(create);
        const body = linkBody({ external_user_id: idempotencyKey });
        const { response } = await untilAnswered('POST', '/v1/links', body, idempotencyKey);
        if (response?.status === 200) {
          create.linkId = response.body.id;
          links.push({ id: response.body.id, paused: false, deleted: false });
        } else if (response?.status === 409) create.blocked = true;
        // A few creates are sent again later with the same key: the answer must be the same link.
        if (response?.status === 200 && Math.random() < 0.2) {
          const again = await untilAnswered('POST', '/v1/links', body, idempotencyKey);
          if (again.response && again.response.body?.id !== create.linkId) create.consistent = false;
        }
      } else if (roll < 0.37) {
        const action = Math.random() < 0.5 ? 'pause' : 'resume';
        const { response } = await untilAnswered(
          'POST',
          `/v1/links/${link.id}/${action}`,
          undefined,
          idempotencyKey,
        );
        link.paused = response?.status === 200 ? action === 'pause' : null;
      } else if (roll < 0.45) {
        const { response } = await untilAnswered('DELETE', `/v1/links/${link.id}`);
        // A 404 after a retry: the first, unanswered, delete did it.
        link.deleted = response?.status === 200 || response?.status === 404 ? true : null;
      } else if (roll < 0.53) {
        const { response } = await untilAnswered(
          'POST',
          '/v1/refresh_intents',
          { link_id: link.id, refresh_type: 'only_last' },
          idempotencyKey,
        );
        if (response?.status === 200) refreshes.push(response.body.id);
      } else if (roll < 0.58) {
        const { response } = await untilAnswered(
          'POST',
          '/v1/sandbox/events/fire',
          { type: 'link.expired', link_id: link.id },
          idempotencyKey,
        );
        if (response?.status === 200) fired.push(response.body.id);
      } else if (roll < 0.7 || !endpoint) {
        const types = Math.random() < 0.5 ? ['*'] : ['link.created', 'refresh_intent.created'];
        const { response } = await untilAnswered(
          'POST',
          '/v1/webhook_endpoints',
          { url: `http://127.0.0.1:9/churn/${client}`, enabled_events: types },
          idempotencyKey,
        );
        if (response?.status === 200)
          endpoints.push({
            id: response.body.id,
            disabled: false,
            description: null,
            secret: response.body.secret,
            deleted: false,
          });
      } else if (roll < 0.85) {
        const patch = { disabled: Math.random() < 0.5, description: `v${n}` };
        const { response } = await untilAnswered('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, patch);
        if (response?.status === 200) Object.assign(endpoint, patch);
        else Object.assign(endpoint, { disabled: null, description: undefined });
      } else if (roll < 0.93) {
        const { response } = await untilAnswered(
          'POST',
          `/v1/webhook_endpoints/${endpoint.id}/roll_secret`,
          {},
          idempotencyKey,
        );
        endpoint.secret = response?.status === 200 ? response.body.secret : undefined;
      } else {
        const { response } = await untilAnswered('DELETE', `/v1/webhook_endpoints/${endpoint.id}`);
        endpoint.deleted = response?.status === 200 || response?.status === 404 ? true : null;
      }
      await sleep(randomBetween(0, 10));
    }
    return { links, endpoints, creates, fired, refreshes };
  });

  let killed = 0;
  let last: number | null = null;
  const cutOff: number[] = [];
  const kills = (async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const pid = await nextChildPid(home, api.pid, 'api', last);
      await sleep(randomBetween(300, 1500));
      // Clients back off after a kill; a kill is only a test while a request is in flight.
      await waitFor(async () => (traffic.inFlight > 0 ? true : undefined), HANG_GUARD_MS, 5);
      cutOff.push(traffic.inFlight);
      process.kill(pid, 'SIGKILL');
      killed += 1;
      last = pid;
    }
    await nextChildPid(home, api.pid, 'api', last);
    await sleep(500); // answered traffic after the last restart
  })();
  await kills.finally(() => (stopping = true));
  const seen = await Promise.all(clients);
  const trafficMs = Date.now() - began;

  t.equal(killed, ROUNDS, `${killed} kill -9s of the api during ${traffic.summary()}`);
  t.same(traffic.serverErrors, [], 'no client was ever answered 5xx');
  t.ok(
    cutOff.every((n) => n > 0),
    `every kill cut off requests in flight (${cutOff.join(', ')})`,
  );

  // Stop both processes so that what is checked holds at rest.
  api.process.kill('SIGTERM');
  await Promise.all([api.exited, scheduler.stop()]);

  const links = seen.flatMap((s) => s.links);
  const endpoints = seen.flatMap((s) => s.endpoints);
  const creates = seen.flatMap((s) => s.creates);
  const fired = seen.flatMap((s) => s.fired);
  const refreshes = seen.flatMap((s) => s.refreshes);
  t.comment(
    `${links.length} links, ${endpoints.length} endpoints, ${creates.length} idempotent creates, ${fired.length} fired events, ${refreshes.length} refreshes; ${replayedAfterCut} retries after a kill were answered from the kept answer`,
  );
  const secrets = loadSecretBox({ masterKeyFile: join(home, 'master.key'), masterKey: '' });

  await withDatabase(database.url, async (db) => {
    t.same(await storeProblems(db, home), [], 'every change has its events and deliveries, and nothing else');

    const linkRows = new Map<string, { paused: boolean | number; external_user_id: string | null }>(
      (await db.knex('links').select('id', 'paused', 'external_user_id')).map(
        (row: { id: string; paused: boolean | number; external_user_id: string | null }) => [row.id, row],
      ),
    );
    const lost: string[] = [];
    for (const link of links) {
      const row = linkRows.get(link.id);
      if (link.deleted === true && row) lost.push(`${link.id} was deleted (answered) but exists`);
      if (link.deleted === false && !row) lost.push(`${link.id} was created (answered) but is gone`);
      if (link.deleted === false && row && link.paused !== null && Boolean(row.paused) !== link.paused)
        lost.push(`${link.id} should be ${link.paused ? 'paused' : 'running'}`);
    }
    t.same(lost, [], 'every answered link change is in the database');

    const byKey = new Map<string, string[]>();
    for (const [id, row] of linkRows) {
      if (row.external_user_id)
        byKey.set(row.external_user_id, [...(byKey.get(row.external_user_id) ?? []), id]);
    }
    const duplicates = creates.filter((c) => (byKey.get(c.key)?.length ?? 0) > 1);
    t.same(duplicates, [], 'no Idempotency-Key created two links');
    t.same(
      creates.filter((c) => !c.consistent),
      [],
      'a repeated create with the same key answers the same link',
    );
    const blockedButDone = creates.filter((c) => c.blocked && byKey.has(c.key));
    t.same(
      blockedButDone.map((c) => c.key),
      [],
      'a retry never finds its key held by a dead request whose link was created (it would run again later)',
    );

    const endpointRows = new Map<
      string,
      { disabled: boolean | number; description: string | null; secret_encrypted: string }
    >(
      (await db.knex('webhook_endpoints').select('id', 'disabled', 'description', 'secret_encrypted')).map(
        (row: {
          id: string;
          disabled: boolean | number;
          description: string | null;
          secret_encrypted: string;
        }) => [row.id, row],
      ),
    );
    const endpointLost: string[] = [];
    for (const endpoint of endpoints) {
      const row = endpointRows.get(endpoint.id);
      if (endpoint.deleted === true && row) endpointLost.push(`${endpoint.id} was deleted but exists`);
      if (endpoint.deleted === false && !row) endpointLost.push(`${endpoint.id} was created but is gone`);
      if (endpoint.deleted !== false || !row) continue;
      if (endpoint.disabled !== null && Boolean(row.disabled) !== endpoint.disabled)
        endpointLost.push(`${endpoint.id} should have disabled=${endpoint.disabled}`);
      if (endpoint.description !== undefined && row.description !== endpoint.description)
        endpointLost.push(`${endpoint.id} should be described ${endpoint.description}`);
      if (
        endpoint.secret !== undefined &&
        secrets.open(row.secret_encrypted, endpoint.id) !== endpoint.secret
      )
        endpointLost.push(`${endpoint.id} does not sign with the secret its last roll answered`);
    }
    t.same(endpointLost, [], 'every answered endpoint change (update, roll, delete) is in the database');

    const events: { id: string; type: string }[] = await db.knex('events').select('id', 'type');
    const deliveries: { event_id: string; endpoint_id: string; next_attempt_at: number | null }[] = await db
      .knex('webhook_deliveries')
      .select('event_id', 'endpoint_id', 'next_attempt_at');
    const to = (endpoint: string) =>
      new Set(deliveries.filter((d) => d.endpoint_id === endpoint).map((d) => d.event_id));
    const all = to(everything);
    const lifecycle = to(linkLifecycle);
    t.same(
      events.filter((e) => !all.has(e.id)).map((e) => e.id),
      [],
      `each of ${events.length} events has its delivery to the endpoint subscribed to everything`,
    );
    t.same(
      events
        .filter((e) => lifecycle.has(e.id) !== ['link.created', 'link.deleted'].includes(e.type))
        .map((e) => `${e.type} ${e.id}`),
      [],
      'the endpoint subscribed to link.created and link.deleted has a delivery for exactly those',
    );
    t.equal(to(switchedOff).size, 0, 'the disabled endpoint has no delivery');
    const eventIds = new Set(events.map((e) => e.id));
    t.same(
      fired.filter((id) => !eventIds.has(id)),
      [],
      `every answered sandbox event (${fired.length}) is stored`,
    );
    const intentIds = new Set(
      (await db.knex('refresh_intents').select('id')).map((row: { id: string }) => row.id),
    );
    const deletedLinks = new Set(links.filter((l) => l.deleted !== false).map((l) => l.id));
    const refreshLinks = new Map<string, string>(
      (await db.knex('events').where({ type: 'refresh_intent.created' }).select('data', 'link_id')).map(
        (row: { data: string; link_id: string }) => [JSON.parse(row.data).id as string, row.link_id],
      ),
    );
    t.same(
      refreshes.filter((id) => !intentIds.has(id) && !deletedLinks.has(refreshLinks.get(id) ?? '')),
      [],
      `every answered refresh (${refreshes.length}) has its intent`,
    );
    const held = new Map<string, boolean>([...endpointRows].map(([id, row]) => [id, Boolean(row.disabled)]));
    t.same(
      deliveries
        .filter((d) => held.get(d.endpoint_id) !== (d.next_attempt_at === null))
        .map(
          (d) =>
            `${d.endpoint_id} (disabled: ${held.get(d.endpoint_id)}) ${d.event_id} due ${d.next_attempt_at}`,
        ),
      [],
      "a disabled endpoint's deliveries are held, an enabled one's are due",
    );
  });
  t.comment(`${engine}: ${ROUNDS} kills, ${trafficMs} ms of traffic, ${Date.now() - began} ms in all`);
});
