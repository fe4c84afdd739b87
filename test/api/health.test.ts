import t from 'tap';
import { forEachEngine, startTestApp } from '../helpers/harness.js';

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);

  t.test('GET /health answers ok without a key and without rate-limit headers', async (t) => {
    for (let i = 0; i < 25; i++) {
      const response = await app.request('GET', '/health');
      if (response.status !== 200) {
        t.fail(`request ${i + 1} answered ${response.status}`);
        return;
      }
    }
    const response = await app.request('GET', '/health');
    t.equal(response.status, 200, 'more requests than any burst, all 200');
    t.same(response.body, { status: 'ok' });
    t.match(response.headers.get('content-type'), /^application\/json/);
    t.match(response.headers.get('x-request-id'), /^req_[0-9a-f]{16}$/);
    for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after'])
      t.equal(response.headers.get(header), null, `no ${header}`);
  });

  t.test('/ leads a person to the console; without the console it is the API 404', async (t) => {
    const door = await fetch(`${app.url}/`, { redirect: 'manual' });
    t.equal(door.status, 303);
    t.equal(door.headers.get('location'), '/console');
    t.equal((await fetch(`${app.url}/`, { method: 'POST', redirect: 'manual' })).status, 405, 'GET only');
    const closed = await startTestApp(t, engine, { config: { console: { enabled: false } } });
    const missing = await closed.request('GET', '/');
    t.equal(missing.status, 404);
    t.equal(missing.body.error.code, 'resource_missing');
  });

  t.test('a key sent to /health is not needed and not checked', async (t) => {
    const response = await app.request('GET', '/health', { key: 'svc_sk_test_nonsense' });
    t.equal(response.status, 200);
    t.same(response.body, { status: 'ok' });
  });

  t.test('GET /health is 503 unavailable when the database is gone', async (t) => {
    const doomed = await startTestApp(t, engine);
    t.equal((await doomed.request('GET', '/health')).status, 200);
    await doomed.db.close();
    const response = await doomed.request('GET', '/health');
    t.equal(response.status, 503);
    t.same(response.body, { status: 'unavailable' });
    t.ok(Number(response.headers.get('retry-after')) >= 1, 'with Retry-After');
  });
});
