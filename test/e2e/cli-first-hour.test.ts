import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import knexFactory from 'knex';
import { randomBytes } from 'node:crypto';
import { REPO_ROOT, freePort, installedHome, runCli, startServe } from '../helpers/cli.js';
import { engines, forEachEngine, linkBody } from '../helpers/harness.js';

/**
 * The first hour of an operator, read as they read it: what `svc` prints on stdout and stderr, and its exit
 * code. Help and suggestions, tables with a header row, and mistakes (no installation, a database that does
 * not answer) that are refused with one line and change nothing.
 */

/** A directory that is not an installation, removed after the test. */
function emptyHome(t: Test): string {
  const home = mkdtempSync(join(tmpdir(), 'svc-test-empty-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  return home;
}

/** Every command that reads or writes the installation, with arguments that would pass its parser. */
const DATABASE_COMMANDS: string[][] = [
  ['status'],
  ['migrate'],
  ['migrate', '--status'],
  ['orgs', 'list'],
  ['orgs', 'create', 'Acme'],
  ['keys', 'list'],
  ['keys', 'create', '--mode', 'test', '--type', 'secret'],
  ['keys', 'revoke', 'key_0123456789abcdef'],
  ['links', 'list'],
  ['links', 'inspect', 'link_0123456789abcdef'],
  ['links', 'pause', 'link_0123456789abcdef'],
  ['webhooks', 'endpoints'],
  ['webhooks', 'deliveries'],
  ['webhooks', 'redeliver', 'wd_0123456789abcdef'],
  ['webhooks', 'listen', '--forward-to', 'http://127.0.0.1:9/hook'],
  ['sandbox', 'fire', 'link.created', '--link', 'link_0123456789abcdef'],
  ['master-key', 'rotate'],
  ['master-key', 'retire'],
];

/** A reader, a writer, the one that keeps a connection open and the supervisor's status. */
const JSON_SAMPLE: string[][] = [
  ['status'],
  ['keys', 'create', '--mode', 'test', '--type', 'secret'],
  ['links', 'list'],
  ['webhooks', 'listen', '--forward-to', 'http://127.0.0.1:9/hook'],
];

/** What a person reads on a failure: one line on stderr, no stack, no driver noise. */
function assertOneLine(t: Test, stderr: string, label: string): void {
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, 1, `${label}: one line on stderr (got ${JSON.stringify(stderr)})`);
  t.notMatch(stderr, /^\s+at /m, `${label}: no stack trace`);
  t.notMatch(stderr, /Acquire connection error|select \*|from `/, `${label}: no driver or SQL text`);
}

t.test('svc help, svc help COMMAND, topics and suggestions', async (t) => {
  const home = emptyHome(t);
  const help = await runCli(['help'], { home });
  t.equal(help.code, 0, 'svc help exits 0');
  t.match(help.stdout, /USAGE\s+\$ svc \[COMMAND\]/);
  const pjson = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    oclif: { topics: Record<string, { description: string }> };
  };
  for (const [topic, { description }] of Object.entries(pjson.oclif.topics)) {
    const words = description
      .split(' ')
      .slice(0, 4)
      .map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('\\s+');
    // A nested topic (`console:users`) is listed by its parent's help (`svc help console`), as `console users`.
    const path = topic.split(':');
    const parentHelp = path.length === 1 ? help : await runCli(['help', ...path.slice(0, -1)], { home });
    t.match(
      parentHelp.stdout,
      new RegExp(`\\n\\s+${path.join(' ')}\\s+${words}`),
      `topic ${topic} shows its own description`,
    );
    const topicHelp = await runCli(['help', ...path], { home });
    t.equal(topicHelp.code, 0, `svc help ${path.join(' ')} exits 0`);
    t.match(topicHelp.stdout, /COMMANDS|TOPICS/, `svc help ${path.join(' ')} lists its commands or topics`);
  }
  t.equal(readdirSync(home).length, 0, 'help creates nothing in the home');

  const keysList = await runCli(['help', 'keys', 'list'], { home });
  t.equal(keysList.code, 0, 'svc help keys list exits 0');
  t.match(keysList.stdout, /\$ svc keys list/, 'it shows the usage');
  t.match(keysList.stdout, /--org=<value>/, 'and every flag');
  t.match(keysList.stdout, /--home=<value>/, 'the global ones too');
  const viaFlag = await runCli(['keys', 'list', '--help'], { home });
  t.equal(viaFlag.code, 0);
  t.equal(viaFlag.stdout, keysList.stdout, '--help shows the same');

  const typo = await runCli(['keys', 'lisst'], { home, timeoutMs: 30_000, ownProcess: true });
  t.notOk(typo.timedOut, 'a mistyped command does not wait for an answer without a terminal');
  t.not(typo.code, 0, 'it exits non-zero');
  t.match(typo.message, /Did you mean svc keys list\?/, 'and says what was meant');
  const topicTypo = await runCli(['key', 'list'], { home, timeoutMs: 30_000 });
  t.match(topicTypo.message, /Did you mean svc keys list\?/, 'a mistyped topic too');
  t.not(topicTypo.code, 0);
  const json = await runCli(['keys', 'lisst', '--json'], { home, timeoutMs: 30_000 });
  t.not(json.code, 0);
  t.match(JSON.parse(json.stdout), {
    error: {
      code: 'command_not_found',
      suggestion: 'svc keys list',
      message: /Did you mean svc keys list\?/,
    },
  });
  const usageMistakes: [string, string[]][] = [
    ['--name', ['orgs', 'create', '--name', 'Acme', '--json']],
    ['--bogus', ['keys', 'list', '--bogus', '--json']],
  ];
  for (const [flag, args] of usageMistakes) {
    const usage = await runCli(args, { home, timeoutMs: 30_000 });
    t.equal(usage.code, 2, `svc ${args.join(' ')}: a usage mistake exits 2`);
    t.same(
      JSON.parse(usage.stdout),
      { error: { code: 'usage', message: `Nonexistent flag: ${flag}\nSee more help with --help` } },
      "and --json answers the code and message alone, not oclif's parse context",
    );
  }
  const nothingClose = await runCli(['frobnicate'], { home, timeoutMs: 30_000 });
  t.not(nothingClose.code, 0);
  t.notMatch(nothingClose.message, /Did you mean/, 'no random suggestion when nothing is close');
  t.match(nothingClose.message, /svc help/);
});

t.test('a home without an installation: one line, non-zero, nothing created', async (t) => {
  const home = emptyHome(t);
  const missing = join(home, 'not-there');
  for (const args of DATABASE_COMMANDS) {
    const label = `svc ${args.join(' ')}`;
    const result = await runCli(args, { home, timeoutMs: 30_000 });
    t.equal(result.code, 78, `${label} exits 78`);
    t.match(
      result.stderr,
      /^Error: No svc installation in .*Run `svc install` first/,
      `${label} says to install`,
    );
    assertOneLine(t, result.stderr, label);
  }
  // --json goes through the same catch for every command: a few of them show it.
  for (const args of JSON_SAMPLE) {
    const json = await runCli([...args, '--json'], { home, timeoutMs: 30_000 });
    t.equal(json.code, 78, `svc ${args.join(' ')} --json exits 78`);
    t.match(JSON.parse(json.stdout), { error: { code: 'not_installed', message: /svc install/ } });
  }
  for (const args of DATABASE_COMMANDS.slice(0, 3)) {
    const elsewhere = await runCli([...args, '--home', missing], { home, timeoutMs: 30_000 });
    t.equal(elsewhere.code, 78, `svc ${args.join(' ')} --home DIR-that-does-not-exist exits 78`);
  }
  const serve = await runCli(['serve', '--port', String(await freePort())], {
    home,
    env: { SVC_METRICS_PORT: '0' },
    timeoutMs: 30_000,
  });
  t.equal(serve.code, 78, 'svc serve refuses too');
  t.match(serve.stderr, /svc install/);
  t.same(readdirSync(home), [], 'nothing was created in the home');
});

t.test('an unreachable database: one line with engine, host and cause; no password', async (t) => {
  const home = emptyHome(t);
  const password = 'pw-canary-7f3a';
  writeFileSync(
    join(home, 'config.json'),
    JSON.stringify({ databaseUrl: `postgres://postgres:${password}@127.0.0.1:1/test` }),
  );
  for (const args of DATABASE_COMMANDS) {
    const label = `svc ${args.join(' ')}`;
    const result = await runCli(args, { home, timeoutMs: 30_000 });
    t.equal(result.code, 69, `${label} exits 69`);
    t.match(
      result.stderr,
      /^Error: Cannot reach the database \(postgres 127\.0\.0\.1:1\/test\): connect ECONNREFUSED/,
      `${label} names the engine, the host and the cause`,
    );
    assertOneLine(t, result.stderr, label);
    t.notOk((result.stdout + result.stderr).includes(password), `${label} prints no password`);
  }
  for (const args of JSON_SAMPLE) {
    const label = `svc ${args.join(' ')} --json`;
    // As processes of their own: a pool left open on a failed connection would keep one from exiting.
    const json = await runCli([...args, '--json'], { home, timeoutMs: 30_000, ownProcess: true });
    t.notOk(json.timedOut, `${label} exits by itself`);
    t.equal(json.code, 69, `${label} exits 69`);
    t.match(JSON.parse(json.stdout), {
      error: { code: 'database_unavailable', message: /postgres 127\.0\.0\.1:1\/test/ },
    });
    t.notOk((json.stdout + json.stderr).includes(password), `${label} prints no password`);
  }
  t.same(readdirSync(home), ['config.json'], 'nothing was created in the home');

  const sqliteHome = emptyHome(t);
  writeFileSync(join(sqliteHome, 'svc.db'), 'this is not a database '.repeat(100));
  for (const args of [['status'], ['keys', 'list']]) {
    const result = await runCli(args, { home: sqliteHome, timeoutMs: 30_000 });
    t.equal(result.code, 69, `svc ${args.join(' ')} on a file that is not a database exits 69`);
    t.match(result.stderr, /^Error: Cannot reach the database \(sqlite .*svc\.db\): SQLITE_NOTADB/);
    assertOneLine(t, result.stderr, `svc ${args.join(' ')}`);
  }
  if (process.getuid?.() !== 0) {
    // root reads any file whatever its mode, so this runs only for other users
    const readable = emptyHome(t);
    writeFileSync(join(readable, 'svc.db'), '');
    chmodSync(join(readable, 'svc.db'), 0o000);
    const result = await runCli(['keys', 'list'], { home: readable, timeoutMs: 30_000 });
    t.equal(result.code, 69, 'an unreadable SQLite file exits 69');
    assertOneLine(t, result.stderr, 'unreadable file');
  }
});

