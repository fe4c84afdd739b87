import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { ConnectorError } from '../../src/banks/connector.js';
import { createHttpConnector } from '../../src/banks/http/http-connector.js';
import { signatureHeaders } from '../../src/banks/http/signature.js';
import { request } from 'undici';
import { HANG_GUARD_MS } from '../helpers/harness.js';
import { spawnOwned } from '../helpers/processes.js';

const CLI_ENTRY = fileURLToPath(new URL('../../../bin/run.js', import.meta.url));
const SECRET = 'e2e-gateway-secret-0123456789';

const LOGIN = {
  bankId: 'bci',
  holderType: 'individual' as const,
  credentials: { rut: '12345678-5', password: 'sandbox', rutEmpresa: null },
  now: Date.now(),
  interactive: false,
  history: { attempts: 0, successes: 0 },
};

function cliEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('SVC_')) env[name] = value;
  }
  return { ...env, ...extra };
}

t.test('svc bank-gateway serves the protocol, takes faults, and stops on SIGTERM', async (t) => {
  const child = spawnOwned(
    process.execPath,
    [CLI_ENTRY, 'bank-gateway', '--port', '0', '--fault', 'mfa_expired', '--latency-ms', '5'],
    { env: cliEnv({ SVC_GATEWAY_SECRET: SECRET }), stdio: ['ignore', 'pipe', 'pipe'] },
    t,
  );
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const deadline = Date.now() + HANG_GUARD_MS;
  let url: string | undefined;
  while (!url && Date.now() < deadline && child.exitCode === null) {
    url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1];
    if (!url) await sleep(50);
  }
  t.ok(url, `it prints its URL (${stderr})`);
  if (!url) return;

  const connector = createHttpConnector({ url, secret: SECRET, timeoutMs: HANG_GUARD_MS }, 'bci');
  const error = await connector.login(LOGIN).catch((e: unknown) => e);
  t.type(error, ConnectorError);
  t.equal((error as ConnectorError).code, 'mfa_expired', '--fault applies');

  const body = JSON.stringify({ error: 'account_locked' });
  const response = await request(`${url}/_admin/faults`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...signatureHeaders(SECRET, 'POST', '/_admin/faults', body, Date.now()),
    },
    body,
  });
  t.equal(response.statusCode, 200);
  await response.body.dump();
  t.equal(((await connector.login(LOGIN).catch((e: unknown) => e)) as ConnectorError).code, 'account_locked');

  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops it cleanly');
  t.match(stdout, /stopped \(SIGTERM\)/);
  t.notOk(stdout.includes(SECRET) || stderr.includes(SECRET), 'the secret is never printed');
});

t.test('svc bank-gateway without a secret says how to give one, without starting', async (t) => {
  const child = spawnOwned(
    process.execPath,
    [CLI_ENTRY, 'bank-gateway', '--port', '0'],
    { env: cliEnv({}), stdio: ['ignore', 'pipe', 'pipe'] },
    t,
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  t.equal(code, 2);
  t.match(stderr.replace(/\s*›\s*/g, ' '), /SVC_GATEWAY_SECRET/);

  const short = spawnOwned(
    process.execPath,
    [CLI_ENTRY, 'bank-gateway', '--port', '0', '--secret', 'short-secret'],
    { env: cliEnv({}), stdio: ['ignore', 'pipe', 'pipe'] },
    t,
  );
  let shortErr = '';
  short.stderr!.on('data', (chunk: Buffer) => (shortErr += chunk.toString()));
  t.equal(await new Promise<number | null>((resolve) => short.once('exit', (c) => resolve(c))), 2);
  t.notOk(shortErr.includes('short-secret'), 'a too-short secret is not echoed');
});
