import t from 'tap';
import { HANG_GUARD_MS, forEachEngine, linkBody, request } from '../helpers/harness.js';
import { installedHome, runCli, runCliJson, startServe, waitFor, withDatabase } from '../helpers/cli.js';

interface Inspection {
  link: {
    id: string;
    status: string;
    paused: boolean;
    last_synced_at: string | null;
    consecutive_failures: number;
  };
  diagnosis: string[];
  accounts: { id: string; balance: { current: number }; movements: number }[];
  jobs: { status: string }[];
  refresh_intents: { refresh_type: string; status: string }[];
  events: { type: string }[];
}

forEachEngine(t, async (t, engine) => {
  const { database, home, key } = await installedHome(t, engine);
  const serve = await startServe(t, {
    home,
    env: { SVC_SCHEDULER_CRON: '* * * * * *', SVC_SCHEDULER_POLL_INTERVAL_MS: '100' },
  });
  const create = async (rut: string, password: string) =>
    (
      await request(serve.url, 'POST', '/v1/links', {
        key,
        body: linkBody({ credentials: { rut, password } }),
      })
    ).body.id as string;
  const healthy = await create('11.111.111-1', 'sandbox');
  const rejected = await create('22.222.222-2', 'sandbox-rejected');
  const synced = (id: string) =>
    withDatabase(database.url, async (db) =>
      (await db.knex('links').where({ id }).first()).sync_attempts >= 1 ? true : undefined,
    );
  t.ok(await waitFor(() => synced(healthy), HANG_GUARD_MS));
  t.ok(await waitFor(() => synced(rejected), HANG_GUARD_MS));

  t.test('inspect explains a healthy link and a failing one', async (t) => {
    const ok = await runCliJson<Inspection>(t, ['links', 'inspect', healthy], { home });
    t.match(ok.link, { id: healthy, status: 'active', paused: false });
    t.ok(ok.link.last_synced_at);
    t.match(ok.diagnosis[0], /^Healthy/);
    t.ok(ok.accounts.length >= 2);
    t.ok(ok.accounts.every((a) => Number.isInteger(a.balance.current)));
    t.ok(ok.accounts.some((a) => a.movements > 0));
    t.same(
      ok.refresh_intents.map((i) => [i.refresh_type, i.status]),
      [['full', 'succeeded']],
    );
    t.ok(ok.events.some((e) => e.type === 'link.refreshed'));

    const bad = await runCliJson<Inspection>(t, ['links', 'inspect', rejected], { home });
    t.equal(bad.link.consecutive_failures, 1);
    t.ok(
      bad.diagnosis.some((note) => /rejected_credentials/.test(note) && /3 expire the link/.test(note)),
      'says why and what happens next',
    );
    const text = await runCli(['links', 'inspect', rejected], { home });
    t.equal(text.code, 0);
    t.match(text.stdout, /Diagnosis/);
    t.match(text.stdout, /rejected_credentials/);
    t.notOk(text.stdout.includes('sandbox-rejected'), 'the password never appears');
    for (const columns of [80, 60]) {
      // As `svc doctor` does: laid out to the terminal's width (COLUMNS when there is no terminal).
      const narrow = await runCli(['links', 'inspect', healthy], { home, env: { COLUMNS: String(columns) } });
      const lines = narrow.stdout.split('\n');
      t.same(
        lines.filter((line) => line.length > columns),
        [],
        `every line fits a ${columns}-column terminal`,
      );
      const accounts = lines.findIndex((line) => line.startsWith('Accounts ('));
      t.ok(accounts > 0, 'the accounts section is there');
      t.ok(
        lines
          .slice(accounts + 1, accounts + 1 + ok.accounts.length * 2)
          .every((line) => line.startsWith('  ')),
        "an account's wrapped line stays indented under it",
      );
    }
    const missing = await runCli(['links', 'inspect', 'link_0000000000000000', '--json'], { home });
    t.not(missing.code, 0);
    t.match(JSON.parse(missing.stdout), { error: { code: 'resource_missing' } });
  });

  t.test('list filters; pause, resume and delete act and are audited', async (t) => {
    const all = await runCliJson<{ id: string }[]>(t, ['links', 'list'], { home });
    t.same(all.map((l) => l.id).sort(), [healthy, rejected].sort());
    const active = await runCliJson<{ id: string; last_error_code: string | null }[]>(
      t,
      ['links', 'list', '--status', 'active', '--bank', 'bancochile'],
      { home },
    );
    t.equal(active.length, 2);
    t.same(await runCliJson(t, ['links', 'list', '--bank', 'bci'], { home }), []);

    t.match(await runCliJson(t, ['links', 'pause', healthy], { home }), { id: healthy, paused: true });
    t.same(
      (await runCliJson<{ id: string }[]>(t, ['links', 'list', '--paused'], { home })).map((l) => l.id),
      [healthy],
    );
    const inspected = await runCliJson<Inspection>(t, ['links', 'inspect', healthy], { home });
    t.ok(inspected.diagnosis.some((note) => /^Paused since/.test(note)));
    const resumed = await runCliJson<{ paused: boolean; next_sync_at: string }>(
      t,
      ['links', 'resume', healthy],
      { home },
    );
    t.equal(resumed.paused, false);
    t.match(await runCliJson(t, ['links', 'delete', rejected], { home }), { id: rejected, deleted: true });
    t.equal((await request(serve.url, 'GET', `/v1/links/${rejected}`, { key })).status, 404);
    const audit = await withDatabase(database.url, (db) =>
      db
        .knex('audit_log')
        .whereIn('target_id', [healthy, rejected])
        .orderBy('created_at')
        .select('action', 'actor'),
    );
    // Both links were made through the API with the secret key (issue 44: link creation is audited too).
    t.same(
      audit.map((row: { action: string }) => row.action),
      ['link.create', 'link.create', 'link.pause', 'link.resume', 'link.delete'],
    );
    t.ok(audit.slice(0, 2).every((row: { actor: string }) => row.actor.startsWith('key:')));
    t.ok(audit.slice(2).every((row: { actor: string }) => row.actor.startsWith('cli:')));
  });

  t.test("a tenant's text cannot drive the operator's terminal; --json keeps it exact", async (t) => {
    // Clear the screen, retitle the window, forge a line, reverse the text that follows.
    const hostile = 'cust-1\u001b[2J\u001b]0;pwned\u0007\r\nlink_0000000000000000 active\u009b31m\u202eevil';
    const created = await request(serve.url, 'POST', '/v1/links', {
      key,
      body: linkBody({
        external_user_id: hostile,
        credentials: { rut: '33.333.333-3', password: 'sandbox' },
      }),
    });
    t.equal(created.status, 200);
    const shown = await runCli(['links', 'inspect', created.body.id], { home });
    t.equal(shown.code, 0, 'inspect runs');
    t.notOk(
      // eslint-disable-next-line no-control-regex -- looking for control characters is the point
      /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/u.test(shown.stdout),
      'no control character or direction override reaches the terminal',
    );
    // ink wraps long lines at the terminal's width; the value, escaped, is all there once joined.
    t.match(
      shown.stdout.replace(/\n */g, ''),
      'cust-1\\u001b[2J\\u001b]0;pwned\\u0007\\u000d\\u000alink_0000000000000000',
      'shown escaped',
    );
    t.notOk(
      shown.stdout.split('\n').some((line) => line.startsWith('link_0000000000000000')),
      'and no line of it was forged',
    );
    const exact = await runCliJson<Inspection & { link: { external_user_id: string } }>(
      t,
      ['links', 'inspect', created.body.id],
      { home },
    );
    t.equal(exact.link.external_user_id, hostile, '--json is the exact value');
  });
});
