import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import t, { type Test } from 'tap';
import {
  CONNECTOR_ERROR_CODES,
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type Connector,
  type DateWindow,
  type LoginRequest,
} from '../../src/banks/connector.js';
import { startBankGateway, type BankGateway } from '../../src/banks/gateway/gateway.js';
import { createHttpConnector, type HttpConnectorOptions } from '../../src/banks/http/http-connector.js';
import { gatewaySignature, signatureHeaders } from '../../src/banks/http/signature.js';
import { accountToWire } from '../../src/banks/http/wire.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';

const SECRET = 'gw-secret-0123456789abcdef';
const PASSWORD = 'correct-horse-battery';
const NOW = Date.UTC(2026, 0, 15, 12, 0, 0, 123);
/** The connector's deadline: far above a loopback round trip even on a loaded machine. */
const TIMEOUT_MS = 2000;
/** A gateway this slow answers long after any deadline: a timeout cannot be confused with its answer. */
const SLOW_GATEWAY_MS = 60_000;

/** Every message of every ConnectorError these tests see, checked at the end for leaked secrets. */
const messages: string[] = [];

const ACCOUNT: BankAccount = {
  ref: 'acct-001',
  name: 'Cuenta Corriente Ñuñoa',
  type: 'checking',
  currency: 'CLP',
  last4: '4321',
  holderName: 'Ana Pérez',
  balance: { available: 1_234_567, current: -89, limit: null },
};

const CARD: BankAccount = {
  ...ACCOUNT,
  ref: 'card-002',
  name: 'Visa',
  type: 'credit_card',
  currency: 'USD',
  last4: '0007',
  balance: { available: 150_000, current: -12_345, limit: 9_007_199_254_740_991 },
};

const MOVEMENTS: BankMovement[] = [
  {
    ref: 'r1',
    amount: -1_234_567,
    currency: 'CLP',
    description: 'Transferencia a Juan “JJ” Soto',
    type: 'transfer',
    referenceId: 'ref-9',
    counterparty: { name: 'Juan Soto', rut: '12345678-5', bankId: 'bci', accountLast4: '9876' },
    postedAt: Date.UTC(2026, 0, 10, 3, 4, 5, 678),
    transactionDate: '2026-01-09',
    pending: false,
  },
  {
    ref: null,
    amount: 2_500_000,
    currency: 'CLP',
    description: 'Sueldo',
    type: 'salary',
    referenceId: null,
    counterparty: null,
    postedAt: Date.UTC(2026, 0, 1, 0, 0, 0, 1),
    transactionDate: '2026-01-01',
    pending: true,
  },
];

const STATEMENT_ROWS: BankMovement[] = [
  {
    ...MOVEMENTS[1]!,
    ref: 'st-1',
    postedAt: Date.UTC(2024, 1, 29, 23, 59, 59, 999),
    transactionDate: '2024-02-29',
  },
];

const LOGIN: LoginRequest = {
  bankId: 'bci',
  holderType: 'business',
  credentials: { rut: '12345678-5', password: PASSWORD, rutEmpresa: '76543210-3' },
  now: NOW,
  interactive: true,
  history: { attempts: 7, successes: 5 },
};

/** What the fake connector received, to prove the gateway rebuilt the contract's values exactly. */
interface Received {
  login?: LoginRequest;
  mfa?: { request: LoginRequest; challenge: unknown; code: string };
  accounts?: { session: BankSession; now: number };
  movements?: { session: BankSession; account: BankAccount; window: DateWindow; now: number };
  statements?: { session: BankSession; account: BankAccount; window: DateWindow; now: number };
}

const MFA_STATE = {
  step: 'otp',
  nested: { list: [1, 'two', null, { deep: true }], empty: {} },
  text: 'ñ “q” \n',
};

