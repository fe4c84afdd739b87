import t, { type Test } from 'tap';
import { parseApiKey } from '../../src/keys/key-format.js';
import type { ApiKeyView } from '../../src/keys/keys.js';
import type { Organisation } from '../../src/orgs/orgs.js';
import {
  installArgs,
  mapLimit,
  runCli,
  runCliJson,
  startServe,
  waitFor,
  withDatabase,
} from '../helpers/cli.js';
import { forEachEngine, freshDatabase, tableCounts, type TestResponse } from '../helpers/harness.js';

interface AuditRow {
  org_id: string | null;
  actor: string;
  action: string;
  target_type: string | null;
  target_id: string | null;
  details: string | null;
}

interface Issued {
  key: ApiKeyView;
  secret: string;
}

forEachEngine(t, async (t, engine) => {
  const { url, home } = await freshDatabase(t, engine);
  await runCliJson(t, installArgs(engine, url), { home });
  const cli = (args: string[]) => runCli(args, { home });
  const json = <T>(t: Test, args: string[]) => runCliJson<T>(t, args, { home });
  const audit = (targetId: string) =>
    withDatabase(url, (db) =>
      db.knex<AuditRow>('audit_log').where({ target_id: targetId }).orderBy('created_at').orderBy('id'),
    );
  const snapshot = () =>
    withDatabase(url, async (db) => ({
      counts: await tableCounts(db),
      keys: await db.knex('api_keys').select('*').orderBy('id'),
    }));

  const serve = await startServe(t, { home });
  /** Polls the served API until the key answers `status` (a key record is cached for up to 5 s). */
  const answersWithin = async (secret: string, status: number, ms: number) => {
    const started = Date.now();
    const response = await waitFor(
      async () => {
        const r = await serve.request('GET', '/v1/openapi.json', { key: secret });
        return r.status === status ? r : undefined;
      },
      ms,
      250,
    );
    return { response, elapsedMs: Date.now() - started };
  };

  let org: Organisation;
  let live: Issued;
  let rotated: Issued;

  await t.test('orgs create and orgs list', async (t) => {
    org = await json<Organisation>(t, ['orgs', 'create', 'Acme Lending']);
    t.match(org, { object: 'organisation', id: /^org_[0-9a-f]{16}$/, name: 'Acme Lending' });
    const orgs = await json<Organisation[]>(t, ['orgs', 'list']);
    t.equal(orgs.length, 2, 'the default organisation and the new one');
    t.same(
      orgs.find((o) => o.id === org.id),
      org,
      'orgs list shows the organisation as created',
    );
    const rows = await audit(org.id);
    t.match(
      rows,
      [{ action: 'organisation.created', org_id: org.id, actor: /^cli:/ }],
      'creation is audited',
    );

    const text = await cli(['orgs', 'list']);
    t.equal(text.code, 0);
    t.match(text.stdout, org.id, 'the plain listing shows it too');
  });

  await t.test('keys create returns the secret once, and keys list never shows it', async (t) => {
    live = await json<Issued>(t, ['keys', 'create', '--org', org.id, '--mode', 'live', '--type', 'secret']);
    t.match(live.key, {
      object: 'api_key',
      id: /^key_[0-9a-f]{16}$/,
      org_id: org.id,
      mode: 'live',
      type: 'secret',
      status: 'active',
    });
    t.match(live.secret, /^svc_sk_live_[0-9A-Za-z]{38}$/, 'the secret is a live secret key');
    t.ok(parseApiKey(live.secret, 'svc'), 'with a valid checksum');

    const listed = await cli(['keys', 'list', '--json']);
    t.equal(listed.code, 0);
    const keys = JSON.parse(listed.stdout) as ApiKeyView[];
    const mine = keys.find((k) => k.id === live.key.id);
    t.ok(mine, 'keys list shows the key');
    t.equal(mine?.redacted, `svc_sk_live_…${live.secret.slice(-4)}`, 'by prefix and last four');
    t.notOk(listed.stdout.includes(live.secret), 'the secret appears nowhere in keys list --json');
    t.notOk(listed.stdout.includes(live.secret.slice(12, -4)), 'not even its middle part');
    const text = await cli(['keys', 'list', '--org', org.id, '--all']);
    t.equal(text.code, 0);
    t.notOk(text.stdout.includes(live.secret.slice(12, -4)), 'nor in the plain listing');
    t.match(text.stdout, live.key.id);

    t.match(await audit(live.key.id), [{ action: 'api_key.created', org_id: org.id, actor: /^cli:/ }]);
    const [row] = await audit(live.key.id);
    t.notOk(row?.details?.includes(live.secret.slice(12, -4)), 'the audit row holds no secret');

    const served = await serve.request('GET', '/v1/openapi.json', { key: live.secret });
    t.equal(served.status, 200, 'the new key works against the running server');
    t.equal(served.headers.get('x-ratelimit-limit'), '100', 'with the default read limit');
  });

  await t.test('keys limits raises the limit the server applies', async (t) => {
    const limited = await json<ApiKeyView>(t, ['keys', 'limits', live.key.id, '--rate-limit', 'read=1000']);
    t.match(limited.rate_limits, { read: { perMinute: 1000, burst: 200 } });
    // The server caches a key record for up to 5 seconds, and this key was used a moment ago.
    const started = Date.now();
    const raised = await waitFor(
      async () => {
        const r: TestResponse = await serve.request('GET', '/v1/openapi.json', { key: live.secret });
        return r.status === 200 && r.headers.get('x-ratelimit-limit') === '1000' ? r : undefined;
      },
      5000,
      250,
    );
    t.ok(
      raised,
      `a served request shows X-RateLimit-Limit 1000 within 5 seconds (${Date.now() - started} ms)`,
    );
    const listed = await json<ApiKeyView[]>(t, ['keys', 'list']);
    t.match(
      listed.find((k) => k.id === live.key.id),
      { rate_limits: { read: { perMinute: 1000 } } },
    );
    t.match(
      (await audit(live.key.id)).map((r) => r.action),
      ['api_key.created', 'api_key.rate_limits_changed'],
      'the change is audited',
    );
  });

  await t.test('keys rotate --grace 0 replaces the key', async (t) => {
    rotated = await json<Issued & { previous: ApiKeyView }>(t, [
      'keys',
      'rotate',
      live.key.id,
      '--grace',
      '0',
    ]);
    t.not(rotated.key.id, live.key.id, 'a new key id');
    t.not(rotated.secret, live.secret, 'a new secret');
    t.match(rotated.secret, /^svc_sk_live_[0-9A-Za-z]{38}$/);
    t.match(rotated.key, { org_id: org.id, mode: 'live', type: 'secret', rotated_from: live.key.id });
    // Issue 44, item 2: a rotation never hands on more than the organisation's ceiling (read: 100 a minute,
    // burst 20, the default); the operator raises the successor again with svc keys limits if they mean it.
    t.same(
      rotated.key.rate_limits,
      { read: { perMinute: 100, burst: 20 } },
      'the limits carry over, held to the ceiling',
    );
    t.same((rotated as unknown as { limits_lowered: string[] }).limits_lowered, ['read'], 'and it says so');

    const fresh = await serve.request('GET', '/v1/openapi.json', { key: rotated.secret });
    t.equal(fresh.status, 200, 'the new key works at once');
    t.equal(fresh.headers.get('x-ratelimit-limit'), '100', 'with the ceiling as its limit');
    const old = await answersWithin(live.secret, 401, 5000);
    t.ok(old.response, `the old key answers 401 within 5 seconds (${old.elapsedMs} ms)`);

    const listed = await json<ApiKeyView[]>(t, ['keys', 'list', '--org', org.id]);
    t.match(
      listed.find((k) => k.id === live.key.id),
      { status: 'expired', rotated_to: rotated.key.id },
    );
    const trail = await audit(live.key.id);
    t.match(
      trail.map((r) => r.action),
      ['api_key.created', 'api_key.rate_limits_changed', 'api_key.rotated'],
      'the rotation is audited',
    );
    t.match(
      JSON.parse(trail.at(-1)?.details ?? '{}'),
      { successor: rotated.key.id, grace_seconds: 0 },
      'naming the new key and the grace period',
    );
  });

  await t.test('keys revoke stops the key within 5 seconds', async (t) => {
    const before = await serve.request('GET', '/v1/openapi.json', { key: rotated.secret });
    t.equal(before.status, 200, 'the key works before');
    const revoked = await cli(['keys', 'revoke', rotated.key.id]);
    t.equal(revoked.code, 0, 'svc keys revoke succeeds');
    t.match(revoked.stdout, rotated.key.id);
    t.notOk(revoked.stdout.includes(rotated.secret.slice(12, -4)), 'and does not print the secret');
    const after = await answersWithin(rotated.secret, 401, 5000);
    t.ok(after.response, `a served request answers 401 within 5 seconds (${after.elapsedMs} ms)`);
    t.equal(after.response?.body?.error?.type, 'authentication_error');

    const active = await json<ApiKeyView[]>(t, ['keys', 'list', '--org', org.id]);
    t.notOk(
      active.some((k) => k.id === rotated.key.id),
      'keys list leaves revoked keys out',
    );
    const all = await json<ApiKeyView[]>(t, ['keys', 'list', '--org', org.id, '--all']);
    t.match(
      all.find((k) => k.id === rotated.key.id),
      { status: 'revoked', revoked_at: String },
    );
    t.match(
      (await audit(rotated.key.id)).map((r) => r.action),
      ['api_key.created', 'api_key.revoked'],
      'the successor was created by the rotation, and its revocation is audited',
    );
  });

  await t.test('bad input exits non-zero with a clear message and writes nothing', async (t) => {
    const other = await json<Issued>(t, [
      'keys',
      'create',
      '--org',
      org.id,
      '--mode',
      'test',
      '--type',
      'secret',
    ]);
    const before = await snapshot();
    const cases: [string, string[], RegExp][] = [
      [
        'unknown --type',
        ['keys', 'create', '--org', org.id, '--mode', 'live', '--type', 'root'],
        /--type.*secret, publishable/,
      ],
      [
        'unknown --mode',
        ['keys', 'create', '--org', org.id, '--mode', 'prod', '--type', 'secret'],
        /--mode.*test, live/,
      ],
      [
        'malformed --rate-limit on create',
        ['keys', 'create', '--org', org.id, '--mode', 'live', '--type', 'secret', '--rate-limit', 'read'],
        /"read" must look like group=perMinute/,
      ],
      [
        'unknown rate-limit group',
        ['keys', 'create', '--org', org.id, '--mode', 'live', '--type', 'secret', '--rate-limit', 'writes=5'],
        /Unknown rate-limit group "writes"/,
      ],
      [
        'unknown organisation',
        ['keys', 'create', '--org', 'org_0000000000000000', '--mode', 'live', '--type', 'secret'],
        /No organisation org_0000000000000000/,
      ],
      [
        'malformed --rate-limit on limits',
        ['keys', 'limits', other.key.id, '--rate-limit', 'read=lots'],
        /must look like group=perMinute/,
      ],
      [
        'zero rate limit',
        ['keys', 'limits', other.key.id, '--rate-limit', 'read=0'],
        /at least 1 per minute/,
      ],
      [
        'unknown key id on limits',
        ['keys', 'limits', 'key_0000000000000000', '--rate-limit', 'read=1000'],
        /No API key key_0000000000000000/,
      ],
      [
        'unknown key id on rotate',
        ['keys', 'rotate', 'key_0000000000000000', '--grace', '0'],
        /No API key key_0000000000000000/,
      ],
      [
        'unknown key id on revoke',
        ['keys', 'revoke', 'key_0000000000000000'],
        /No API key key_0000000000000000/,
      ],
      ['malformed --grace', ['keys', 'rotate', other.key.id, '--grace', 'soon'], /"soon" is not a duration/],
      ['rotating a revoked key', ['keys', 'rotate', rotated.key.id], /revoked and cannot be rotated/],
      ['an empty organisation name', ['orgs', 'create', '  '], /1 to 200 characters/],
    ];
    // None of these may write, so they can run side by side (three at a time: CLI start-up is the cost).
    const results = await mapLimit(cases, 3, ([, args]) => cli(args));
    for (const [i, [name, , message]] of cases.entries()) {
      const result = results[i]!;
      t.not(result.code, 0, `${name}: exits non-zero`);
      t.match(result.message, message, `${name}: says what is wrong`);
      t.notMatch(result.stdout, /_sk_|_pk_/, `${name}: prints no key`);
    }
    const after = await snapshot();
    t.same(after.counts, before.counts, 'no row was added anywhere, audit_log included');
    t.same(after.keys, before.keys, 'no key was changed');
  });
});
