import t from 'tap';
import { listenForApi } from '../../src/http/listener.js';

const ANY_PORT = { host: '127.0.0.1', port: 0, requestTimeoutMs: 5_000, headersTimeoutMs: 5_000 };

t.test('a request that arrives while the API starts waits for it and is answered', async (t) => {
  const listener = await listenForApi(ANY_PORT);
  t.teardown(() => listener.close(100));

  let settled = false;
  const early = fetch(`${listener.url}/v1/accounts`, { method: 'POST', body: '{"a":1}' }).finally(
    () => (settled = true),
  );
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.notOk(settled, 'it is neither refused nor answered before the app is ready');

  listener.serve((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => response.end(`${request.method} ${request.url} ${body}`));
  });
  t.equal(await (await early).text(), 'POST /v1/accounts {"a":1}', 'then the app gets it whole');
  const later = await fetch(`${listener.url}/health`);
  t.equal(await later.text(), 'GET /health ', 'and every request after it');
});

t.test('a taken port fails the listener at once', async (t) => {
  const first = await listenForApi(ANY_PORT);
  t.teardown(() => first.close(100));
  const port = Number(new URL(first.url).port);
  await t.rejects(listenForApi({ ...ANY_PORT, port }), { code: 'EADDRINUSE' });
});