function fakeConnector(received: Received): Connector {
  const session = (rut: string): BankSession => ({
    holderName: 'Ana Pérez',
    state: { token: 'tok-1', rut, cookies: [{ name: 'JSESSIONID', value: 'abc' }] },
  });
  return {
    async login(request) {
      received.login = request;
      if (request.credentials.password === 'wrong') {
        throw new ConnectorError('rejected_credentials', 'the bank rejected the credentials');
      }
      if (request.credentials.password === 'mfa') {
        return { kind: 'mfa', challenge: { expiresAt: request.now + 300_000, state: MFA_STATE } };
      }
      return { kind: 'session', session: session(request.credentials.rut) };
    },
    async submitMfa(request, challenge, code) {
      received.mfa = { request, challenge, code };
      if (code !== '123456') throw new ConnectorError('mfa_invalid', 'the code is wrong');
      return session(request.credentials.rut);
    },
    async listAccounts(session, now) {
      received.accounts = { session, now };
      if (session.state.token !== 'tok-1') throw new ConnectorError('action_required', 'log in again');
      return [ACCOUNT, CARD];
    },
    async listMovements(session, account, window, now) {
      received.movements = { session, account, window, now };
      return MOVEMENTS.filter((m) => m.postedAt >= window.from && m.postedAt < window.to);
    },
    async statements(session, account, window, now) {
      received.statements = { session, account, window, now };
      return STATEMENT_ROWS;
    },
  };
}

interface Fixture {
  gateway: BankGateway;
  received: Received;
  connector: Connector;
  connect(
    overrides?: { secret?: string; timeoutMs?: number; url?: string },
    options?: HttpConnectorOptions,
  ): Connector;
}

async function fixture(t: Test, connector?: Connector, latencyMs?: number): Promise<Fixture> {
  const received: Received = {};
  const gateway = await startBankGateway({
    host: '127.0.0.1',
    port: 0,
    secret: SECRET,
    connector: connector ?? fakeConnector(received),
    latencyMs,
  });
  t.teardown(() => gateway.close());
  const connect: Fixture['connect'] = (overrides = {}, options = {}) =>
    createHttpConnector(
      {
        url: overrides.url ?? gateway.url,
        secret: overrides.secret ?? SECRET,
        timeoutMs: overrides.timeoutMs ?? TIMEOUT_MS,
      },
      'bci',
      options,
    );
  return { gateway, received, connector: connect(), connect };
}

/** The ConnectorError `promise` rejects with (recorded for the leak check). */
async function failure(t: Test, promise: Promise<unknown>): Promise<ConnectorError> {
  try {
    await promise;
  } catch (error) {
    t.type(error, ConnectorError, 'a ConnectorError');
    messages.push((error as Error).message);
    return error as ConnectorError;
  }
  t.fail('expected a ConnectorError');
  return new ConnectorError('unsupported', 'not raised');
}

/** What the gateway answers: an error envelope, or the faults after `POST /_admin/faults`. */
interface GatewayAnswer {
  error: { code: string; message: string };
  faults: Record<string, unknown>;
}

/** A raw signed (or deliberately unsigned) POST to the gateway. */
async function post(
  url: string,
  path: string,
  body: unknown,
  sign: { secret?: string; nowMs?: number } | null,
) {
  const raw = JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (sign)
    Object.assign(
      headers,
      signatureHeaders(sign.secret ?? SECRET, 'POST', path, raw, sign.nowMs ?? Date.now()),
    );
  const response = await request(`${url}${path}`, { method: 'POST', headers, body: raw });
  const text = await response.body.text();
  return { status: response.statusCode, body: JSON.parse(text) as GatewayAnswer };
}