if (engines().includes('postgres')) {
  t.test('a Postgres database without svc tables says to install', async (t) => {
    const base = process.env.SVC_TEST_DATABASE_URL!;
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
    await admin.raw(`create schema ${schema}`);
    t.teardown(async () => {
      await admin.raw(`drop schema if exists ${schema} cascade`);
      await admin.destroy();
    });
    const home = emptyHome(t);
    const url = `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`;
    writeFileSync(join(home, 'config.json'), JSON.stringify({ databaseUrl: url }));
    for (const args of [['status'], ['keys', 'list'], ['links', 'list']]) {
      const result = await runCli(args, { home, timeoutMs: 30_000 });
      t.equal(result.code, 78, `svc ${args.join(' ')} exits 78`);
      t.match(result.stderr, /has no svc tables\. Run `svc install` first/);
      assertOneLine(t, result.stderr, `svc ${args.join(' ')}`);
    }
  });
}

forEachEngine(t, async (t, engine) => {
  const { home, key, orgId } = await installedHome(t, engine);
  const serve = await startServe(t, { home, args: ['--roles', 'api'] });
  const endpoint = await serve.request('POST', '/v1/webhook_endpoints', {
    key,
    body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'] },
  });
  t.equal(endpoint.status, 200, 'an endpoint to list');
  const link = await serve.request('POST', '/v1/links', { key, body: linkBody() });
  t.equal(link.status, 200, 'a link to list, whose link.created makes a delivery to list');

  const tables: { args: string[]; headers: string[]; row: string }[] = [
    { args: ['orgs', 'list'], headers: ['ID', 'CREATED', 'NAME'], row: orgId },
    {
      args: ['keys', 'list'],
      headers: ['ID', 'KEY', 'STATUS', 'ORG', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED', 'LIMITS'],
      row: orgId,
    },
    {
      args: ['links', 'list'],
      headers: ['ID', 'MODE', 'BANK', 'STATUS', 'LAST SYNC', 'NEXT SYNC', 'LAST ERROR'],
      row: link.body.id as string,
    },
    {
      args: ['webhooks', 'endpoints'],
      headers: ['ID', 'ORG', 'MODE', 'STATE', 'URL', 'EVENTS'],
      row: endpoint.body.id as string,
    },
    {
      args: ['webhooks', 'deliveries'],
      headers: ['ID', 'MODE', 'EVENT TYPE', 'EVENT', 'ENDPOINT', 'STATUS', 'ATTEMPTS', 'LAST ERROR'],
      row: endpoint.body.id as string,
    },
    { args: ['migrate', '--status'], headers: ['STATE', 'MIGRATION'], row: 'applied' },
    { args: ['status'], headers: ['ROLE', 'PID', 'STATUS', 'UPTIME', 'RESTARTS', 'LAST EXIT'], row: 'api' },
  ];
  for (const { args, headers, row } of tables) {
    await t.test(`svc ${args.join(' ')} prints a header row`, async (t) => {
      const result = await runCli(args, { home });
      t.equal(result.code, 0);
      const lines = result.stdout.split('\n');
      const header = lines.findIndex((line) => line.trim().startsWith(headers[0]!));
      t.ok(header >= 0, 'there is a header row');
      t.same(lines[header]?.trim().split(/\s{2,}/), headers, 'naming every column');
      t.ok(
        lines.slice(header + 1).some((line) => line.includes(row)),
        'above the rows',
      );
    });
  }
  const empty = await runCli(['links', 'list', '--bank', 'bci'], { home });
  t.match(
    empty.stdout.trim(),
    new RegExp(`^No links match \\(data directory ${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)\\.`),
    'an empty list says so and where it looked, with no header',
  );
});
