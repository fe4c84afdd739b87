import t from 'tap';
import type { Test } from 'tap';
import { ManualClock } from '../../src/clock/clock.js';
import { revokeApiKey } from '../../src/keys/keys.js';
import {
  createTenant,
  forEachEngine,
  freshDatabase,
  startTestApp,
  tableCounts,
  type TestApp,
  type TestResponse,
} from '../helpers/harness.js';

const PATH = '/v1/openapi.json';

async function burst(app: TestApp, key: string, count: number): Promise<TestResponse[]> {
  const responses: TestResponse[] = [];
  for (let i = 0; i < count; i++) responses.push(await app.request('GET', PATH, { key }));
  return responses;
}

function statuses(responses: TestResponse[]): number[] {
  return responses.map((r) => r.status);
}

function expect429(t: Test, response: TestResponse, label: string): number {
  t.equal(response.status, 429, `${label}: 429`);
  t.equal(response.body?.error?.type, 'rate_limit_error', `${label}: error.type`);
  t.equal(response.body?.error?.code, 'rate_limit_exceeded', `${label}: error.code`);
  t.type(response.body?.error?.message, 'string', `${label}: message`);
  const retryAfter = Number(response.headers.get('retry-after'));
  t.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1,
    `${label}: Retry-After ${retryAfter} is at least 1 s`,
  );
  return retryAfter;
}