/** A plain server answering every request with `answer`, for gateways that misbehave in ways ours cannot. */
async function rawServer(
  t: Test,
  answer: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test('login, accounts, movements and statements survive the round trip exactly', async (t) => {
  const { connector, received } = await fixture(t);

  const login = await connector.login(LOGIN);
  t.same(login, {
    kind: 'session',
    session: {
      holderName: 'Ana Pérez',
      state: { token: 'tok-1', rut: '12345678-5', cookies: [{ name: 'JSESSIONID', value: 'abc' }] },
    },
  });
  t.same(received.login, LOGIN, 'the gateway rebuilt the login request exactly (now, history, rutEmpresa)');
  if (login.kind !== 'session') return;

  const accounts = await connector.listAccounts(login.session, NOW + 1);
  t.same(accounts, [ACCOUNT, CARD], 'accounts, balances and a 2^53-1 limit arrive unchanged');
  t.same(
    received.accounts,
    { session: login.session, now: NOW + 1 },
    'the session state went back unchanged',
  );

  const window = { from: Date.UTC(2026, 0, 1, 0, 0, 0, 1), to: Date.UTC(2026, 0, 10, 3, 4, 5, 679) };
  const movements = await connector.listMovements(login.session, CARD, window, NOW);
  t.same(movements, MOVEMENTS, 'amounts, times to the millisecond, nulls and text arrive unchanged');
  t.same(received.movements, { session: login.session, account: CARD, window, now: NOW });

  const statements = await connector.statements!(login.session, ACCOUNT, window, NOW);
  t.same(statements, STATEMENT_ROWS);
  t.same(received.statements, { session: login.session, account: ACCOUNT, window, now: NOW });

  const individual = {
    ...LOGIN,
    holderType: 'individual' as const,
    credentials: { ...LOGIN.credentials, rutEmpresa: null },
  };
  await connector.login(individual);
  t.same(received.login, individual, 'a null rut_empresa stays null');
});

t.test('MFA: a challenge, then the code; the opaque state goes back unchanged', async (t) => {
  const { connector, received } = await fixture(t);
  const request = { ...LOGIN, credentials: { ...LOGIN.credentials, password: 'mfa' } };
  const login = await connector.login(request);
  t.same(login, { kind: 'mfa', challenge: { expiresAt: NOW + 300_000, state: MFA_STATE } });
  if (login.kind !== 'mfa') return;

  const wrong = await failure(t, connector.submitMfa(request, login.challenge, '000000'));
  t.equal(wrong.code, 'mfa_invalid', 'a wrong code is mfa_invalid');

  const session = await connector.submitMfa(request, login.challenge, '123456');
  t.equal(session.holderName, 'Ana Pérez');
  t.same(
    received.mfa,
    { request, challenge: login.challenge, code: '123456' },
    'request, challenge and code arrive',
  );
});

t.test("the connector's own errors pass through with their code", async (t) => {
  const { connector } = await fixture(t);
  const error = await failure(
    t,
    connector.login({ ...LOGIN, credentials: { ...LOGIN.credentials, password: 'wrong' } }),
  );
  t.equal(error.code, 'rejected_credentials');
  t.match(error.message, /the bank rejected the credentials/);
  const stale = await failure(t, connector.listAccounts({ holderName: 'x', state: { token: 'old' } }, NOW));
  t.equal(stale.code, 'action_required');
});

t.test('a connector without statements answers unsupported', async (t) => {
  const { statements: _drop, ...withoutStatements } = fakeConnector({});
  const { connector } = await fixture(t, withoutStatements);
  const error = await failure(
    t,
    connector.statements!({ holderName: 'x', state: {} }, ACCOUNT, { from: 0, to: NOW }, NOW),
  );
  t.equal(error.code, 'unsupported');
});

t.test('a wrong secret: the gateway answers 401 and the connector raises bank_unavailable', async (t) => {
  const { gateway, connect } = await fixture(t);
  const raw = await post(
    gateway.url,
    '/v1/accounts',
    { bank_id: 'bci' },
    { secret: 'not-the-secret-at-all' },
  );
  t.equal(raw.status, 401);
  t.equal(raw.body.error.code, 'signature_invalid');

  const unsigned = await post(gateway.url, '/v1/login', { bank_id: 'bci' }, null);
  t.equal(unsigned.status, 401, 'an unsigned request is refused too');

  const error = await failure(t, connect({ secret: 'wrong-secret-wrong-secret' }).login(LOGIN));
  t.equal(error.code, 'bank_unavailable', 'a configuration problem, retried, never a credential failure');
  t.match(error.message, /refused the request signature \(401/);
  t.match(error.message, /banks\.connectors\.bci\.secret/);
});

t.test('a timestamp 10 minutes old (or ahead) is refused', async (t) => {
  const { gateway, connect } = await fixture(t);
  const old = await post(gateway.url, '/v1/accounts', {}, { nowMs: Date.now() - 600_000 });
  t.equal(old.status, 401);
  t.match(old.body.error.message, /300 s/);
  const ahead = await post(gateway.url, '/v1/accounts', {}, { nowMs: Date.now() + 600_000 });
  t.equal(ahead.status, 401);

  const stale = connect({}, { wallClock: { now: () => Date.now() - 600_000 } });
  const error = await failure(t, stale.login(LOGIN));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /401.*300 s/);

  const skewed = connect({}, { wallClock: { now: () => Date.now() - 200_000 } });
  t.equal((await skewed.login(LOGIN)).kind, 'session', 'a skew within 300 s is accepted');
});

t.test('every fault code passes through as that ConnectorError code', async (t) => {
  const { gateway, connector } = await fixture(t);
  for (const code of CONNECTOR_ERROR_CODES) {
    gateway.setFaults({ error: code });
    const error = await failure(t, connector.login(LOGIN));
    t.equal(error.code, code, code);
  }
  gateway.setFaults({ error: 'bank_unavailable', status: 500 });
  t.equal((await failure(t, connector.login(LOGIN))).code, 'bank_unavailable', 'a 500 with a known code');
  gateway.setFaults({ error: 'account_locked', status: 400 });
  t.equal((await failure(t, connector.login(LOGIN))).code, 'account_locked', 'any 4xx with a known code');
  gateway.setFaults({ error: 'bank_unavailable', rate: 0 });
  t.equal((await connector.login(LOGIN)).kind, 'session', 'rate 0 never faults');
  gateway.setFaults({});
  t.equal((await connector.login(LOGIN)).kind, 'session', '{} clears the faults');
  t.throws(() => gateway.setFaults({ rate: 2 }), RangeError);
  t.throws(() => gateway.setFaults({ error: 'nope' as never }), RangeError);
});

t.test('latency above timeoutMs is a timeout at timeoutMs, not a wait for the answer', async (t) => {
  const { gateway, connector } = await fixture(t, undefined, SLOW_GATEWAY_MS);
  let started = Date.now();
  const error = await failure(t, connector.login(LOGIN));
  const elapsed = Date.now() - started;
  t.equal(error.code, 'timeout');
  t.match(error.message, new RegExp(`within ${TIMEOUT_MS} ms`));
  t.ok(elapsed >= TIMEOUT_MS - 10, `not before the deadline: gave up after ${elapsed} ms`);
  t.ok(elapsed < SLOW_GATEWAY_MS / 2, 'long before the gateway would have answered');

  gateway.setFaults({ latencyMs: 20 });
  t.equal((await connector.login(LOGIN)).kind, 'session', 'a fault latency below the deadline is fine');

  gateway.setFaults({ latencyMs: SLOW_GATEWAY_MS });
  started = Date.now();
  t.equal((await failure(t, connector.listAccounts({ holderName: 'x', state: {} }, NOW))).code, 'timeout');
  t.ok(Date.now() - started < SLOW_GATEWAY_MS / 2, 'every call has the deadline');
});

t.test('a hung gateway is a timeout', async (t) => {
  const { gateway, connector } = await fixture(t);
  gateway.setFaults({ hang: true });
  const started = Date.now();
  const error = await failure(t, connector.login(LOGIN));
  t.equal(error.code, 'timeout');
  t.ok(Date.now() - started < SLOW_GATEWAY_MS / 2, `gave up after ${Date.now() - started} ms`);
});

t.test('a refused connection is bank_unavailable', async (t) => {
  const { gateway, connect } = await fixture(t);
  const url = gateway.url;
  await gateway.close();
  const error = await failure(t, connect({ url }).login(LOGIN));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /could not be reached \(ECONNREFUSED\)/);
});

