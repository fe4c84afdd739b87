import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import type { Connector, LoginRequest } from '../../src/banks/connector.js';
import { startBankGateway } from '../../src/banks/gateway/gateway.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';
import { rotateMasterKey, type RetireReport, type RotationReport } from '../../src/secrets/rotate.js';
import {
  HANG_GUARD_MS,
  dumpTables,
  forEachEngine,
  freshDatabase,
  linkBody,
  request,
  type RequestOptions,
  type TestResponse,
} from '../helpers/harness.js';
import {
  installArgs,
  mapLimit,
  runCli,
  startServe,
  useBankGateway,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';
import { atTheBank } from '../helpers/consent-bank.js';
import { openWidget, widgetApi } from '../helpers/widget.js';
import { loadSecretBox } from '../../src/secrets/master-key-file.js';
import { findGrantRow, openGrant } from '../../src/links/consent/grants.js';
import { preSessionToken } from '../helpers/console.js';

/*
 * Canaries: unique random values used as bank passwords, MFA codes, webhook secrets, widget tokens and API
 * keys, pushed through the real CLI and a real `svc serve`. Each may appear only where it is created (the
 * command or response that hands it out); the end of the run looks for every one of them in the logs, every
 * HTTP answer, every CLI output, every table and, on SQLite, the raw database files. Then the master key is
 * rotated under the running server.
 */

const GATEWAY_SECRET = 'gateway-shared-secret-0123456789';
const canary = (kind: string) => `cnry${kind}${randomBytes(9).toString('hex')}`;

/** The sandbox behind the live gateway, taught to take canary passwords and an MFA code for its own. */
function canaryBank(passwords: Record<string, string>, mfaCode: string): Connector {
  const sandbox = createSandboxConnector();
  const asSandbox = (request: LoginRequest): LoginRequest => ({
    ...request,
    credentials: {
      ...request.credentials,
      password: passwords[request.credentials.password] ?? request.credentials.password,
    },
  });
  return {
    ...sandbox,
    login: (request) => sandbox.login(asSandbox(request)),
    submitMfa: (request, challenge, code) =>
      sandbox.submitMfa(asSandbox(request), challenge, code === mfaCode ? '123456' : code),
  };
}

/** One bit of the ciphertext part of a sealed value, flipped. */
function flipBit(sealed: string): string {
  const parts = sealed.split('.');
  const body = Buffer.from(parts[4]!, 'base64url');
  body[0] = body[0]! ^ 1;
  parts[4] = body.toString('base64url');
  return parts.join('.');
}

const SEALED = /\bv1\.(mk_[A-Za-z0-9]+)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

/** The key id of every sealed value anywhere in the database, whatever its column. */
function sealedKeyIds(dump: Record<string, string>): { table: string; keyId: string }[] {
  return Object.entries(dump).flatMap(([table, text]) =>
    [...text.matchAll(SEALED)].map((match) => ({ table, keyId: match[1]! })),
  );
}

/** Every file under `dir`, for a search of its raw bytes (the SQLite file and its WAL among them). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

interface Output {
  label: string;
  text: string;
  /** The canaries this output hands out, and so may show. */
  allowed: string[];
}

interface Intent {
  id: string;
  status: string;
  error_code: string | null;
}

