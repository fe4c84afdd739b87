import { connect, type Socket } from 'node:net';
import { constants, gzipSync } from 'node:zlib';
import t from 'tap';
import type { Test } from 'tap';
import { Agent, fetch } from 'undici';
import { contractViolation } from '../helpers/contract.js';
import {
  createTenant,
  forEachEngine,
  startTestApp,
  tableCounts,
  RAISED_LIMITS,
  type TestApp,
} from '../helpers/harness.js';
import { openWidget, widgetToken } from '../helpers/widget.js';

/**
 * Abusive clients over raw sockets: bodies over the limit, JSON nested 100,000 deep, bytes that are not
 * UTF-8, headers past Node's limit, and hundreds of slow-loris sockets. Each is refused with the error
 * envelope and writes nothing, while a well-behaved client beside it keeps getting its 200s.
 */

const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 3_000;
const SLOW_SOCKETS = 300;
/** A normal request may wait this long while the server fends off an attack, on a busy 2-core machine. */
const NORMAL_LATENCY_LIMIT_MS = 3_000;

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** Writes bytes as they are to a fresh connection and reads the first response until the server closes. */
function rawRequest(port: number, head: string, body: Buffer | string = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The server may answer and close before the whole body is written (413): that is no failure here.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const response = parseResponse(Buffer.concat(chunks));
      if (response) resolve(response);
      else reject(new Error(`no HTTP response to ${head.split('\r\n')[0]}`));
    });
    // Latin-1, so that a test can put any byte in the request line.
    socket.write(Buffer.from(head, 'latin1'));
    socket.write(body);
  });
}

function parseResponse(bytes: Buffer): RawResponse | null {
  const raw = bytes.toString('utf8');
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? raw.length);
  const text = Buffer.from(raw.slice(end + 4))
    .subarray(0, length)
    .toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, text, body };
}