t.test('a 5xx without a known code or an unparseable body is bank_unavailable', async (t) => {
  const { gateway, connector } = await fixture(t);
  gateway.setFaults({ status: 500 });
  let error = await failure(t, connector.login(LOGIN));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /answered \/v1\/login with 500 and no error code/);

  const weird = await rawServer(t, (req, res) => {
    if (req.url === '/v1/login') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind": "sess');
    } else if (req.url === '/v1/accounts') {
      res
        .writeHead(200)
        .end(JSON.stringify({ accounts: [{ ...accountToWire(ACCOUNT), balance: { available: 1.5 } }] }));
    } else if (req.url === '/v1/movements') {
      res.writeHead(502).end(JSON.stringify({ error: { code: 'upstream_down', message: 'nginx' } }));
    } else {
      res.writeHead(404).end('not found');
    }
  });
  const connector2 = createHttpConnector({ url: weird, secret: SECRET, timeoutMs: TIMEOUT_MS }, 'bci');
  error = await failure(t, connector2.login(LOGIN));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /not JSON/);
  error = await failure(t, connector2.listAccounts({ holderName: 'x', state: {} }, NOW));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /invalid body: accounts\[0\]\.balance\.available must be an integer/);
  error = await failure(
    t,
    connector2.listMovements({ holderName: 'x', state: {} }, ACCOUNT, { from: 0, to: 1 }, NOW),
  );
  t.equal(error.code, 'bank_unavailable', 'an unknown code');
  t.match(error.message, /502 \(upstream_down: nginx\)/);
  error = await failure(
    t,
    connector2.statements!({ holderName: 'x', state: {} }, ACCOUNT, { from: 0, to: 1 }, NOW),
  );
  t.equal(error.code, 'bank_unavailable', 'a 404 without a code (a wrong URL)');
});