forEachEngine(t, async (t, engine) => {
  const database = await freshDatabase(t, engine);
  const home = database.home;
  const keyFile = join(home, 'master.key');
  // The whole log, not the tail startServe keeps: a file under the data directory, searched with the rest.
  const logFile = join(home, 'serve.log');
  const keyIds = () => (JSON.parse(readFileSync(keyFile, 'utf8')).keys as { id: string }[]).map((k) => k.id);
  const canaries = new Map<string, string>();
  const outputs: Output[] = [];

  const svc = async (args: string[], allowed: string[] = [], env?: Record<string, string>) => {
    const result = await runCli(args, { home, env });
    outputs.push({ label: `svc ${args.join(' ')}`, text: result.stdout + result.stderr, allowed });
    return result;
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSON output
  const svcJson = async <T = any>(t: Test, args: string[], allowed: string[] = []): Promise<T> => {
    const result = await svc([...args, '--json'], allowed);
    t.equal(result.code, 0, `svc ${args.join(' ')} succeeds`, { stderr: result.stderr });
    return JSON.parse(result.stdout) as T;
  };

  // The canary keys: the installed ones, one created, one rotated from it, and one revoked.
  const installed = await svcJson<{ keys: { secret: string; publishable: string } }>(
    t,
    installArgs(engine, database.url),
  );
  canaries.set('installed secret key', installed.keys.secret);
  canaries.set('installed publishable key', installed.keys.publishable);
  outputs.at(-1)!.allowed.push(installed.keys.secret, installed.keys.publishable);
  // The consent client's private key (the test CA's, made by install; svc serve registers with the simulated
  // bank and seals it in consent_clients): a line of its body may appear only in its own file.
  const clientKeyFile = join(home, 'consent-bank', 'client-key.pem');
  const clientKeyLine = readFileSync(clientKeyFile, 'utf8').split('\n')[1]!;
  canaries.set('consent client private key', clientKeyLine);
  const createKey = async (mode: string) => {
    const created = await svcJson<{ key: { id: string }; secret: string }>(t, [
      'keys',
      'create',
      '--mode',
      mode,
      '--type',
      'secret',
      ...['read', 'sync_write', 'resource_write', 'widget_tokens'].flatMap((group) => [
        '--rate-limit',
        `${group}=100000`,
      ]),
    ]);
    outputs.at(-1)!.allowed.push(created.secret);
    return created;
  };
  const live = await createKey('live');
  canaries.set('live key', live.secret);
  const toRotate = await createKey('test');
  canaries.set('test key before rotation', toRotate.secret);
  const rotated = await svcJson<{ secret: string }>(t, ['keys', 'rotate', toRotate.key.id, '--grace', '1h']);
  outputs.at(-1)!.allowed.push(rotated.secret);
  canaries.set('rotated test key', rotated.secret);
  const revoked = await createKey('test');
  canaries.set('revoked key', revoked.secret);
  await svc(['keys', 'revoke', revoked.key.id]);
  const sk = rotated.secret;
  const liveKey = live.secret;

  const passwordOk = canary('pwok');
  const passwordMfa = canary('pwmfa');
  const passwordBad = canary('pwbad');
  const passwordInvalid = canary('pwinv');
  const mfaBad = canary('mfabad');
  const mfaOk = canary('mfaok');
  for (const [name, value] of Object.entries({
    passwordOk,
    passwordMfa,
    passwordBad,
    passwordInvalid,
    mfaBad,
    mfaOk,
  }))
    canaries.set(name, value);

  const gateway = await startBankGateway({
    host: '127.0.0.1',
    port: 0,
    secret: GATEWAY_SECRET,
    connector: canaryBank({ [passwordOk]: 'sandbox', [passwordMfa]: 'sandbox-mfa' }, mfaOk),
  });
  t.teardown(() => gateway.close());
  useBankGateway(home, { url: gateway.url, secret: GATEWAY_SECRET });

  const serve = await startServe(t, {
    home,
    env: {
      SVC_LOG_LEVEL: 'debug',
      SVC_LOG_FILE: logFile,
      SVC_SCHEDULER_CRON: '* * * * * *',
      SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
      SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
      SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
      // One code per MFA wait, so a wrong code ends the refresh at once (the default allows 3).
      SVC_REFRESH_MFA_ATTEMPTS: '1',
    },
  });
  const receiver = await startReceiver(t);

  const api = async (method: string, path: string, options: RequestOptions = {}, allowed: string[] = []) => {
    const response = await request(serve.url, method, path, options);
    outputs.push({
      label: `${method} ${path} → ${response.status}`,
      text: response.text + JSON.stringify([...response.headers]),
      allowed,
    });
    return response;
  };
  const expectOk = (t: Test, response: TestResponse, what: string) =>
    t.ok(response.status < 300, `${what}: ${response.status}`, { body: response.text });
  const linkOf = async (id: string, key = liveKey) => (await api('GET', `/v1/links/${id}`, { key })).body;
  const intentSettles = (id: string, statuses: string[], key = liveKey) =>
    waitFor(async () => {
      const intent = (await api('GET', `/v1/refresh_intents/${id}`, { key })).body as Intent;
      return statuses.includes(intent.status) ? intent : undefined;
    }, HANG_GUARD_MS);
  const refresh = async (t: Test, linkId: string, key = liveKey) => {
    // A link whose last sync has not finished refuses a refresh; wait for it to be idle first.
    await waitFor(
      async () => ((await linkOf(linkId, key)).refresh_status === 'idle' ? true : undefined),
      HANG_GUARD_MS,
    );
    const created = await api('POST', '/v1/refresh_intents', { key, body: { link_id: linkId } });
    expectOk(t, created, `refresh ${linkId}`);
    return created.body as Intent;
  };
  const sealedValue = (table: string, id: string, column: string) =>
    withDatabase(database.url, async (db) => (await db.knex(table).where({ id }).first())[column] as string);
  const dump = () => withDatabase(database.url, dumpTables);

  let endpoint: { id: string; secret: string } = { id: '', secret: '' };
  let rolledSecret = '';
  const endpointBody = { url: receiver.url, enabled_events: ['*'] };
  const endpointKey = `create-endpoint-${randomBytes(4).toString('hex')}`;
  let linkOk = '';
  let linkMfa = '';
  let linkBad = '';
  let waitingIntent = '';

  t.test('flows: webhook secrets, bank passwords, MFA codes, widget tokens', async (t) => {
    const created = await api(
      'POST',
      '/v1/webhook_endpoints',
      { key: sk, body: endpointBody, headers: { 'Idempotency-Key': endpointKey } },
      [],
    );
    expectOk(t, created, 'endpoint');
    endpoint = created.body;
    outputs.at(-1)!.allowed.push(endpoint.secret);
    canaries.set('webhook secret', endpoint.secret);
    const rolled = await api('POST', `/v1/webhook_endpoints/${endpoint.id}/roll_secret`, {
      key: sk,
      body: { grace_seconds: 3600 },
      headers: { 'Idempotency-Key': `roll-${endpointKey}` },
    });
    expectOk(t, rolled, 'roll');
    rolledSecret = rolled.body.secret;
    outputs.at(-1)!.allowed.push(rolledSecret);
    canaries.set('rolled webhook secret', rolledSecret);

    const widget = await api('POST', '/v1/widget_tokens', {
      key: sk,
      body: {},
      headers: { 'Idempotency-Key': `widget-${endpointKey}` },
    });
    expectOk(t, widget, 'widget token');
    outputs.at(-1)!.allowed.push(widget.body.token);
    canaries.set('widget token', widget.body.token);

    const link = async (key: string, password: string, rut = '11.111.111-1') => {
      const response = await api('POST', '/v1/links', {
        key,
        body: linkBody({ credentials: { rut, password } }),
      });
      expectOk(t, response, `link with ${password.slice(0, 8)}…`);
      return response.body.id as string;
    };
    linkOk = await link(liveKey, passwordOk);
    linkMfa = await link(liveKey, passwordMfa, '22.222.222-2');
    linkBad = await link(sk, passwordBad);
    const settled = (id: string, key: string) =>
      waitFor(async () => {
        const current = await linkOf(id, key);
        return current.last_synced_at || current.last_error_code ? current : undefined;
      }, HANG_GUARD_MS);
    t.match(
      await settled(linkOk, liveKey),
      { status: 'active', last_error_code: null },
      'canary password logs in',
    );
    t.match(await settled(linkMfa, liveKey), { status: 'active', last_error_code: null });
    t.match(
      await settled(linkBad, sk),
      { last_error_code: 'rejected_credentials' },
      'a wrong password fails',
    );

    // Refused requests that carry a canary: none of them may echo it.
    const invalidRut = await api('POST', '/v1/links', {
      key: liveKey,
      body: linkBody({ credentials: { rut: '11.111.111-2', password: passwordInvalid } }),
    });
    t.equal(invalidRut.status, 400, 'a bad RUT');
    const unavailable = await api('POST', '/v1/links', {
      key: liveKey,
      body: linkBody({ bank_id: 'bci', credentials: { rut: '11.111.111-1', password: passwordInvalid } }),
    });
    t.equal(unavailable.status, 400, 'a bank without a live connector');
    const truncated = await api('POST', '/v1/links', {
      key: liveKey,
      rawBody: `{"bank_id":"bancochile","credentials":{"rut":"11.111.111-1","password":"${passwordInvalid}"`,
      headers: { 'content-type': 'application/json' },
    });
    t.equal(truncated.status, 400, 'a body cut short');
    const tooLong = await api('POST', '/v1/links', {
      key: liveKey,
      body: linkBody({ credentials: { rut: '11.111.111-1', password: passwordInvalid.repeat(12) } }),
    });
    t.equal(tooLong.status, 400, 'a password over 256 characters');
    const revokedCall = await api('GET', '/v1/links', { key: revoked.secret });
    t.equal(revokedCall.status, 401, 'a revoked key');
    const wrongScope = await api('GET', '/v1/links', { key: installed.keys.publishable });
    t.equal(wrongScope.status, 403, 'a publishable key');

    // MFA: a wrong code fails the refresh; a new one waits for a code through the rotation below.
    const first = await refresh(t, linkMfa);
    t.match(await intentSettles(first.id, ['requires_mfa', 'failed', 'succeeded']), {
      status: 'requires_mfa',
    });
    const wrong = await api('POST', `/v1/refresh_intents/${first.id}/mfa`, {
      key: liveKey,
      body: { code: mfaBad },
    });
    expectOk(t, wrong, 'a wrong code is taken');
    t.match(await intentSettles(first.id, ['failed', 'succeeded']), {
      status: 'failed',
      error_code: 'mfa_invalid',
    });
    const late = await api('POST', `/v1/refresh_intents/${first.id}/mfa`, {
      key: liveKey,
      body: { code: mfaBad },
    });
    t.equal(late.status, 409, 'a code for a finished refresh');
    const second = await refresh(t, linkMfa);
    t.match(await intentSettles(second.id, ['requires_mfa', 'failed', 'succeeded']), {
      status: 'requires_mfa',
    });
    waitingIntent = second.id;
  });

  let consentLinkId = '';
  t.test('a consent link through the widget: its code, tokens and grant id', async (t) => {
    const token = await api('POST', '/v1/widget_tokens', { key: sk, body: {} });
    outputs.at(-1)!.allowed.push(token.body.token);
    const opened = await openWidget({ url: serve.url }, token.body.token);
    t.equal(opened.status, 200, 'the widget opens');
    const session = opened.bootstrap.session as string;
    const started = await widgetApi({ url: serve.url }, session, 'POST', 'consent', {
      bank_id: 'bancoabierto',
    });
    t.equal(started.status, 200, started.text);
    const { callback } = await atTheBank(
      started.body.authorization_url,
      `${serve.url}/widget/consent/callback`,
    );
    const callbackUrl = new URL(callback);
    canaries.set('consent authorization code', callbackUrl.searchParams.get('code')!);
    canaries.set('consent state', callbackUrl.searchParams.get('state')!);
    t.equal((await fetch(callback)).status, 200, 'the callback takes the code');
    const succeeded = await waitFor(async () => {
      const status = await widgetApi({ url: serve.url }, session, 'GET', 'status');
      return status.body.state === 'succeeded' ? status.body : undefined;
    }, HANG_GUARD_MS);
    t.ok(succeeded.accounts_count > 0, 'the first sync read the bank API');
    const finished = await widgetApi({ url: serve.url }, session, 'POST', 'finish');
    outputs.push({ label: 'widget finish', text: finished.text, allowed: [finished.body.exchange_token] });
    const exchanged = await api('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, { key: sk });
    consentLinkId = exchanged.body.id as string;
    // What the appliance holds for the link, opened with the master key as only the server does.
    const secrets = loadSecretBox({ masterKeyFile: keyFile, masterKey: '' });
    const grant = openGrant(
      (await withDatabase(database.url, (db) => findGrantRow(db.knex, consentLinkId)))!,
      secrets,
    );
    canaries.set('consent grant id', grant.grantId);
    canaries.set('consent access token', grant.accessToken);
    if (grant.refreshToken) canaries.set('consent refresh token', grant.refreshToken);
    await svc(['links', 'inspect', consentLinkId]);
    await svc(['links', 'inspect', consentLinkId, '--json']);
    await api('GET', `/v1/links/${consentLinkId}`, { key: sk });
    t.equal((await api('DELETE', `/v1/links/${consentLinkId}`, { key: sk })).status, 200, 'deleted');
    const revoked = await waitFor(async () => {
      const inspected = await svc(['links', 'inspect', consentLinkId, '--json']);
      const view = JSON.parse(inspected.stdout || '{}') as { grant_revocation?: { status: string } };
      return view.grant_revocation?.status === 'revoked' ? view : undefined;
    }, HANG_GUARD_MS);
    t.match(
      revoked,
      { deleted: true, grant_revocation: { status: 'revoked' } },
      'the grant is revoked at the bank',
    );
    await svc(['links', 'inspect', consentLinkId]);
  });

  t.test('a flipped bit in stored credentials fails the sync with a clear error, nothing else', async (t) => {
    const original = await sealedValue('links', linkOk, 'credentials_encrypted');
    await withDatabase(database.url, (db) =>
      db
        .knex('links')
        .where({ id: linkOk })
        .update({ credentials_encrypted: flipBit(original) }),
    );
    const intent = await refresh(t, linkOk);
    t.match(
      await intentSettles(intent.id, ['succeeded', 'failed']),
      { status: 'failed', error_code: 'credentials_unreadable' },
      'the refresh fails, saying why',
    );
    t.match(
      await linkOf(linkOk),
      { status: 'active', refresh_status: 'idle', last_error_code: 'credentials_unreadable' },
      'the link says so too, and is not expired for it',
    );
    t.equal((await api('GET', '/health')).status, 200, 'the server is up');
    const status = await svcJson<{ processes: { role: string; status: string; restarts: number }[] }>(t, [
      'status',
    ]);
    t.same(
      status.processes.filter((p) => p.restarts > 0 || p.status !== 'running'),
      [],
      'no process crashed or restarted',
    );

    await withDatabase(database.url, (db) =>
      db.knex('links').where({ id: linkOk }).update({ credentials_encrypted: original }),
    );
    const again = await refresh(t, linkOk);
    t.match(
      await intentSettles(again.id, ['succeeded', 'failed']),
      { status: 'succeeded' },
      'restored, it syncs',
    );
  });

  let firstRotation: RotationReport;

  t.test('svc master-key rotate re-seals every secret under a running server', async (t) => {
    const [k1] = keyIds();
    const before = sealedKeyIds(await dump());
    t.ok(before.length >= 7, `${before.length} sealed values before`);
    t.same([...new Set(before.map((v) => v.keyId))], [k1], 'all on the installed key');

    firstRotation = await svcJson<RotationReport>(t, ['master-key', 'rotate']);
    t.match(firstRotation, { created: true, remaining: 0 });
    t.same(firstRotation.previous_key_ids, [k1]);
    t.same(firstRotation.unreadable, [], 'every value opened');
    const k2 = firstRotation.key_id;
    t.not(k2, k1);
    t.same(keyIds(), [k1, k2], 'the old key stays in the file');
    t.match(firstRotation.resealed, {
      'links.credentials_encrypted': 3,
      'webhook_endpoints.secret_encrypted': 1,
      'webhook_endpoints.previous_secret_encrypted': 1,
      'refresh_intents.mfa_challenge_encrypted': 1,
      'refresh_intents.mfa_token_encrypted': 1,
    });
    const after = sealedKeyIds(await dump());
    t.same(
      after.filter((v) => v.keyId !== k2),
      [],
      'every sealed value in every table now names the new key',
    );
    t.equal(after.length, firstRotation.resealed_total, 'and the rotation counted every one of them');
    const audit = await withDatabase(database.url, (db) =>
      db
        .knex('audit_log')
        .where('action', 'like', 'master_key.%')
        .orderBy('created_at')
        .select('action', 'target_id'),
    );
    t.same(audit, [
      { action: 'master_key.created', target_id: k2 },
      { action: 'master_key.rotated', target_id: k2 },
    ]);

    // The server started before the rotation: it opens what was re-sealed, and seals with the new key.
    const code = await api('POST', `/v1/refresh_intents/${waitingIntent}/mfa`, {
      key: liveKey,
      body: { code: mfaOk },
    });
    expectOk(t, code, 'the MFA code');
    t.match(
      await intentSettles(waitingIntent, ['succeeded', 'failed']),
      { status: 'succeeded' },
      'the MFA refresh resumes from its re-sealed challenge',
    );
    const synced = await refresh(t, linkOk);
    t.match(
      await intentSettles(synced.id, ['succeeded', 'failed']),
      { status: 'succeeded' },
      'the link syncs',
    );
    const fresh = await api('POST', '/v1/links', {
      key: liveKey,
      body: linkBody({ credentials: { rut: '55.555.555-5', password: passwordOk } }),
    });
    expectOk(t, fresh, 'a link created after the rotation');
    t.match(await sealedValue('links', fresh.body.id, 'credentials_encrypted'), new RegExp(`^v1\\.${k2}\\.`));

    const replay = await api(
      'POST',
      '/v1/webhook_endpoints',
      { key: sk, body: endpointBody, headers: { 'Idempotency-Key': endpointKey } },
      [endpoint.secret],
    );
    t.equal(replay.headers.get('idempotent-replayed'), 'true');
    t.equal(replay.body.secret, endpoint.secret, 'an idempotent replay still answers the first response');

    const fired = await api('POST', '/v1/sandbox/events/fire', {
      key: sk,
      body: { type: 'link.refreshed', link_id: linkBad },
    });
    expectOk(t, fired, 'fire');
    const delivered = await waitFor(
      async () => receiver.received.find((r) => r.event?.id === fired.body.id),
      HANG_GUARD_MS,
    );
    t.ok(delivered, 'delivered');
    const header = delivered!.headers['svc-signature'];
    t.equal(independentlyVerified(delivered!.body, header, rolledSecret), 1, 'signed with the same secret');
    t.equal(independentlyVerified(delivered!.body, header, endpoint.secret), 1, 'and the one in its grace');
  });

  t.test('retire, rotate --retire-old, an interrupted rotation, and SVC_MASTER_KEY', async (t) => {
    const [k1, k2] = keyIds();
    const retired = await svcJson<RetireReport>(t, ['master-key', 'retire']);
    t.match(retired, { key_id: k2 });
    t.same(retired.retired, [k1]);
    t.same(retired.unreadable, []);
    t.same(keyIds(), [k2], 'the file holds the active key only');
    const synced = await refresh(t, linkOk);
    t.match(await intentSettles(synced.id, ['succeeded', 'failed']), { status: 'succeeded' });

    const second = await svcJson<RotationReport>(t, ['master-key', 'rotate', '--retire-old']);
    const k3 = second.key_id;
    t.match(second, { created: true, remaining: 0 });
    t.same(second.retired, [k2]);
    t.same(second.unreadable, []);
    t.same(keyIds(), [k3]);
    t.same(
      sealedKeyIds(await dump()).filter((v) => v.keyId !== k3),
      [],
      'every sealed value names the newest key',
    );
    const again = await refresh(t, linkOk);
    t.match(await intentSettles(again.id, ['succeeded', 'failed']), { status: 'succeeded' });

    // Killed half-way: the file already holds the new key, some rows use it, and nothing is lost.
    let batches = 0;
    await withDatabase(database.url, async (db) => {
      await t.rejects(
        rotateMasterKey(
          db,
          { masterKeyFile: keyFile, masterKey: '' },
          {
            actor: 'test',
            now: Date.now,
            batchSize: 1,
            onProgress: ({ done }) => {
              if (done > 0 && ++batches === 2) throw new Error('killed');
            },
          },
        ),
        /killed/,
      );
    });
    const [, k4] = keyIds();
    t.ok(k4, 'the new key was written first');
    const mixed = sealedKeyIds(await dump());
    t.same(new Set(mixed.map((v) => v.keyId)), new Set([k3, k4]), 'values on both keys');
    const midway = await refresh(t, linkOk);
    t.match(await intentSettles(midway.id, ['succeeded', 'failed']), { status: 'succeeded' }, 'still syncs');
    const resumed = await svcJson<RotationReport>(t, ['master-key', 'rotate']);
    t.match(
      resumed,
      { created: false, key_id: k4, remaining: 0 },
      'running it again finishes the same rotation',
    );
    t.equal(
      resumed.resealed_total,
      mixed.filter((v) => v.keyId === k3).length,
      'and re-seals only what was left',
    );
    t.same(
      sealedKeyIds(await dump()).filter((v) => v.keyId !== k4),
      [],
    );
    t.same((await svcJson<RetireReport>(t, ['master-key', 'retire'])).retired, [k3]);

    const fromEnv = await svc(['master-key', 'rotate'], [], {
      SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    });
    t.not(fromEnv.code, 0, 'refused when the key comes from SVC_MASTER_KEY');
    t.match(fromEnv.message, /SVC_MASTER_KEY.*key file.*docs\/security\.md/);
    t.same(keyIds(), [k4], 'the key file is untouched');
  });

  t.test('the console: an invitation link, a password and a key issued there', async (t) => {
    const invited = await svcJson<{ invitation_url: string }>(t, [
      'console',
      'users',
      'create',
      '--email',
      'ops@example.com',
      '--role',
      'operator',
    ]);
    const invitation = invited.invitation_url.split('/').at(-1)!;
    canaries.set('console invitation', invitation);
    outputs.at(-1)!.allowed.push(invitation);
    const password = canary('cpw');
    const wrongPassword = canary('cpwbad');
    canaries.set('console password', password);
    canaries.set('wrong console password', wrongPassword);
    /** A console request; its answer (body and headers) is searched at the end like every other. */
    const preSession = await preSessionToken(serve.url);
    const consolePage = async (method: string, path: string, form?: Record<string, string>, cookie = '') => {
      // The sign-in and invitation forms carry the pre-session token the sign-in page handed out.
      const beforeSession = path === '/console/login' || path.startsWith('/console/accept/');
      const response = await fetch(`${serve.url}${path}`, {
        method,
        redirect: 'manual',
        headers: {
          cookie: beforeSession ? preSession.cookie : cookie,
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        body: form
          ? new URLSearchParams(beforeSession ? { _csrf: preSession.token, ...form } : form).toString()
          : undefined,
      });
      const text = await response.text();
      outputs.push({
        label: `console ${method} ${path}`,
        text: text + JSON.stringify([...response.headers]),
        allowed: [],
      });
      return {
        status: response.status,
        text,
        cookie:
          response.headers
            .getSetCookie()
            .find((set) => set.startsWith('svc_console='))
            ?.split(';')[0] ?? '',
      };
    };
    const accepted = await consolePage('POST', `/console/accept/${invitation}`, {
      password,
      confirm: password,
    });
    t.equal(accepted.status, 303, 'the invitation sets the password');
    const wrong = await consolePage('POST', '/console/login', {
      email: 'ops@example.com',
      password: wrongPassword,
    });
    t.equal(wrong.status, 401, 'a wrong password is refused');
    const signedIn = await consolePage('POST', '/console/login', { email: 'ops@example.com', password });
    t.equal(signedIn.status, 303, 'the right one signs in');
    const orgs = await consolePage('GET', '/console/orgs', undefined, signedIn.cookie);
    const org = /\/console\/o\/(org_[0-9a-f]{16})\/test/.exec(orgs.text)![1]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(orgs.text)![1]!;
    const issued = await consolePage(
      'POST',
      `/console/o/${org}/test/keys`,
      { _csrf: csrf, type: 'secret', name: 'from the console' },
      signedIn.cookie,
    );
    const key = /<code id="secret-value">([^<]+)<\/code>/.exec(issued.text)![1]!;
    canaries.set('console-issued key', key);
    outputs.at(-1)!.allowed.push(key);
    t.equal((await api('GET', '/v1/links', { key })).status, 200, 'the key issued in the console works');
    await consolePage('GET', `/console/o/${org}/test/keys`, undefined, signedIn.cookie);

    // A webhook endpoint made in the console, and its secret rolled there: each secret is in the one answer
    // that hands it out, and in no other page, log line or table.
    const hooks = `/console/o/${org}/test/webhooks`;
    const made = await consolePage(
      'POST',
      hooks,
      { _csrf: csrf, url: receiver.url, description: 'from the console', 'event:link:deleted': '1' },
      signedIn.cookie,
    );
    t.equal(made.status, 200, 'the console creates an endpoint');
    const hookSecret = /<code id="secret-value">([^<]+)<\/code>/.exec(made.text)![1]!;
    canaries.set('console endpoint secret', hookSecret);
    outputs.at(-1)!.allowed.push(hookSecret);
    const hookId = /<strong>[^<]*?(we_[0-9a-f]{16})/.exec(made.text)![1]!;
    const rolledHere = await consolePage(
      'POST',
      `${hooks}/${hookId}/roll`,
      { _csrf: csrf, grace_hours: '1' },
      signedIn.cookie,
    );
    const rolledHookSecret = /<code id="secret-value">([^<]+)<\/code>/.exec(rolledHere.text)![1]!;
    t.not(rolledHookSecret, hookSecret, 'the roll hands out a new secret');
    canaries.set('console-rolled endpoint secret', rolledHookSecret);
    outputs.at(-1)!.allowed.push(rolledHookSecret);
    for (const path of [hooks, `${hooks}/${hookId}`, `${hooks}/deliveries`, `/console/o/${org}/test/audit`])
      await consolePage('GET', path, undefined, signedIn.cookie);
  });

  t.test('no canary is anywhere it was not handed out', async (t) => {
    const linkIds = [linkOk, linkMfa, linkBad];
    await mapLimit(
      [
        ['keys', 'list', '--all'],
        ['keys', 'list', '--all', '--json'],
        ['webhooks', 'endpoints'],
        ['webhooks', 'endpoints', '--json'],
        ['webhooks', 'deliveries', '--json'],
        ['orgs', 'list', '--json'],
        ['links', 'list', '--json'],
        ['status', '--json'],
        ['status'],
        ...linkIds.map((id) => ['links', 'inspect', id]),
        ['links', 'inspect', linkOk, '--json'],
      ],
      3,
      (args) => svc(args),
    );
    for (const key of [sk, liveKey]) {
      for (let page = 1; ; page++) {
        const events = await api('GET', `/v1/events?per_page=300&page=${page}`, { key });
        if (events.body.length === 0) break;
      }
      await api('GET', '/v1/webhook_deliveries?per_page=300', { key });
      await api('GET', '/v1/links?per_page=300', { key });
      await api('GET', `/v1/webhook_endpoints/${endpoint.id}`, { key });
    }
    await api('GET', `/v1/refresh_intents/${waitingIntent}`, { key: liveKey });

    // Read while the server runs (SQLite's WAL is checkpointed away when the last connection closes), and
    // again once it has stopped cleanly, which writes out the log's last batch.
    const running = filesUnder(home).map((path) => ({
      path: `${path} (running)`,
      bytes: readFileSync(path),
    }));
    serve.process.kill('SIGTERM');
    t.match(await serve.exited, { code: 0 }, 'svc serve stops cleanly');
    const log = readFileSync(logFile, 'utf8');
    t.match(
      log,
      new RegExp(`"link":"${linkOk}".*stored secrets do not open`),
      'the operator log named the link whose credentials did not open',
    );

    const tables = await dump();
    const files = [...running, ...filesUnder(home).map((path) => ({ path, bytes: readFileSync(path) }))];
    const places: { where: string; text: string | Buffer; allowed: string[] }[] = [
      ...outputs.map((o) => ({ where: o.label, text: o.text, allowed: o.allowed })),
      { where: 'svc serve stdout', text: serve.stdout(), allowed: [] },
      { where: 'svc serve stderr', text: serve.stderr(), allowed: [] },
      ...receiver.received.map((r) => ({
        where: `webhook ${r.event?.type}`,
        text: r.body + JSON.stringify(r.headers),
        allowed: [],
      })),
      ...Object.entries(tables).map(([table, text]) => ({ where: `table ${table}`, text, allowed: [] })),
      ...files.map((f) => ({
        where: `file ${f.path}`,
        text: f.bytes,
        allowed: f.path.startsWith(clientKeyFile) ? [clientKeyLine] : [], // also its "(running)" copy
      })),
    ];
    const logLines = log.split('\n').length;
    if (engine === 'sqlite') {
      t.ok(
        files.some((f) => f.path.endsWith('svc.db-wal (running)')),
        'the WAL is among the files searched',
      );
      t.ok(
        files.some((f) => f.bytes.includes(linkOk)),
        'the raw database files are searchable (a link id is found in them)',
      );
    }
    t.ok(logLines > 50, `the log has ${logLines} lines to search`);
    t.match(
      tables.consent_clients,
      /bancoabierto/,
      'svc serve registered with its simulated bank (the key is sealed there)',
    );
    for (const [name, value] of canaries) {
      const found = places
        .filter((p) => !p.allowed.includes(value) && p.text.includes(value))
        .map((p) => p.where);
      t.same(found, [], `${name} appears nowhere else`);
      const handedOut = places.filter((p) => p.allowed.includes(value));
      // The search itself works: where a canary was handed out, it is found.
      t.ok(
        handedOut.every((p) => p.text.includes(value)),
        `${name}: found where it was handed out (${handedOut.length})`,
      );
    }
    t.comment(
      `searched ${canaries.size} canaries in ${places.length} places (${outputs.length} outputs, ${Object.keys(tables).length} tables, ${files.length} files)`,
    );
  });
});
