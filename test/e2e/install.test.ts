import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { maskUrl } from '../../src/db/database-url.js';
import { migrationNames } from '../../src/db/migrations.js';
import { parseApiKey } from '../../src/keys/key-format.js';
import { freePort, installArgs, runCli, runCliJson, startServe, withDatabase } from '../helpers/cli.js';
import { forEachEngine, freshDatabase } from '../helpers/harness.js';

const keyPattern = (brand: string, type: 'sk' | 'pk') =>
  new RegExp(`\\b${brand}_${type}_test_[0-9A-Za-z]{38}\\b`, 'g');

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

async function organisationCount(url: string): Promise<number> {
  return withDatabase(url, async (db) => {
    const [row] = await db.knex('organisations').count({ n: '*' });
    return Number((row as { n: number | string }).n);
  });
}

/** What `svc install --json` prints (src/install/install.ts InstallResult). */
interface InstallJson {
  organisation: { id: string };
  keys?: { secret: string; publishable: string };
  migrationsApplied: string[];
}

forEachEngine(t, async (t, engine) => {
  await t.test('a first install prints one test key of each kind and creates the home', async (t) => {
    const { url, home } = await freshDatabase(t, engine);
    const first = await runCli(installArgs(engine, url), { home });
    t.equal(first.code, 0, 'svc install succeeds');
    t.equal(first.stderr, '', 'and complains about nothing');

    const secrets = first.stdout.match(keyPattern('svc', 'sk')) ?? [];
    const publishables = first.stdout.match(keyPattern('svc', 'pk')) ?? [];
    t.equal(secrets.length, 1, 'one test secret key is printed');
    t.equal(publishables.length, 1, 'one test publishable key is printed');
    t.same(parseApiKey(secrets[0] ?? '', 'svc'), {
      brand: 'svc',
      type: 'secret',
      mode: 'test',
      prefix: 'svc_sk_test_',
    });
    t.same(parseApiKey(publishables[0] ?? '', 'svc'), {
      brand: 'svc',
      type: 'publishable',
      mode: 'test',
      prefix: 'svc_pk_test_',
    });
    t.match(first.stdout, /shown once/i, 'the user is told the keys are shown once');

    const configFile = join(home, 'config.json');
    t.ok(existsSync(configFile), 'config.json is created');
    const config = JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, unknown>;
    if (engine === 'postgres') t.equal(config.databaseUrl, url, 'config.json records the Postgres URL');
    else t.notOk('databaseUrl' in config, 'config.json leaves the default SQLite database implicit');

    const masterKey = join(home, 'master.key');
    t.ok(existsSync(masterKey), 'master.key is created');
    t.equal(statSync(masterKey).mode & 0o777, 0o600, 'master.key has mode 0600');
    if (engine === 'sqlite') t.ok(existsSync(join(home, 'svc.db')), 'the SQLite database file is created');
    t.equal(await organisationCount(url), 1, 'the database holds the default organisation');

    const before = readFileSync(masterKey);
    const again = await runCli(installArgs(engine, url), { home });
    t.equal(again.code, 0, 'running svc install again succeeds');
    t.notMatch(again.stdout, /_(sk|pk)_(test|live)_/, 'and prints no key');
    t.match(again.stdout, /already installed/i, 'it says it is already installed');
    t.same(readFileSync(masterKey), before, 'master.key is byte-identical');
    t.equal(statSync(masterKey).mode & 0o777, 0o600, 'master.key keeps mode 0600');
    t.equal(await organisationCount(url), 1, 'there is still one organisation');
    const orgs = await runCliJson<unknown[]>(t, ['orgs', 'list'], { home });
    t.equal(orgs.length, 1, 'svc orgs list shows one organisation');
    const keys = await runCliJson<unknown[]>(t, ['keys', 'list'], { home });
    t.equal(keys.length, 2, 'and svc keys list the two keys of the first run');
  });

  await t.test('--json prints the organisation and the test keys', async (t) => {
    const { url, home } = await freshDatabase(t, engine);
    const result = await runCliJson<InstallJson>(t, installArgs(engine, url), { home });
    t.match(result, {
      home,
      configFile: join(home, 'config.json'),
      masterKeyFile: join(home, 'master.key'),
      database: engine === 'sqlite' ? `sqlite ${join(home, 'svc.db')}` : /^postgres /,
      createdMasterKey: true,
      organisation: {
        object: 'organisation',
        id: /^org_[0-9a-f]{16}$/,
        name: String,
        created_at: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
      },
      keys: { secret: /^svc_sk_test_[0-9A-Za-z]{38}$/, publishable: /^svc_pk_test_[0-9A-Za-z]{38}$/ },
    });
    t.same(result.migrationsApplied, migrationNames(), 'every migration is applied');

    const orgs = await runCliJson<{ id: string }[]>(t, ['orgs', 'list'], { home });
    t.same(
      orgs.map((org) => org.id),
      [result.organisation.id],
      'the printed organisation is the one that exists',
    );

    const again = await runCliJson(t, installArgs(engine, url), { home });
    t.match(again, {
      createdMasterKey: false,
      organisation: null,
      alreadyInstalled: true,
      migrationsApplied: [],
      newKeysCommand: `svc install --home ${home} --new-keys`,
    });
    t.notOk('keys' in again, 'no keys, and no "keys": null either');
    const text = await runCli(installArgs(engine, url), { home });
    t.match(text.stdout, `For a new pair of test keys: svc install --home ${home} --new-keys`, 'says how');

    const renewed = await runCliJson<InstallJson>(t, installArgs(engine, url, ['--new-keys']), { home });
    t.match(renewed, {
      alreadyInstalled: true,
      organisation: { id: result.organisation.id },
      keys: { secret: /^svc_sk_test_[0-9A-Za-z]{38}$/, publishable: /^svc_pk_test_[0-9A-Za-z]{38}$/ },
    });
    t.not(renewed.keys?.secret, result.keys?.secret, 'a new pair');
    const keys = await runCliJson<{ org_id: string; type: string }[]>(t, ['keys', 'list'], { home });
    t.equal(keys.filter((key) => key.type === 'secret').length, 2, 'beside the first one');
  });

  await t.test('--brand sets the key prefix, and a second install cannot change it', async (t) => {
    const { url, home } = await freshDatabase(t, engine);
    const first = await runCli(installArgs(engine, url, ['--brand', 'acme']), { home });
    t.equal(first.code, 0, 'svc install --brand acme succeeds');
    t.equal(
      (first.stdout.match(keyPattern('acme', 'sk')) ?? []).length,
      1,
      'an acme_sk_test_ key is printed',
    );
    t.equal(
      (first.stdout.match(keyPattern('acme', 'pk')) ?? []).length,
      1,
      'an acme_pk_test_ key is printed',
    );
    t.notMatch(first.stdout, /svc_(sk|pk)_/, 'no svc_ key is printed');

    const masterKey = readFileSync(join(home, 'master.key'));
    const config = readFileSync(join(home, 'config.json'));
    const same = await runCli(installArgs(engine, url, ['--brand', 'acme']), { home });
    t.equal(same.code, 0, 'repeating the same --brand is fine');

    const conflicting = await runCli(installArgs(engine, url, ['--brand', 'zeta']), { home });
    t.not(conflicting.code, 0, 'a different --brand is refused');
    t.match(conflicting.message, /brand "acme"/, 'the message names the brand in use');
    t.match(conflicting.message, /"zeta"/, 'and the one asked for');
    t.notMatch(conflicting.stdout, /_(sk|pk)_/, 'no key is printed');
    t.same(readFileSync(join(home, 'config.json')), config, 'config.json is untouched');
    t.same(readFileSync(join(home, 'master.key')), masterKey, 'master.key is untouched');
    t.equal(await organisationCount(url), 1, 'no organisation is added');

    const keys = await runCliJson<{ redacted: string }[]>(t, ['keys', 'list'], { home });
    t.same(keys.map((key) => key.redacted.slice(0, 12)).sort(), ['acme_pk_test', 'acme_sk_test']);
  });

  await t.test(
    'a bad --database-url is refused before anything is written; the corrected one installs',
    async (t) => {
      const database = await freshDatabase(t, engine);
      const home = join(database.home, 'home');
      const bad: { url: string; reason: RegExp; exit: number }[] = [
        {
          url: 'mysql://svc:canary-password@db.internal/svc',
          reason: /it must start with postgres:\/\/, postgresql:\/\/ or sqlite:\/\//,
          exit: 78,
        },
      ];
      if (engine === 'sqlite') {
        const file = join(database.home, 'a-file');
        writeFileSync(file, '');
        bad.push({
          url: `sqlite://${file}/svc.db`,
          reason: new RegExp(`${file}/svc\\.db: ENOTDIR`),
          exit: 78,
        });
      } else {
        const refused = new URL(database.url);
        refused.password = 'canary-password';
        refused.port = String(await freePort());
        bad.push({ url: refused.toString(), reason: /ECONNREFUSED/, exit: 69 });
        const noSchema = new URL(database.url);
        noSchema.password = 'canary-password';
        noSchema.searchParams.set('schema', 'no_such_schema');
        bad.push({ url: noSchema.toString(), reason: /schema "no_such_schema" does not exist/, exit: 78 });
      }
      for (const { url, reason, exit } of bad) {
        const result = await runCli(['install', '--database-url', url], { home });
        t.equal(result.code, exit, `${maskUrl(url)} is refused (exit ${exit})`);
        t.equal(result.stderr.trimEnd().split('\n').length, 1, 'in one line');
        t.match(
          result.message,
          new RegExp(`Error: --database-url ${escape(maskUrl(url))} cannot be used: `),
          'the message names the URL, masked',
        );
        t.match(result.message, reason, 'and why');
        t.match(
          result.message,
          /Nothing was written; run svc install again with a working URL\.$/,
          'and what to do',
        );
        t.notMatch(result.stdout + result.stderr, /canary-password/, 'the password is not printed');
        t.equal(result.stdout, '', 'nothing else is printed');
        t.notOk(existsSync(home), 'the home is not created, so there is no config.json');
      }
      const good = engine === 'sqlite' ? `sqlite://${home}/svc.db` : database.url;
      const corrected = await runCli(['install', '--database-url', good], { home });
      t.equal(corrected.code, 0, 'the corrected run succeeds');
      t.equal(
        (corrected.stdout.match(keyPattern('svc', 'sk')) ?? []).length,
        1,
        'and prints the test secret key',
      );
      t.equal(
        JSON.parse(readFileSync(join(home, 'config.json'), 'utf8')).databaseUrl,
        good,
        'config.json holds the URL that works',
      );
      t.equal(await organisationCount(good), 1, 'the database holds the default organisation');
    },
  );

  await t.test('a second --brand on a default install is refused too', async (t) => {
    const { url, home } = await freshDatabase(t, engine);
    t.equal((await runCli(installArgs(engine, url), { home })).code, 0);
    const conflicting = await runCli(installArgs(engine, url, ['--brand', 'acme']), { home });
    t.not(conflicting.code, 0, 'svc install --brand acme after a default install is refused');
    t.match(conflicting.message, /brand "svc".*"acme"/, 'the message names both brands');
    t.equal(await organisationCount(url), 1);
  });
});