t.test('a redirect is not followed', async (t) => {
  let targetHits = 0;
  const target = await rawServer(t, (_req, res) => {
    targetHits++;
    res.writeHead(200).end(JSON.stringify({ kind: 'session', session: { holder_name: 'x', state: {} } }));
  });
  const redirecting = await rawServer(t, (_req, res) => {
    res.writeHead(307, { location: `${target}/v1/login` }).end();
  });
  const connector = createHttpConnector({ url: redirecting, secret: SECRET, timeoutMs: TIMEOUT_MS }, 'bci');
  const error = await failure(t, connector.login(LOGIN));
  t.equal(error.code, 'bank_unavailable');
  t.match(error.message, /redirect \(307\), which is not followed/);
  t.equal(targetHits, 0, 'the redirect target was never called');
});

t.test('a base URL with a trailing slash or a path prefix is signed as sent', async (t) => {
  const { gateway, connect } = await fixture(t);
  t.equal((await connect({ url: `${gateway.url}/` }).login(LOGIN)).kind, 'session');

  let seen: { path?: string; signature?: string } = {};
  const prefixed = await rawServer(t, (req, res) => {
    seen = { path: req.url, signature: String(req.headers['svc-gateway-signature']) };
    res.writeHead(200).end(JSON.stringify({ kind: 'session', session: { holder_name: 'x', state: {} } }));
  });
  await createHttpConnector(
    { url: `${prefixed}/banks/bci/`, secret: SECRET, timeoutMs: TIMEOUT_MS },
    'bci',
  ).login(LOGIN);
  t.equal(seen.path, '/banks/bci/v1/login');
  t.match(seen.signature, /^v1=[0-9a-f]{64}$/);
});

t.test('POST /_admin/faults sets the faults and requires the signature', async (t) => {
  const { gateway, connector } = await fixture(t);

  const unsigned = await post(gateway.url, '/_admin/faults', { error: 'account_locked' }, null);
  t.equal(unsigned.status, 401);
  const badlySigned = await post(
    gateway.url,
    '/_admin/faults',
    { error: 'account_locked' },
    { secret: 'x'.repeat(20) },
  );
  t.equal(badlySigned.status, 401);
  t.same(gateway.faults(), {}, 'nothing changed');

  const set = await post(gateway.url, '/_admin/faults', { error: 'account_locked', rate: 1 }, {});
  t.equal(set.status, 200);
  t.same(set.body.faults, { error: 'account_locked', rate: 1, latency_ms: null, hang: false, status: null });
  t.equal((await failure(t, connector.login(LOGIN))).code, 'account_locked');

  const invalid = await post(gateway.url, '/_admin/faults', { error: 'nope' }, {});
  t.equal(invalid.status, 400);
  t.equal(invalid.body.error.code, 'invalid_request');
  const unknownField = await post(gateway.url, '/_admin/faults', { latency: 5 }, {});
  t.equal(unknownField.status, 400);
  t.equal(gateway.faults().error, 'account_locked', 'a bad request leaves the faults alone');

  t.equal((await post(gateway.url, '/_admin/faults', {}, {})).status, 200);
  t.equal((await connector.login(LOGIN)).kind, 'session', 'an empty body clears them');

  const wrongEndpoint = await post(gateway.url, '/v1/nope', {}, {});
  t.equal(wrongEndpoint.status, 404);
  const malformed = await post(gateway.url, '/v1/login', { bank_id: 'bci' }, {});
  t.equal(malformed.status, 400);
  t.match(malformed.body.error.message, /holder_type/);
});