function head(method: string, path: string, headers: Record<string, string | number>): string {
  const lines = Object.entries({ Host: 'localhost', Connection: 'close', ...headers }).map(
    ([name, value]) => `${name}: ${value}`,
  );
  return `${method} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

/** The status, envelope and error code of a refusal, and the document's agreement with it. */
function expectRefusal(t: Test, response: RawResponse, status: number, code: string, label: string): void {
  t.equal(response.status, status, `${label}: ${status}`);
  t.equal(response.body?.error?.type, 'invalid_request_error', `${label}: error.type`);
  t.equal(response.body?.error?.code, code, `${label}: error.code`);
  t.match(response.headers['content-type'], /^application\/json/, `${label}: JSON`);
  t.match(response.headers['x-request-id'], /^req_[0-9a-f]{16}$/, `${label}: X-Request-Id`);
  t.equal(contractViolation('POST', '/v1/links', status, response.body), null, `${label}: the envelope`);
}

interface NormalTraffic {
  stop(): Promise<{ requests: number; failures: string[]; slowestMs: number }>;
}

/**
 * The normal client drops idle connections after 1 s, well before the server's 5 s, so that a keep-alive
 * race between tests cannot pass for a refused request.
 */
const client = new Agent({ keepAliveTimeout: 1_000, keepAliveMaxTimeout: 1_000 });
t.teardown(() => client.close());

/** A well-behaved client: an authenticated list and /health, back to back, until stopped. */
function normalClient(app: TestApp, key: string): NormalTraffic {
  let running = true;
  let requests = 0;
  let slowestMs = 0;
  const failures: string[] = [];
  const loop = (async () => {
    while (running) {
      for (const [path, headers] of [
        ['/v1/links?per_page=5', { authorization: `Bearer ${key}` }],
        ['/health', {}],
      ] as const) {
        const started = Date.now();
        try {
          const response = await fetch(app.url + path, {
            headers,
            signal: AbortSignal.timeout(10_000),
            dispatcher: client,
          });
          await response.arrayBuffer();
          if (response.status !== 200) failures.push(`${path}: ${response.status}`);
        } catch (error) {
          failures.push(`${path}: ${(error as Error).message}`);
        }
        slowestMs = Math.max(slowestMs, Date.now() - started);
        requests++;
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { requests, failures, slowestMs };
    },
  };
}

/** Runs `attack` while a normal client is served beside it, and checks the normal client's experience. */
async function underAttack(t: Test, app: TestApp, key: string, attack: () => Promise<void>): Promise<void> {
  const traffic = normalClient(app, key);
  try {
    await attack();
  } finally {
    const { requests, failures, slowestMs } = await traffic.stop();
    t.same(failures, [], `the normal client got only 200s (${requests} requests)`);
    t.ok(requests >= 2, 'the normal client was served alongside');
    t.ok(slowestMs < NORMAL_LATENCY_LIMIT_MS, `its slowest request took ${slowestMs} ms`);
  }
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine, {
    config: {
      api: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS },
      rateLimits: RAISED_LIMITS,
    },
  });
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const key = tenant.keys.sk_test.secret;
  const port = Number(new URL(app.url).port);
  // The default limit (1 MiB), as an operator has it.
  const bodyLimit = app.config.api.bodyLimitBytes;
  const auth = { Authorization: `Bearer ${key}` };
  const endpointBody = (description: string) =>
    JSON.stringify({ url: 'http://127.0.0.1:9/hook', enabled_events: ['*'], description });

  /** POST /v1/webhook_endpoints over a raw socket: JSON with the tenant's key, `headers` after those. */
  const postEndpoint = (headers: Record<string, string | number>, body: Buffer | string) =>
    rawRequest(
      port,
      head('POST', '/v1/webhook_endpoints', { ...auth, 'Content-Type': 'application/json', ...headers }),
      body,
    );

  /** A refused request over a raw socket: its status and code, and no row written. */
  async function refused(
    t: Test,
    label: string,
    send: () => Promise<RawResponse>,
    status: number,
    code: string,
  ): Promise<RawResponse> {
    const before = await tableCounts(app.db);
    const response = await send();
    expectRefusal(t, response, status, code, label);
    t.same(await tableCounts(app.db), before, `${label}: nothing was written`);
    return response;
  }

  t.test('the control: the same raw request, well formed, is served and writes', async (t) => {
    const before = await tableCounts(app.db);
    const body = endpointBody('fine');
    const response = await postEndpoint({ 'Content-Length': body.length }, body);
    t.equal(response.status, 200, response.text);
    t.equal(response.body.description, 'fine');
    t.equal((await tableCounts(app.db)).webhook_endpoints, before.webhook_endpoints! + 1);
    await app.db.knex('webhook_endpoints').where({ id: response.body.id }).delete();
  });

  t.test('a body over the limit is 413, however it is framed', async (t) => {
    await underAttack(t, app, key, async () => {
      const big = endpointBody('x'.repeat(bodyLimit));
      await refused(
        t,
        'Content-Length over the limit',
        () => postEndpoint({ 'Content-Length': big.length }, big),
        413,
        'request_too_large',
      );
      // Chunked, the size is only known while reading: the reader must count.
      const chunked = `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`;
      await refused(
        t,
        'chunked over the limit',
        () => postEndpoint({ 'Transfer-Encoding': 'chunked' }, chunked),
        413,
        'request_too_large',
      );
      // 4 MiB of JSON whitespace gzips to about 4 KB: the limit applies to what it inflates to.
      const bomb = gzipSync(
        Buffer.concat([Buffer.from(' '.repeat(4 * 1024 * 1024)), Buffer.from(endpointBody('b'))]),
      );
      t.ok(bomb.length < bodyLimit, `the compressed body (${bomb.length} bytes) is under the limit`);
      await refused(
        t,
        'gzip that inflates past the limit',
        () => postEndpoint({ 'Content-Encoding': 'gzip', 'Content-Length': bomb.length }, bomb),
        413,
        'request_too_large',
      );
      // Inflates past the limit, then is corrupt: the inflater's error comes after the parser stopped
      // listening to it, and with no listener an 'error' ends the process.
      const corrupt = Buffer.concat([
        gzipSync(Buffer.from(' '.repeat(bodyLimit + 24 * 1024)), { finishFlush: constants.Z_SYNC_FLUSH }),
        Buffer.alloc(1024, 0xff),
      ]);
      await refused(
        t,
        'gzip that inflates past the limit, then is corrupt',
        () => postEndpoint({ 'Content-Encoding': 'gzip', 'Content-Length': corrupt.length }, corrupt),
        413,
        'request_too_large',
      );
    });
  });

  t.test('JSON nested 100,000 deep is 400, not a crash', async (t) => {
    await underAttack(t, app, key, async () => {
      const depth = 100_000;
      for (const [label, body, extra] of [
        ['unclosed [', '['.repeat(depth), {}],
        ['balanced [ ]', '['.repeat(depth) + ']'.repeat(depth), {}],
        // The idempotency hash serialises the body: at this depth JSON.stringify overflows the stack.
        [
          'balanced, with an Idempotency-Key',
          '['.repeat(depth) + ']'.repeat(depth),
          { 'Idempotency-Key': 'deep-1' },
        ],
        [
          'inside a valid body',
          `{"url":"http://127.0.0.1:9/hook","enabled_events":["*"],"description":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`,
          { 'Idempotency-Key': 'deep-2' },
        ],
      ] as const) {
        const response = await refused(
          t,
          label,
          () => postEndpoint({ ...extra, 'Content-Length': Buffer.byteLength(body) }, body),
          400,
          'invalid_json',
        );
        t.match(response.body.error.message, /nested more than \d+ levels/, `${label}: says why`);
      }
    });
  });

  t.test('bytes that are not UTF-8 are 400, in a body or in a query string', async (t) => {
    await underAttack(t, app, key, async () => {
      for (const [label, bytes] of [
        ['0xFF 0xFE', [0xff, 0xfe]],
        ['an overlong "/"', [0xc0, 0xaf]],
        ['a UTF-8 encoded surrogate', [0xed, 0xa0, 0x80]],
        ['a truncated sequence', [0xe2, 0x82]],
      ] as const) {
        const [prefix, suffix] = endpointBody('@@').split('@@') as [string, string];
        const body = Buffer.concat([Buffer.from(prefix), Buffer.from(bytes), Buffer.from(suffix)]);
        const response = await refused(
          t,
          `body with ${label}`,
          () => postEndpoint({ 'Content-Length': body.length }, body),
          400,
          'invalid_json',
        );
        t.match(response.body.error.message, /UTF-8/, `body with ${label}: says why`);
      }
      for (const [label, query] of [
        ['%FF', 'external_user_id=%FF'],
        ['an overlong "/"', 'external_user_id=a%C0%AFb'],
        ['a surrogate', 'external_user_id=%ED%A0%80'],
        ['a broken escape', 'external_user_id=100%'],
      ] as const) {
        const response = await refused(
          t,
          `query with ${label}`,
          () => rawRequest(port, head('GET', `/v1/links?${query}`, auth)),
          400,
          'parameter_invalid',
        );
        t.ok(response.body.error.param, `query with ${label}: names the parameter`);
      }
      // A byte that is not even ASCII in the request line: Node's parser refuses it before the app sees it.
      await refused(
        t,
        'query with a raw 0xFF byte',
        () => rawRequest(port, head('GET', '/v1/links?external_user_id=\xff', auth)),
        400,
        'invalid_request',
      );
      // A valid escape of a real character still works.
      const accented = await rawRequest(port, head('GET', '/v1/links?external_user_id=Jos%C3%A9', auth));
      t.equal(accented.status, 200, 'a query with é, percent-encoded as UTF-8, is served');
    });
  });

  t.test('a body that claims gzip but is not is 400, on the API and on the widget', async (t) => {
    const session = (await openWidget(app, await widgetToken(app, key))).bootstrap.session as string;
    await underAttack(t, app, key, async () => {
      const body = endpointBody('not gzip');
      const headers = {
        'Content-Type': 'application/json',
        'Content-Encoding': 'gzip',
        'Content-Length': body.length,
      };
      await refused(t, 'API', () => postEndpoint(headers, body), 400, 'invalid_json');
      await refused(
        t,
        'widget',
        () =>
          rawRequest(
            port,
            head('POST', '/widget/api/credentials', { 'X-Widget-Session': session, ...headers }),
            body,
          ),
        400,
        'invalid_json',
      );
    });
  });

  t.test("the widget's JSON API refuses the same abuse as the API", async (t) => {
    const session = (await openWidget(app, await widgetToken(app, key))).bootstrap.session as string;
    const send = (body: Buffer | string) =>
      rawRequest(
        port,
        head('POST', '/widget/api/credentials', {
          'X-Widget-Session': session,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
        }),
        body,
      );
    await underAttack(t, app, key, async () => {
      const credentials = (password: string) =>
        JSON.stringify({ bank_id: 'bancochile', rut: '11.111.111-1', password });
      const [prefix, suffix] = credentials('@@').split('@@') as [string, string];
      await refused(
        t,
        'not UTF-8',
        () => send(Buffer.concat([Buffer.from(prefix), Buffer.from([0xff, 0xfe]), Buffer.from(suffix)])),
        400,
        'invalid_json',
      );
      await refused(
        t,
        'nested 5,000 deep',
        () => send('['.repeat(5_000) + ']'.repeat(5_000)),
        400,
        'invalid_json',
      );
      await refused(
        t,
        'over its 16 KiB',
        () => send(credentials('p'.repeat(20_000))),
        413,
        'request_too_large',
      );
      await refused(t, 'a NUL in a field', () => send(credentials('a\u0000b')), 400, 'parameter_invalid');
    });
  });

  t.test('headers past the limit are 431, and the server stays up', async (t) => {
    await underAttack(t, app, key, async () => {
      await refused(
        t,
        'one 20 KB header',
        () => rawRequest(port, head('GET', '/v1/links', { ...auth, 'X-Big': 'a'.repeat(20_000) })),
        431,
        'request_header_fields_too_large',
      );
      const many = Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [`X-H${i}`, 'v'.repeat(16)]));
      await refused(
        t,
        '1,000 small headers',
        () => rawRequest(port, head('GET', '/v1/links', { ...auth, ...many })),
        431,
        'request_header_fields_too_large',
      );
      await refused(
        t,
        'a 20 KB URL',
        () => rawRequest(port, head('GET', `/v1/links?external_user_id=${'u'.repeat(20_000)}`, auth)),
        431,
        'request_header_fields_too_large',
      );
      await refused(t, 'not HTTP at all', () => rawRequest(port, 'HELLO\r\n\r\n'), 400, 'invalid_request');
    });
    t.equal((await fetch(`${app.url}/health`, { dispatcher: client })).status, 200, 'served after');
  });

  t.test(
    `${SLOW_SOCKETS} slow-loris sockets are cut off, and normal clients are served meanwhile`,
    async (t) => {
      t.equal(
        app.server.server.headersTimeout,
        HEADERS_TIMEOUT_MS,
        'the server has the configured headers timeout',
      );
      t.equal(app.server.server.requestTimeout, REQUEST_TIMEOUT_MS, 'and the configured request timeout');
      const before = await tableCounts(app.db);
      interface Slow {
        socket: Socket;
        opened: number;
        closedAfterMs?: number;
        received: Buffer[];
      }
      const open = (first: string): Promise<Slow> =>
        new Promise((resolve, reject) => {
          const socket = connect(port, '127.0.0.1');
          const slow: Slow = { socket, opened: 0, received: [] };
          socket.on('data', (chunk: Buffer) => slow.received.push(chunk));
          socket.on('error', () => undefined);
          socket.on('close', () => (slow.closedAfterMs = Date.now() - slow.opened));
          socket.once('connect', () => {
            slow.opened = Date.now();
            socket.write(first);
            resolve(slow);
          });
          socket.once('error', reject);
        });
      let trickle: NodeJS.Timeout | undefined;
      const sockets: Slow[] = [];
      await underAttack(t, app, key, async () => {
        // Headers that never end, a byte a second: each byte is progress, but the headers timeout is absolute.
        for (let i = 0; i < SLOW_SOCKETS - 20; i++)
          sockets.push(
            await open(
              `GET /v1/links HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\nX-Slow: `,
            ),
          );
        // A body that never ends (R.U.D.Y.): the headers are complete, the request timeout cuts it.
        const body = endpointBody('slow');
        for (let i = 0; i < 20; i++)
          sockets.push(
            await open(
              head('POST', '/v1/webhook_endpoints', {
                ...auth,
                'Content-Type': 'application/json',
                'Content-Length': body.length,
                Connection: 'keep-alive',
              }) + body.slice(0, 10),
            ),
          );
        let sent = 0;
        trickle = setInterval(() => {
          sent++;
          for (const slow of sockets) if (!slow.socket.destroyed) slow.socket.write(sent % 2 ? 'a' : ' ');
        }, 1_000);
        const deadline = Date.now() + REQUEST_TIMEOUT_MS + 5_000;
        while (sockets.some((slow) => slow.closedAfterMs === undefined) && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 100));
        clearInterval(trickle);
      });
      clearInterval(trickle);
      for (const slow of sockets) slow.socket.destroy();

      const open_ = sockets.filter((slow) => slow.closedAfterMs === undefined).length;
      t.equal(open_, 0, `the server closed all ${SLOW_SOCKETS} slow sockets`);
      const headerSockets = sockets.slice(0, SLOW_SOCKETS - 20);
      const bodySockets = sockets.slice(SLOW_SOCKETS - 20);
      // Node checks for expired requests once a second (connectionsCheckingInterval), hence the margin.
      const latest = (group: Slow[]) => Math.max(...group.map((slow) => slow.closedAfterMs ?? Infinity));
      t.ok(
        latest(headerSockets) < HEADERS_TIMEOUT_MS + 2_500,
        `trickled headers were cut within ${latest(headerSockets)} ms (headers timeout ${HEADERS_TIMEOUT_MS} ms)`,
      );
      t.ok(
        latest(bodySockets) < REQUEST_TIMEOUT_MS + 2_500,
        `trickled bodies were cut within ${latest(bodySockets)} ms (request timeout ${REQUEST_TIMEOUT_MS} ms)`,
      );
      const answers = sockets.map((slow) => parseResponse(Buffer.concat(slow.received)));
      t.ok(
        answers.every((answer) => answer?.status === 408 && answer.body?.error?.code === 'request_timeout'),
        'each was told 408 request_timeout in the envelope',
      );
      t.same(await tableCounts(app.db), before, 'no slow request wrote anything');
    },
  );
});
