import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import t from 'tap';
import type { Test } from 'tap';
import type { BackupResult } from '../../src/backup/backup.js';
import type { RestoreResult } from '../../src/backup/restore.js';
import { migrationNames } from '../../src/db/migrations.js';
import {
  freeBankPorts,
  installedHome,
  runCli,
  runCliJson,
  startServe,
  waitFor,
  withDatabase,
  type ServeProcess,
} from '../helpers/cli.js';
import {
  setTimeLimit,
  HANG_GUARD_MS,
  emptyPostgresDatabase,
  engines,
  forEachEngine,
  linkBody,
  type EngineName,
} from '../helpers/harness.js';
import { independentlyVerified, startReceiver } from '../helpers/receiver.js';
import { atTheBank } from '../helpers/consent-bank.js';
import { openWidget, widgetApi } from '../helpers/widget.js';

/*
 * `svc backup` under a running `svc serve` with writes in flight, `svc restore` into a fresh home (and, on
 * PostgreSQL, a fresh database on the same server, as a new VM would have), and a second `svc serve` on the
 * restored home that answers the same keys, links and movements and signs webhooks with the same secret.
 */

// About 50 s per engine on an idle machine (some twenty CLI runs and two serves each): room for a loaded one.
setTimeLimit(t, engines().length * 240_000);

const FAST = {
  SVC_SCHEDULER_CRON: '* * * * * *',
  SVC_SCHEDULER_POLL_INTERVAL_MS: '100',
  SVC_DISPATCHER_POLL_INTERVAL_MS: '100',
};
const RAISED: Record<string, string> = {};
for (const group of ['READ', 'SYNC_WRITE', 'WIDGET_TOKENS', 'RESOURCE_WRITE', 'WEBHOOK_DELIVERIES']) {
  RAISED[`SVC_RATE_LIMITS_${group}_PER_MINUTE`] = '100000';
  RAISED[`SVC_RATE_LIMITS_${group}_BURST`] = '10000';
}

const WARNING = /archive holds the master key/;

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** The files of a home and their hashes (the run directory of a stopped serve aside). */
function snapshotHome(home: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const name of readdirSync(home).sort()) {
    const path = join(home, name);
    if (statSync(path).isFile()) files[name] = sha256(path);
  }
  return files;
}

