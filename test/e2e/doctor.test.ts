import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import { migrationNames } from '../../src/db/migrations.js';
import { createMasterKeyFile } from '../../src/secrets/master-key-file.js';
import { freePort, installedHome, runCli, startServe, withDatabase } from '../helpers/cli.js';
import { forEachEngine } from '../helpers/harness.js';

interface Check {
  check: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  fix: string | null;
}

/** A TCP listener that is not svc, holding a port until the test ends. */
async function foreignListener(t: Test): Promise<number> {
  const server: Server = createServer((socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

forEachEngine(t, async (t, engine) => {
  const { database, home, key } = await installedHome(t, engine);
  // Ports of our own, so that another test's `svc serve` on 8080 is not taken for a problem here.
  const ports = { SVC_API_PORT: String(await freePort()), SVC_METRICS_PORT: String(await freePort()) };
  /** `svc doctor` as a person runs it: the table, the exit code; and the same with --json. */
  const doctor = async (env: Record<string, string> = {}, where = home) => {
    const text = await runCli(['doctor'], { home: where, env: { ...ports, ...env }, timeoutMs: 60_000 });
    const json = await runCli(['doctor', '--json'], {
      home: where,
      env: { ...ports, ...env },
      timeoutMs: 60_000,
    });
    const report = JSON.parse(json.stdout) as { ok: boolean; checks: Check[] };
    t.equal(json.code, text.code, '--json exits as the table does');
    const byName = (name: string) => report.checks.find((c) => c.check === name);
    return { text, report, byName };
  };
  /** The table row of a check, as printed. */
  const row = (stdout: string, check: string) =>
    stdout.split('\n').find((line) => line.startsWith(`${check} `));
  /** A check's row and the indented lines under it (its detail wrapped, then its fix), joined by spaces. */
  const block = (stdout: string, check: string) => {
    const lines = stdout.split('\n');
    const start = lines.findIndex((line) => line.startsWith(`${check} `));
    const end = lines.findIndex((line, i) => i > start && !line.startsWith(' '));
    return lines
      .slice(start, end)
      .map((line) => line.trim())
      .join(' ');
  };

  await t.test('a healthy installation: every check ok, exit 0', async (t) => {
    const { text, report } = await doctor();
    t.equal(text.code, 0, 'exit 0');
    t.match(text.stdout.split('\n')[0]?.split(/\s{2,}/), ['CHECK', 'STATUS', 'DETAIL'], 'a header row');
    t.same(
      report.checks.filter((c) => c.status !== 'ok'),
      [],
      'nothing to fix',
    );
    t.same(
      report.checks.map((c) => c.check),
      [
        'node',
        'config',
        'data-dir',
        'master-key',
        'database',
        'schema',
        'api-port',
        'metrics-port',
        'clock',
        'disk',
        'retention',
        'connectors',
        'consent-bank',
        'bank-budgets',
      ],
    );
    t.match(row(text.stdout, 'schema'), /ok\s+all \d+ migrations applied/);
    t.match(
      block(text.stdout, 'retention'),
      /ok\s+events 30 d, .*audit log kept forever; movements never pruned/,
    );
    t.match(text.stdout, /14 ok, 0 warning\(s\), 0 failed\./);
  });

  await t.test('with svc serve running: its ports are ours; the key opens a stored secret', async (t) => {
    const serve = await startServe(t, {
      home,
      port: Number(ports.SVC_API_PORT),
      env: { SVC_METRICS_PORT: ports.SVC_METRICS_PORT },
      args: ['--roles', 'api'],
    });
    // A webhook endpoint stores its signing secret sealed with the master key.
    const endpoint = await serve.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'] },
    });
    t.equal(endpoint.status, 200);
    const { text, byName } = await doctor();
    t.equal(text.code, 0);
    t.match(byName('api-port'), { status: 'ok', detail: /held by svc serve from this home/ });
    t.match(byName('metrics-port'), { status: 'ok', detail: /held by svc serve/ });
    t.match(byName('master-key'), {
      status: 'ok',
      detail: /opens a stored secret \(webhook_endpoints\.secret_encrypted\)/,
    });
    serve.process.kill('SIGTERM');
    await serve.exited;
  });

  await t.test('a port held by another program fails with its fix', async (t) => {
    const port = await foreignListener(t);
    const { text, byName } = await doctor({ SVC_API_PORT: String(port) });
    t.equal(text.code, 1, 'exit 1');
    t.match(byName('api-port'), {
      status: 'fail',
      detail: new RegExp(`127\\.0\\.0\\.1:${port} is held by another program`),
      fix: /SVC_API_PORT/,
    });
    t.match(block(text.stdout, 'api-port'), /fail\s+.*is held by another program.* fix: Stop what listens/);
  });

  await t.test(
    'a busy metrics port warns (svc serve starts without metrics); rows fit the width',
    async (t) => {
      const port = await foreignListener(t);
      const { text, byName } = await doctor({ SVC_METRICS_PORT: String(port), COLUMNS: '80' });
      t.equal(text.code, 0, 'a warning does not fail doctor');
      t.match(byName('metrics-port'), { status: 'warn', detail: /svc serve starts without metrics/ });
      const lines = text.stdout.split('\n');
      t.same(
        lines.filter((line) => line.length > 80),
        [],
        'no line is wider than the 80 columns asked for',
      );
      const at = lines.findIndex((line) => line.startsWith('metrics-port '));
      t.match(lines[at], /^metrics-port\s+warn\s+127\.0\.0\.1:\d+ is held by another program/);
      const fixLine = lines.findIndex((line, i) => i > at && line.trim().startsWith('fix: '));
      t.ok(
        fixLine > at && lines.slice(at + 1, fixLine + 1).every((line) => line.startsWith(' '.repeat(8))),
        'the fix follows its check on the indented lines under it',
      );
      t.match(block(text.stdout, 'metrics-port'), /fix: Stop what listens on .*\(SVC_METRICS_PORT\)/);
      t.match(text.stdout, /13 ok, 1 warning\(s\), 0 failed\./);
    },
  );

  await t.test('the master key: loose mode, missing, the wrong key', async (t) => {
    const keyFile = join(home, 'master.key');
    chmodSync(keyFile, 0o644);
    let result = await doctor();
    chmodSync(keyFile, 0o600);
    t.equal(result.text.code, 1);
    t.match(result.byName('master-key'), { status: 'fail', detail: /0644/, fix: `chmod 600 ${keyFile}` });
    t.match(result.byName('data-dir'), { status: 'fail', fix: /chmod -R go-rwx/ });

    renameSync(keyFile, `${keyFile}.aside`);
    result = await doctor();
    renameSync(`${keyFile}.aside`, keyFile);
    t.equal(result.text.code, 1);
    t.match(result.byName('master-key'), {
      status: 'fail',
      detail: /missing/,
      fix: /Restore .*from your backup/,
    });

    // A key file from another installation (a restore from the wrong backup): present, private, well formed.
    const other = mkdtempSync(join(tmpdir(), 'svc-test-otherkey-'));
    t.teardown(() => rmSync(other, { recursive: true, force: true }));
    createMasterKeyFile(join(other, 'master.key'), new Date());
    renameSync(keyFile, `${keyFile}.aside`);
    writeFileSync(keyFile, readFileSync(join(other, 'master.key')), { mode: 0o600 });
    result = await doctor();
    renameSync(`${keyFile}.aside`, keyFile);
    t.equal(result.text.code, 1);
    t.match(result.byName('master-key'), {
      status: 'fail',
      detail: /does not open a stored secret \(webhook_endpoints\.secret_encrypted/,
      fix: /Restore the master key file that sealed/,
    });

    t.equal((await doctor()).text.code, 0, 'healthy again once restored');
  });

  await t.test('a pending migration fails with `svc migrate`', async (t) => {
    const last = migrationNames().at(-1)!;
    const row = await withDatabase(database.url, (db) =>
      db.knex('knex_migrations').where({ name: last }).first(),
    );
    await withDatabase(database.url, (db) => db.knex('knex_migrations').where({ name: last }).delete());
    t.teardown(() => withDatabase(database.url, (db) => db.knex('knex_migrations').insert(row)));
    const { text, byName } = await doctor();
    t.equal(text.code, 1);
    t.match(byName('schema'), {
      status: 'fail',
      detail: new RegExp(`1 pending migration.*${last}`),
      fix: 'Run `svc migrate`.',
    });
  });

  await t.test('an unreachable database fails with engine, host and fix; no password', async (t) => {
    const { text, byName } = await doctor({
      SVC_DATABASE_URL: 'postgres://postgres:pw-canary-9c1@127.0.0.1:1/test',
    });
    t.equal(text.code, 1);
    t.match(byName('database'), {
      status: 'fail',
      detail: /postgres 127\.0\.0\.1:1\/test: .*ECONNREFUSED/,
      fix: /Start the database server/,
    });
    t.match(byName('schema'), { status: 'warn' });
    t.match(byName('master-key'), { status: 'warn', detail: /not tried/ });
    t.notOk(text.stdout.includes('pw-canary-9c1') || text.stderr.includes('pw-canary-9c1'), 'no password');
  });

  await t.test('a live-mode connector that does not answer fails; one that does is ok', async (t) => {
    const configFile = join(home, 'config.json');
    const original = readFileSync(configFile, 'utf8');
    t.teardown(() => writeFileSync(configFile, original));
    const withConnector = (url: string) => {
      const config = JSON.parse(original);
      config.banks = { connectors: { bancochile: { url, secret: 'gateway-secret-0123456789' } } };
      writeFileSync(configFile, JSON.stringify(config));
    };
    const closed = await freePort();
    withConnector(`http://127.0.0.1:${closed}`);
    let result = await doctor();
    t.equal(result.text.code, 1);
    t.match(result.byName('connector bancochile'), { status: 'fail', fix: /Start the gateway/ });
    const open = await foreignListener(t);
    withConnector(`http://127.0.0.1:${open}`);
    result = await doctor();
    t.equal(result.text.code, 0);
    t.match(result.byName('connector bancochile'), { status: 'ok', detail: /accepts connections/ });
  });

  await t.test('a clock offset warns and does not fail', async (t) => {
    const { text, byName } = await doctor({ SVC_CLOCK_OFFSET_MS: '60000' });
    t.equal(text.code, 0);
    t.match(byName('clock'), { status: 'warn', fix: /SVC_CLOCK_OFFSET_MS/ });
  });
});

t.test('a home without an installation: doctor says so and creates nothing', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'svc-test-empty-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const ports = { SVC_API_PORT: String(await freePort()), SVC_METRICS_PORT: String(await freePort()) };
  const result = await runCli(['doctor', '--json'], { home, env: ports });
  t.equal(result.code, 1);
  const report = JSON.parse(result.stdout) as { checks: Check[] };
  t.match(
    report.checks.find((c) => c.check === 'database'),
    { status: 'fail', fix: 'Run `svc install`.' },
  );
  t.same(readdirSync(home), [], 'nothing created');

  const garbage = mkdtempSync(join(tmpdir(), 'svc-test-notadb-'));
  t.teardown(() => rmSync(garbage, { recursive: true, force: true }));
  writeFileSync(join(garbage, 'svc.db'), 'not a database '.repeat(100), { mode: 0o600 });
  createMasterKeyFile(join(garbage, 'master.key'), new Date());
  const broken = await runCli(['doctor', '--json'], { home: garbage, env: ports });
  t.equal(broken.code, 1);
  t.match(
    (JSON.parse(broken.stdout) as { checks: Check[] }).checks.find((c) => c.check === 'database'),
    { status: 'fail', detail: /SQLITE_NOTADB/ },
  );
});