forEachEngine(t, async (t, engine) => {
  // One server for the tests that need no special configuration; each uses its own organisation.
  const app = await startTestApp(t, engine);

  t.test('the read group allows a burst of 20, then 429 until Retry-After has passed', async (t) => {
    const tenant = await createTenant(app);
    const key = tenant.keys.sk_test.secret;
    const before = await tableCounts(app.db);
    const responses = await burst(app, key, 21);
    const first20 = responses.slice(0, 20);
    t.same(statuses(first20), Array(20).fill(200), 'the first 20 succeed');
    t.same(
      first20.map((r) => r.headers.get('x-ratelimit-limit')),
      Array(20).fill('100'),
      'X-RateLimit-Limit is the read limit, 100 per minute',
    );
    t.same(
      first20.map((r) => Number(r.headers.get('x-ratelimit-remaining'))),
      [19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
      'X-RateLimit-Remaining counts down',
    );
    const nowSeconds = app.clock.now() / 1000;
    for (const response of first20) {
      const reset = Number(response.headers.get('x-ratelimit-reset'));
      if (!(Number.isInteger(reset) && reset > nowSeconds && reset <= nowSeconds + 60)) {
        t.fail(`X-RateLimit-Reset ${reset} is not a Unix second within the next minute of ${nowSeconds}`);
      }
    }
    t.pass('every X-RateLimit-Reset is a Unix second in the near future');

    const refused = responses[20]!;
    const retryAfter = expect429(t, refused, '21st request');
    t.equal(refused.headers.get('x-ratelimit-limit'), '100', 'a 429 still says the limit');
    t.equal(refused.headers.get('x-ratelimit-remaining'), '0', 'and that nothing remains');
    t.ok(Number(refused.headers.get('x-ratelimit-reset')) > nowSeconds, 'and when it resets');
    t.match(refused.headers.get('x-request-id'), /^req_/, 'and carries a request id');
    t.same(await tableCounts(app.db), before, 'a refused request writes nothing');

    expect429(t, await app.request('GET', PATH, { key }), 'still refused before Retry-After');
    app.clock.advance(retryAfter * 1000);
    const again = await app.request('GET', PATH, { key });
    t.equal(again.status, 200, 'after Retry-After seconds one more request passes');
    expect429(t, await app.request('GET', PATH, { key }), 'and only one');
  });

  t.test('sk_test and sk_live of one organisation have separate buckets', async (t) => {
    const tenant = await createTenant(app);
    const exhausted = await burst(app, tenant.keys.sk_test.secret, 21);
    t.equal(exhausted[20]!.status, 429, 'the test key is exhausted');
    const live = await app.request('GET', PATH, { key: tenant.keys.sk_live.secret });
    t.equal(live.status, 200, 'the live key is not');
    t.equal(live.headers.get('x-ratelimit-remaining'), '19', 'its bucket is untouched');
  });

  t.test('two organisations have separate buckets', async (t) => {
    const first = await createTenant(app);
    const second = await createTenant(app);
    t.equal((await burst(app, first.keys.sk_test.secret, 21))[20]!.status, 429, 'the first is exhausted');
    const other = await app.request('GET', PATH, { key: second.keys.sk_test.secret });
    t.equal(other.status, 200, 'the second organisation is not');
    t.equal(other.headers.get('x-ratelimit-remaining'), '19');
  });

  t.test('a key with a raised limit reports it and allows its burst', async (t) => {
    const tenant = await createTenant(app, { rateLimits: { read: { perMinute: 1000, burst: 200 } } });
    const key = tenant.keys.sk_test.secret;
    const responses: TestResponse[] = [];
    for (let batch = 0; batch < 4; batch++)
      responses.push(
        ...(await Promise.all(Array.from({ length: 50 }, () => app.request('GET', PATH, { key })))),
      );
    t.same(statuses(responses), Array(200).fill(200), '200 requests at once succeed');
    t.ok(
      responses.every((r) => r.headers.get('x-ratelimit-limit') === '1000'),
      'X-RateLimit-Limit is 1000',
    );
    t.same(
      responses.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b),
      Array.from({ length: 200 }, (_, i) => i),
      'each request took exactly one token',
    );
    expect429(t, await app.request('GET', PATH, { key }), 'the 201st');
    const normal = await createTenant(app);
    const plain = await app.request('GET', PATH, { key: normal.keys.sk_test.secret });
    t.equal(plain.headers.get('x-ratelimit-limit'), '100', 'other keys keep the default');
  });

  t.test("a publishable key is charged to its organisation's secret key of the same mode", async (t) => {
    const tenant = await createTenant(app);
    const auth = app.services.authenticator;
    const skTest = await auth.authenticate(`Bearer ${tenant.keys.sk_test.secret}`);
    const pkTest = await auth.authenticate(`Bearer ${tenant.keys.pk_test.secret}`);
    const skLive = await auth.authenticate(`Bearer ${tenant.keys.sk_live.secret}`);
    const pkLive = await auth.authenticate(`Bearer ${tenant.keys.pk_live.secret}`);
    t.equal(pkTest.kind, 'publishable_key');
    t.equal(pkTest.bucketId, skTest.bucketId, 'pk_test shares the sk_test bucket');
    t.equal(pkLive.bucketId, skLive.bucketId, 'pk_live shares the sk_live bucket');
    t.not(skTest.bucketId, skLive.bucketId, 'the modes do not share');
    const other = await createTenant(app);
    const otherPk = await auth.authenticate(`Bearer ${other.keys.pk_test.secret}`);
    t.not(otherPk.bucketId, skTest.bucketId, "another organisation's pk does not share");

    const raised = await createTenant(app, { rateLimits: { widget_tokens: { perMinute: 300, burst: 100 } } });
    const raisedPk = await auth.authenticate(`Bearer ${raised.keys.pk_test.secret}`);
    t.same(raisedPk.limits.widget_tokens, { perMinute: 300, burst: 100 }, "and gets the secret key's limits");
  });

  t.test('a revoked key is 401, not 429, even with an empty bucket', async (t) => {
    const app = await startTestApp(t, engine, { config: { auth: { cacheSeconds: 0 } } });
    const tenant = await createTenant(app);
    const { id, secret } = tenant.keys.sk_test;
    t.equal((await burst(app, secret, 21))[20]!.status, 429, 'the bucket is empty');
    await app.db.transaction((trx) => revokeApiKey(trx, { keyId: id, actor: 'test', now: app.clock.now() }));
    const response = await app.request('GET', PATH, { key: secret });
    t.equal(response.status, 401);
    t.equal(response.body.error.code, 'invalid_credential');
    t.equal(response.headers.get('retry-after'), null, 'no Retry-After: waiting will not help');
  });

  t.test("a publishable key's refused requests never spend its secret key's buckets", async (t) => {
    const tenant = await createTenant(app);
    const pk = tenant.keys.pk_test.secret;
    const sk = tenant.keys.sk_test.secret;
    const refusedReads = await burst(app, pk, 21);
    t.same(statuses(refusedReads), Array(21).fill(403), 'a pk may not read: 21 times 403');
    t.equal(refusedReads[0]!.body.error.code, 'insufficient_scope');
    t.equal(refusedReads[0]!.headers.get('x-ratelimit-limit'), '60', 'a refusal reports the refusal bucket');
    const read = await app.request('GET', PATH, { key: sk });
    t.equal(read.status, 200, 'the secret key still reads');
    t.equal(read.headers.get('x-ratelimit-remaining'), '19', 'with its read bucket untouched');

    for (let i = 0; i < 5; i++) {
      const refused = await app.request('POST', '/v1/refresh_intents', { key: pk, body: {} });
      t.equal(refused.status, 403, `refused refresh intent ${i + 1} is 403`);
    }
    const write = await app.request('POST', '/v1/refresh_intents', {
      key: sk,
      body: { link_id: 'link_0000000000000000' },
    });
    t.not(write.status, 429, `the secret key's refresh intent is not rate limited (${write.status})`);
    t.equal(write.headers.get('x-ratelimit-limit'), '10', 'it is charged to sync_write');
    t.equal(write.headers.get('x-ratelimit-remaining'), '4', 'which had all its burst of 5 left');
  });

  t.test('refused requests have a bucket of their own: per credential, and per address', async (t) => {
    const app = await startTestApp(t, engine);
    const tenant = await createTenant(app);
    const pk = tenant.keys.pk_test.secret;
    const before = await tableCounts(app.db);
    const refused = await burst(app, pk, 31);
    t.same(statuses(refused.slice(0, 30)), Array(30).fill(403), 'a burst of 30 refusals is answered 403');
    const retryAfter = expect429(t, refused[30]!, "a pk's 31st refusal");
    t.same(await tableCounts(app.db), before, 'refusals write nothing');
    const token = await app.request('POST', '/v1/widget_tokens', { key: pk, body: {} });
    t.equal(token.status, 200, 'the pk still does what it may: its own bucket is untouched');

    const unknown = `${tenant.keys.sk_test.secret.slice(0, -6)}aaaaaa`;
    const guesses = await burst(app, unknown, 31);
    t.same(statuses(guesses.slice(0, 30)), Array(30).fill(401), 'a burst of 30 unknown keys is answered 401');
    t.equal(guesses[0]!.headers.get('x-ratelimit-limit'), '60', 'a 401 reports the refusal bucket');
    expect429(t, guesses[30]!, 'the 31st guess from one address');
    const missing = await app.request('GET', PATH);
    t.equal(missing.status, 429, 'a request without a key from that address waits too');
    const valid = await app.request('GET', PATH, { key: tenant.keys.sk_test.secret });
    t.equal(valid.status, 200, 'a valid key from the same address is not held back');

    app.clock.advance(retryAfter * 1000);
    t.equal((await app.request('GET', PATH, { key: unknown })).status, 401, 'after Retry-After, 401 again');
    t.equal((await app.request('GET', PATH, { key: pk })).status, 403, 'and 403 again');
  });

  t.test('two API servers on one database share a bucket', async (t) => {
    const database = await freshDatabase(t, engine);
    const clock = new ManualClock(Date.now());
    const config = { rateLimitStore: 'database' as const };
    const a = await startTestApp(t, engine, { database, clock, config });
    const b = await startTestApp(t, engine, { database, clock, config });
    t.not(a.url, b.url, 'two servers');
    const tenant = await createTenant(a);
    const key = tenant.keys.sk_test.secret;
    const fromA = await burst(a, key, 10);
    const fromB = await burst(b, key, 11);
    t.same(statuses(fromA), Array(10).fill(200), 'server A: 10 succeed');
    t.same(statuses(fromB), [...Array(10).fill(200), 429], 'server B: 10 succeed, then 429');
    t.equal([...fromA, ...fromB].filter((r) => r.status === 200).length, 20, 'exactly the burst in total');
    t.equal(fromB[0]!.headers.get('x-ratelimit-remaining'), '9', 'B sees what A spent');
    const retryAfter = expect429(t, fromB[10]!, 'the 21st, on B');
    clock.advance(retryAfter * 1000);
    t.equal((await a.request('GET', PATH, { key })).status, 200, 'after Retry-After, A lets one through');
    expect429(t, await b.request('GET', PATH, { key }), 'and B then refuses');

    const other = await createTenant(a);
    const concurrent = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 ? a : b).request('GET', PATH, { key: other.keys.sk_live.secret }),
      ),
    );
    t.equal(
      concurrent.filter((r) => r.status === 200).length,
      20,
      'concurrently through both: exactly 20 of 30',
    );
    t.equal(concurrent.filter((r) => r.status === 429).length, 10, 'and the other 10 are 429');

    // Requests that wait while their bucket is being charged are charged together: 60 at once, one bucket.
    const third = await createTenant(a);
    const crowd = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? a : b).request('GET', PATH, { key: third.keys.sk_test.secret }),
      ),
    );
    t.equal(crowd.filter((r) => r.status === 200).length, 20, 'a crowd of 60 gets exactly the burst');
    const remaining = crowd
      .filter((r) => r.status === 200)
      .map((r) => Number(r.headers.get('x-ratelimit-remaining')))
      .sort((x, y) => x - y);
    t.same(remaining, [...Array(20).keys()], 'each allowed request saw its own remaining count');
  });

  t.test('a large shared bucket: spare tokens never let more than the burst through', async (t) => {
    const database = await freshDatabase(t, engine);
    const clock = new ManualClock(Date.now()); // frozen: nothing refills
    const config = { rateLimitStore: 'database' as const };
    const a = await startTestApp(t, engine, { database, clock, config });
    const b = await startTestApp(t, engine, { database, clock, config });
    const tenant = await createTenant(a, { rateLimits: { read: { perMinute: 1000, burst: 1000 } } });
    const key = tenant.keys.sk_test.secret;
    const responses: TestResponse[] = [];
    for (let round = 0; round < 105; round++) {
      responses.push(
        ...(await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).request('GET', PATH, { key })),
        )),
      );
    }
    const allowed = responses.filter((r) => r.status === 200);
    t.ok(allowed.length <= 1000, `${allowed.length} allowed: never more than the burst`);
    // Each process may hold one spare token (0.1% of 1,000) when the bucket runs low.
    t.ok(allowed.length >= 998, `${allowed.length} allowed: at most one spare token per process unspent`);
    t.equal(
      responses.length - allowed.length,
      responses.filter((r) => r.status === 429).length,
      'the rest 429',
    );
    const seen = allowed.map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    t.equal(new Set(seen).size, seen.length, 'no two allowed requests saw the same remaining count');
  });
});