/** Every directory and file under `root`, with the permission bits a group or other user would have. */
function looseModes(root: string): string[] {
  const loose: string[] = [];
  const walk = (path: string) => {
    const mode = statSync(path).mode;
    if ((mode & 0o077) !== 0) loose.push(`${path.slice(root.length) || '/'} ${(mode & 0o777).toString(8)}`);
    if (statSync(path).isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return loose;
}

forEachEngine(t, async (t, engine) => {
  await t.test(
    'the data directory is private whatever the umask, and install tightens an old one',
    async (t) => {
      // A shell with a loose umask, as a careless operator or an old unit file might have.
      const umask = process.umask(0o002);
      t.teardown(() => void process.umask(umask));
      const { url, home } = await freshDatabase(t, engine);
      const installed = await runCliJson(t, installArgs(engine, url), { home });
      const serve = await startServe(t, { home, env: { SVC_LOG_FILE: join(home, 'logs', 'svc.log') } });
      const created = await serve.request('POST', '/v1/webhook_endpoints', {
        key: installed.keys.secret,
        body: { url: 'https://example.com/hook', enabled_events: ['*'] },
      });
      t.equal(created.status, 200, 'the service wrote to its database');
      const written = [
        'config.json',
        'master.key',
        `run/serve-${serve.pid}.json`,
        'logs/svc.log',
        ...(engine === 'sqlite' ? ['svc.db', 'svc.db-wal', 'svc.db-shm'] : []),
      ];
      t.same(
        written.filter((file) => !existsSync(join(home, file))),
        [],
        'the database, its WAL and SHM, the log and the run file exist',
      );
      t.same(looseModes(home), [], 'and every file is 0600 and every directory 0700');

      process.kill(serve.pid, 'SIGTERM');
      await serve.exited;
      // As a backup restored with a loose umask would leave it.
      const loosen = (path: string) => {
        chmodSync(path, statSync(path).isDirectory() ? 0o755 : 0o644);
        if (statSync(path).isDirectory()) for (const name of readdirSync(path)) loosen(join(path, name));
      };
      loosen(home);
      t.not(looseModes(home).length, 0, 'loosened');
      const again = await runCli(installArgs(engine, url), { home });
      t.equal(again.code, 0, 'svc install runs again');
      t.same(looseModes(home), [], 'and leaves every file 0600 and every directory 0700');
    },
  );
});