/** A fresh, empty home directory, removed after the test. */
function freshHome(t: Test): string {
  const parent = mkdtempSync(join(tmpdir(), 'svc-restore-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  return join(parent, 'home');
}

/**
 * Where the restore puts the database: SQLite, the new home's default file; PostgreSQL, a new database on
 * the test server holding the same schema name (pg_restore recreates the schema it dumped).
 */
async function restoreTarget(t: Test, engine: EngineName, sourceUrl: string): Promise<string[]> {
  if (engine === 'sqlite') return [];
  const schema = new URL(sourceUrl).searchParams.get('schema');
  return ['--database-url', await emptyPostgresDatabase(t, 'svc_restore', schema)];
}

interface Listed {
  id: string;
}

async function allPages<T>(serve: ServeProcess, key: string, path: string): Promise<T[]> {
  const items: T[] = [];
  for (let page = 1; ; page++) {
    const separator = path.includes('?') ? '&' : '?';
    const response = await serve.request('GET', `${path}${separator}page=${page}&per_page=100`, { key });
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${response.text}`);
    items.push(...(response.body as T[]));
    if ((response.body as T[]).length < 100) return items;
  }
}

/** Each account of the links and its movements, as the API shows them. */
async function accountsAndMovements(serve: ServeProcess, key: string, links: string[]) {
  const result: Record<string, unknown> = {};
  for (const link of links) {
    for (const account of await allPages<Listed>(serve, key, `/v1/accounts?link_id=${link}`)) {
      result[account.id] = {
        account,
        movements: await allPages<Listed>(serve, key, `/v1/accounts/${account.id}/movements`),
      };
    }
  }
  return result;
}

/**
 * A consent link of test mode, made as an end user makes one: the widget, the simulated bank's sign-in and
 * consent pages, the callback, and the first sync; its id once exchanged.
 */
async function testModeConsentLink(serve: ServeProcess, key: string): Promise<string> {
  const token = await serve.request('POST', '/v1/widget_tokens', { key, body: {} });
  const opened = await openWidget({ url: serve.url }, token.body.token as string);
  const session = opened.bootstrap.session as string;
  // The simulated bank starts a moment after the API answers, and registers the appliance then.
  const start = () => widgetApi({ url: serve.url }, session, 'POST', 'consent', { bank_id: 'bancoabierto' });
  let started = await start();
  const deadline = Date.now() + HANG_GUARD_MS;
  while (started.status === 409 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    started = await start();
  }
  if (started.status !== 200)
    throw new Error(`the widget's consent start: ${started.status} ${started.text}`);
  const { callback } = await atTheBank(
    started.body.authorization_url as string,
    `${serve.url}/widget/consent/callback`,
  );
  await (await fetch(callback)).body?.cancel();
  const succeeded = await waitFor(async () => {
    const status = await widgetApi({ url: serve.url }, session, 'GET', 'status');
    return status.body.state === 'succeeded' ? true : undefined;
  }, HANG_GUARD_MS);
  if (!succeeded) throw new Error('the consent link did not sync');
  const finished = await widgetApi({ url: serve.url }, session, 'POST', 'finish');
  const exchanged = await serve.request('POST', `/v1/exchange_tokens/${finished.body.exchange_token}`, {
    key,
  });
  return exchanged.body.id as string;
}

forEachEngine(t, async (t, engine) => {
  const { database, home, key } = await installedHome(t, engine);
  // The simulated banks' ports are kept for the restored server: the appliance's registration names the
  // addresses it registered at, as it would on a new machine with the same settings.
  const consentBankPort = await freeBankPorts();
  const bankPorts = { SVC_SANDBOX_CONSENT_BANK_PORT: String(consentBankPort) };
  const serve = await startServe(t, { home, env: { ...FAST, ...RAISED, ...bankPorts } });
  // Test mode's consent link (issue 45, item 5): restored `active`, it must still sync.
  const consentLinkId = await testModeConsentLink(serve, key);
  const receiver = await startReceiver(t);
  const endpoint = (
    await serve.request('POST', '/v1/webhook_endpoints', {
      key,
      body: { url: receiver.url, enabled_events: ['link.refreshed'] },
    })
  ).body as { id: string; secret: string };
  t.match(endpoint, { id: /^/, secret: /^whsec_/ }, 'a webhook endpoint, with its signing secret');

  const createLink = async (n: number) => {
    const response = await serve.request('POST', '/v1/links', {
      key,
      body: linkBody({
        credentials: { rut: '11.111.111-1', password: 'sandbox' },
        external_user_id: `u${n}`,
      }),
    });
    if (response.status !== 200) throw new Error(`POST /v1/links: ${response.status} ${response.text}`);
    return response.body.id as string;
  };
  const synced = (id: string) =>
    withDatabase(database.url, async (db) => {
      const row = await db.knex('links').where({ id }).first('sync_successes');
      return row && row.sync_successes >= 1 ? true : undefined;
    });

  // Links synced before the backup: their accounts and movements no longer change (next sync in 4 hours).
  const before: string[] = [];
  for (let n = 0; n < 3; n++) before.push(await createLink(n));
  for (const id of before) t.ok(await waitFor(() => synced(id), HANG_GUARD_MS), `link ${id} synced`);
  const expected = await accountsAndMovements(serve, key, before);
  t.ok(Object.keys(expected).length >= 3, 'the links have accounts');
  t.ok(
    Object.values(expected).some((entry) => (entry as { movements: unknown[] }).movements.length > 0),
    'and movements',
  );

  // The load: two writers creating links (each one synced by the scheduler: accounts, movements, events,
  // deliveries) until the backup has finished.
  let stop = false;
  let counter = 100;
  const created: { id: string; at: number }[] = [];
  const failures: string[] = [];
  const writer = async () => {
    while (!stop) {
      try {
        const id = await createLink(counter++);
        created.push({ id, at: Date.now() });
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
  };
  const writers = [writer(), writer()];
  await waitFor(async () => (created.length >= 4 ? true : undefined), HANG_GUARD_MS);

  const archiveDir = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  t.teardown(() => rmSync(archiveDir, { recursive: true, force: true }));
  const archive = join(archiveDir, 'backup.tar.gz');
  const startedAt = Date.now();
  const backup = await runCli(['backup', '--no-encrypt', '--out', archive, '--json'], { home });
  const endedAt = Date.now();
  const createdDuringBackup = created.filter((c) => c.at >= startedAt && c.at <= endedAt).length;
  stop = true;
  await Promise.all(writers);
  t.same(failures, [], 'the writers saw no error during the backup');

  t.equal(backup.code, 0, `svc backup succeeds (${backup.message.slice(0, 300)})`);
  t.match(backup.stderr, WARNING, 'it warns that the archive holds the master key');
  t.match(backup.stderr, /store it like the key itself/i);
  const result = JSON.parse(backup.stdout) as BackupResult;
  t.equal(statSync(archive).mode & 0o777, 0o600, 'the archive has mode 0600');
  t.equal(result.file, archive);
  t.match(result.manifest, {
    format: 'svc-backup',
    format_version: 1,
    engine,
    database: { schema_version: migrationNames().at(-1), migrations: migrationNames() },
    master_key: { source: 'file', member: 'master.key' },
  });
  t.comment(`${createdDuringBackup} link(s) were created while the backup ran`);
  const keyFile = JSON.parse(readFileSync(join(home, 'master.key'), 'utf8')) as { keys: { key: string }[] };
  for (const entry of keyFile.keys) {
    t.notOk(
      backup.stdout.includes(entry.key) || backup.stderr.includes(entry.key),
      'no master key is printed',
    );
  }

  const listing = spawnSync('tar', ['-tzf', archive], { encoding: 'utf8' });
  t.equal(listing.status, 0, 'tar -tzf lists the archive');
  t.same(
    listing.stdout.trim().split('\n').sort(),
    [
      'config.json',
      'consent-bank.json',
      'manifest.json',
      'master.key',
      engine === 'sqlite' ? 'svc.db' : 'postgres.dump',
    ].sort(),
    "with test mode's CA",
  );
  t.match(result.manifest, { test_ca: { member: 'consent-bank.json' } }, 'which the manifest names');

  const linksAtBackup = result.manifest.database.row_counts.links!;
  const beforeBackup = created.filter((c) => c.at < startedAt).length + before.length;
  t.ok(linksAtBackup >= beforeBackup, `the copy holds every link created before it began (${beforeBackup})`);
  t.ok(linksAtBackup <= before.length + created.length, 'and no link that was never created');

  await t.test('restore refuses a home that svc serve is running on', async (t) => {
    // The database changes under the running serve; the files a restore would replace first must not.
    const files = () => {
      const all = snapshotHome(home);
      return { config: all['config.json'], key: all['master.key'] };
    };
    const kept = files();
    const refused = await runCli(['restore', archive, '--force'], { home });
    t.not(refused.code, 0);
    t.match(refused.message, /svc serve is running on/);
    t.same(files(), kept, 'config.json and master.key are unchanged');
    t.notOk(
      readdirSync(home).some((name) => name.startsWith('.restore-')),
      'nothing was unpacked into the home',
    );
  });

  await t.test('a damaged archive is refused before anything is written', async (t) => {
    const bytes = readFileSync(archive);
    const flipped = Buffer.from(bytes);
    const at = Math.floor(flipped.length / 2);
    flipped[at] = flipped[at]! ^ 0xff;
    const damaged = join(archiveDir, 'damaged.tar.gz');
    writeFileSync(damaged, flipped);
    const target = freshHome(t);
    const refused = await runCli(['restore', damaged], { home: target });
    t.not(refused.code, 0);
    t.match(refused.message, /is not a usable svc backup: .*Nothing was restored/);
    t.notOk(existsSync(target), 'the new home was not left behind');

    // A member altered and the archive packed again, gzip intact: the manifest's SHA-256 catches it.
    const tar = gunzipSync(bytes);
    t.equal(tar.subarray(0, 11).toString(), 'config.json', 'config.json is the first member');
    tar[512] = tar[512]! ^ 0x01;
    const altered = join(archiveDir, 'altered.tar.gz');
    writeFileSync(altered, gzipSync(tar));
    const tampered = await runCli(['restore', altered], { home: target });
    t.not(tampered.code, 0);
    t.match(tampered.message, /config\.json does not match its SHA-256/);
    t.notOk(existsSync(target));

    const truncated = join(archiveDir, 'truncated.tar.gz');
    writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length * 0.7)));
    const cut = await runCli(['restore', truncated], { home: target });
    t.not(cut.code, 0);
    t.match(cut.message, /is not a usable svc backup/);
  });

  const restoredHome = freshHome(t);
  const target = await restoreTarget(t, engine, database.url);
  await t.test('restore into a fresh home', async (t) => {
    const restored = await runCliJson<RestoreResult>(t, ['restore', archive, ...target], {
      home: restoredHome,
    });
    t.equal(restored.home, restoredHome);
    t.same(restored.migrationsApplied, [], 'the archive is at this code schema version');
    t.same(restored.secrets?.unreadable, [], 'the restored key opens every stored secret');
    t.ok(restored.secrets!.readable >= linksAtBackup + 1, 'every link credential and the endpoint secret');
    t.equal(statSync(restoredHome).mode & 0o777, 0o700, 'the home is 0700');
    for (const name of readdirSync(restoredHome)) {
      const stats = statSync(join(restoredHome, name));
      t.equal(stats.mode & 0o777, stats.isDirectory() ? 0o700 : 0o600, `${name} is private`);
    }
    t.match(
      restored.testCa,
      { source: 'archive', directory: join(restoredHome, 'consent-bank'), relink: [] },
      "test mode's CA comes from the archive",
    );
    for (const name of readdirSync(join(home, 'consent-bank')))
      t.equal(
        sha256(join(restoredHome, 'consent-bank', name)),
        sha256(join(home, 'consent-bank', name)),
        `consent-bank/${name} is the backed-up one`,
      );
    // A copy of one instant: every link synced in it has the accounts that sync wrote in the same transaction.
    const restoredUrl = engine === 'sqlite' ? `sqlite://${join(restoredHome, 'svc.db')}` : target[1]!;
    const orphans = await withDatabase(restoredUrl, (db) =>
      db
        .knex('links')
        .where('sync_successes', '>=', 1)
        .whereNotExists((q) => q.select('id').from('accounts').whereRaw('accounts.link_id = links.id'))
        .pluck('id'),
    );
    t.same(orphans, [], 'no synced link is without its accounts');
    const servers = await withDatabase(restoredUrl, (db) => db.knex('serve_instances').count({ n: '*' }));
    t.equal(Number(servers[0]!.n), 0, 'the server that ran at backup time is not restored as running');
    const migrate = await runCli(['migrate'], {
      home: restoredHome,
      env: engine === 'postgres' ? { SVC_DATABASE_URL: restoredUrl } : {},
    });
    t.equal(migrate.code, 0, `svc migrate on the restored database is not held back: ${migrate.message}`);
    t.same(
      readFileSync(join(restoredHome, 'master.key'), 'utf8'),
      readFileSync(join(home, 'master.key'), 'utf8'),
      'the master key is the same',
    );
  });

  await t.test('restore refuses a home that holds an installation, and leaves it unchanged', async (t) => {
    const files = snapshotHome(restoredHome);
    const refused = await runCli(['restore', archive, ...target], { home: restoredHome });
    t.not(refused.code, 0);
    t.match(refused.message, /already holds an installation/);
    t.match(refused.message, /--force/);
    t.same(snapshotHome(restoredHome), files, 'every file is byte-identical');
  });

  await t.test(
    'svc serve on the restored home serves the same data and signs with the same secret',
    async (t) => {
      // As on a new machine with the same settings: the first server stops, the restored one takes its ports.
      serve.process.kill('SIGTERM');
      await serve.exited;
      const second = await startServe(t, {
        home: restoredHome,
        port: serve.port,
        env: { ...FAST, ...RAISED, ...bankPorts },
      });
      const links = await allPages<Listed>(second, key, '/v1/links');
      t.equal(links.length, linksAtBackup, 'the same key lists the links of the backup');
      const ids = new Set(links.map((link) => link.id));
      for (const id of before) t.ok(ids.has(id), `link ${id} is there`);
      for (const c of created.filter((c) => c.at < startedAt)) t.ok(ids.has(c.id), `link ${c.id} is there`);
      t.same(
        await accountsAndMovements(second, key, before),
        expected,
        'with the same accounts and movements',
      );

      const link = before[0]!;
      const fired = await second.request('POST', '/v1/sandbox/events/fire', {
        key,
        body: { type: 'link.refreshed', link_id: link },
      });
      t.equal(fired.status, 200, `fire (${fired.text.slice(0, 200)})`);
      const delivered = await waitFor(
        async () => receiver.received.find((r) => r.event?.id === fired.body.id),
        HANG_GUARD_MS,
      );
      t.ok(delivered, 'the restored dispatcher delivers to the endpoint');
      t.equal(
        independentlyVerified(
          delivered!.body,
          delivered!.headers['svc-signature'] as string,
          endpoint.secret,
        ),
        1,
        'signed with the secret the endpoint was created with',
      );

      const consentLink = await second.request('GET', `/v1/links/${consentLinkId}`, { key });
      t.match(
        consentLink.body,
        { id: consentLinkId, status: 'active' },
        'the consent link is restored active',
      );
      const refresh = await second.request('POST', '/v1/refresh_intents', {
        key,
        body: { link_id: consentLinkId },
      });
      t.equal(refresh.status, 200, `a refresh of it is accepted (${refresh.text.slice(0, 200)})`);
      const outcome = await waitFor(async () => {
        const intent = await second.request('GET', `/v1/refresh_intents/${refresh.body.id}`, { key });
        const status = intent.body.status as string;
        return status === 'succeeded' || status === 'failed' ? intent.body : undefined;
      }, HANG_GUARD_MS);
      t.match(outcome, { status: 'succeeded' }, 'and it syncs through the simulated bank, in test mode');
    },
  );
});

forEachEngine(t, async (t, engine) => {
  t.test('an archive from an older schema is migrated up on restore', async (t) => {
    const { home, database } = await installedHome(t, engine);
    const rolledBack = await runCliJson<{ reverted: string[] }>(t, ['migrate', '--rollback'], { home });
    t.ok(rolledBack.reverted.length > 0);
    const archive = join(mkdtempSync(join(tmpdir(), 'svc-backup-')), 'old.tar.gz');
    t.teardown(() => rmSync(join(archive, '..'), { recursive: true, force: true }));
    const backup = await runCliJson<BackupResult>(t, ['backup', '--no-encrypt', '--out', archive], {
      home,
    });
    t.notOk(backup.manifest.database.migrations.includes(rolledBack.reverted[0]!));
    const restoredHome = freshHome(t);
    const target = await restoreTarget(t, engine, database.url);
    const restored = await runCliJson<RestoreResult>(t, ['restore', archive, ...target], {
      home: restoredHome,
    });
    t.same(
      restored.migrationsApplied.sort(),
      [...rolledBack.reverted].sort(),
      'the reverted migrations are applied',
    );
    const status = await runCliJson<{ pending: string[] }>(t, ['migrate', '--status'], {
      home: restoredHome,
    });
    t.same(status.pending, []);
  });
});

if (process.env.SVC_TEST_DATABASE_URL) {
  t.test(
    'postgres: the password reaches pg_dump in PGPASSWORD only, and a missing pg_dump is named',
    async (t) => {
      const { home, database } = await installedHome(t, 'postgres');
      // The test server trusts local connections, so any password connects: a canary stands in for one.
      const password = `cnry${randomBytes(8).toString('hex')}`;
      const withPassword = new URL(database.url);
      withPassword.password = password;
      const tools = mkdtempSync(join(tmpdir(), 'svc-pgtools-'));
      t.teardown(() => rmSync(tools, { recursive: true, force: true }));
      const realPgDump = spawnSync('sh', ['-c', 'command -v pg_dump'], { encoding: 'utf8' }).stdout.trim();
      writeFileSync(
        join(tools, 'pg_dump'),
        `#!/bin/sh\nprintf '%s\\n' "$*" > "${tools}/args"\nprintf '%s' "$PGPASSWORD" > "${tools}/pgpassword"\nexec ${realPgDump} "$@"\n`,
        { mode: 0o700 },
      );
      const archive = join(tools, 'backup.tar.gz');
      const backup = await runCli(['backup', '--no-encrypt', '--out', archive], {
        home,
        env: { SVC_DATABASE_URL: withPassword.toString(), PATH: `${tools}:${process.env.PATH}` },
      });
      t.equal(backup.code, 0, backup.message.slice(0, 300));
      t.equal(
        readFileSync(join(tools, 'pgpassword'), 'utf8'),
        password,
        'pg_dump gets the password in PGPASSWORD',
      );
      t.notMatch(readFileSync(join(tools, 'args'), 'utf8'), password, 'and not on its command line');
      t.notMatch(backup.stdout + backup.stderr, password, 'svc backup prints no password');

      const missing = await runCli(['backup', '--no-encrypt', '--out', join(tools, 'other.tar.gz')], {
        home,
        env: { PATH: tools.replace(/$/, '-empty') },
      });
      t.not(missing.code, 0);
      t.match(missing.message, /pg_dump is not installed.*apt-get install postgresql-client/);
      t.notOk(existsSync(join(tools, 'other.tar.gz')), 'no archive is written');
    },
  );
}