t.test('the sandbox served through the gateway answers exactly as the sandbox called directly', async (t) => {
  const sandbox = createSandboxConnector();
  // The sandbox builds years of movements per call; the short deadline of the timeout tests is not under
  // test here, and a loaded CI machine once went past it.
  const connector = (await fixture(t, sandbox)).connect({ timeoutMs: 10_000 });
  const request: LoginRequest = {
    ...LOGIN,
    credentials: { ...LOGIN.credentials, password: 'sandbox' },
    history: { attempts: 3, successes: 3 },
  };
  const [remote, local] = [await connector.login(request), await sandbox.login(request)];
  t.same(remote, local, 'the same session');
  if (remote.kind !== 'session') return t.fail('a sandbox login opens a session');

  const accounts = await connector.listAccounts(remote.session, NOW);
  t.same(accounts, await sandbox.listAccounts(remote.session, NOW), 'the same accounts and balances');
  t.ok(accounts.length > 0, `${accounts.length} accounts`);
  const window = { from: NOW - 90 * 86_400_000, to: NOW + 1 };
  const old = { from: NOW - 3 * 365 * 86_400_000, to: NOW - 200 * 86_400_000 };
  let rows = 0;
  for (const account of accounts) {
    const movements = await connector.listMovements(remote.session, account, window, NOW);
    t.same(
      movements,
      await sandbox.listMovements(remote.session, account, window, NOW),
      `${account.ref} movements`,
    );
    const statements = await connector.statements!(remote.session, account, old, NOW);
    t.same(
      statements,
      await sandbox.statements!(remote.session, account, old, NOW),
      `${account.ref} statements`,
    );
    rows += movements.length + statements.length;
  }
  t.ok(rows > 0, `${rows} rows compared`);

  const mfaRequest = { ...request, credentials: { ...request.credentials, password: 'sandbox-mfa' } };
  const challenge = await connector.login(mfaRequest);
  if (challenge.kind !== 'mfa') return t.fail('sandbox-mfa asks for a code when interactive');
  t.equal(
    (await failure(t, connector.submitMfa(mfaRequest, challenge.challenge, '000000'))).code,
    'mfa_invalid',
  );
  t.same(
    await connector.submitMfa(mfaRequest, challenge.challenge, '123456'),
    await sandbox.submitMfa(mfaRequest, challenge.challenge, '123456'),
  );
  const late = { ...mfaRequest, now: challenge.challenge.expiresAt + 1 };
  t.equal((await failure(t, connector.submitMfa(late, challenge.challenge, '123456'))).code, 'mfa_expired');

  const individual = { ...request, holderType: 'individual' as const };
  const session = await connector.login({
    ...individual,
    credentials: { ...individual.credentials, rutEmpresa: null },
  });
  if (session.kind !== 'session') return t.fail('an individual login opens a session');
  const [first] = await connector.listAccounts(session.session, NOW);
  const unsupported = await failure(t, connector.statements!(session.session, first!, old, NOW));
  t.equal(unsupported.code, 'unsupported', 'statements only for bci business holders');
});

t.test('neither the shared secret nor the password appears in any error message', async (t) => {
  // A gateway that echoes both back, the worst case.
  const echoing = await rawServer(t, (_req, res) => {
    res.writeHead(422).end(
      JSON.stringify({
        error: { code: 'rejected_credentials', message: `password ${PASSWORD} is wrong; secret ${SECRET}` },
      }),
    );
  });
  const error = await failure(
    t,
    createHttpConnector({ url: echoing, secret: SECRET, timeoutMs: TIMEOUT_MS }, 'bci').login(LOGIN),
  );
  t.equal(error.code, 'rejected_credentials');
  t.match(error.message, /password \[redacted\] is wrong; secret \[redacted\]/);

  t.ok(messages.length >= 25, `${messages.length} messages checked`);
  for (const message of messages) {
    t.notOk(message.includes(SECRET), `no secret in: ${message}`);
    t.notOk(message.includes(PASSWORD), `no password in: ${message}`);
  }
});

t.test('the signature example of docs/connector-protocol.md holds', async (t) => {
  const body =
    '{"bank_id":"bci","session":{"holder_name":"Ana Pérez","state":{"token":"abc"}},"now":"2026-01-15T12:00:00.000Z"}';
  t.equal(
    gatewaySignature('gw_0123456789abcdef', 1768478400, 'POST', '/v1/accounts', body),
    '142e2784256e6d65eb111d9728254fb715482698c573b5a92bd7aef6f9b3367a',
  );
  t.same(signatureHeaders('gw_0123456789abcdef', 'POST', '/v1/accounts', body, 1768478400_999), {
    'Svc-Gateway-Timestamp': '1768478400',
    'Svc-Gateway-Signature': 'v1=142e2784256e6d65eb111d9728254fb715482698c573b5a92bd7aef6f9b3367a',
  });
});
