import t from 'tap';
import type { Organisation } from '../../src/orgs/orgs.js';
import { installArgs, oneLine, runCli, runCliJson, withDatabase } from '../helpers/cli.js';
import { forEachEngine, freshDatabase } from '../helpers/harness.js';

/*
 * `svc console users create|list|disable|reset` as an operator types them: the invitation and reset links are
 * printed once, under the configured base URL; bad input gets one line and changes nothing; `--json` on all.
 */

interface ConsoleUserView {
  id: string;
  email: string;
  role: string;
  org_id: string | null;
  status: string;
}

forEachEngine(t, async (t, engine) => {
  const { url, home } = await freshDatabase(t, engine);
  await runCliJson(t, installArgs(engine, url), { home });
  const org = await runCliJson<Organisation>(t, ['orgs', 'create', 'Lender'], { home });
  const users = () =>
    withDatabase(url, (db) => db.knex('console_users').select('email', 'status').orderBy('email'));

  const operator = await runCli(
    ['console', 'users', 'create', '--email', 'Ops@Example.com', '--role', 'operator'],
    {
      home,
    },
  );
  t.equal(operator.code, 0, operator.stderr);
  t.match(operator.stdout, /Invited ops@example\.com \(cu_[0-9a-f]{16}\) as operator\./);
  t.match(operator.stdout, /http:\/\/127\.0\.0\.1:\d+\/console\/accept\/cut_[A-Za-z0-9_-]{32}/);

  const admin = await runCliJson<ConsoleUserView & { invitation_url: string }>(
    t,
    ['console', 'users', 'create', '--email', 'ana@lender.cl', '--role', 'admin', '--org', org.id],
    { home },
  );
  t.equal(admin.role, 'admin');
  t.equal(admin.org_id, org.id);
  t.equal(admin.status, 'invited');
  t.match(admin.invitation_url, /\/console\/accept\/cut_/);

  const before = await users();
  for (const [args, message] of [
    [['--email', 'ana@lender.cl', '--role', 'admin', '--org', org.id], 'exists'],
    [['--email', 'not-an-email', '--role', 'support'], 'Not an email address'],
    [['--email', 'b@lender.cl', '--role', 'admin'], '--org'],
    [['--email', 'c@lender.cl', '--role', 'operator', '--org', org.id], 'every organisation'],
    [['--email', 'd@lender.cl', '--role', 'support', '--org', 'org_0000000000000000'], 'No organisation'],
  ] as const) {
    const refused = await runCli(['console', 'users', 'create', ...args], { home });
    t.not(refused.code, 0, args.join(' '));
    t.match(oneLine(refused.stderr), message, args.join(' '));
    t.notMatch(refused.stderr, /\n\s+at /, 'no stack trace');
  }
  t.same(await users(), before, 'nothing was written by a refused create');

  const listed = await runCliJson<ConsoleUserView[]>(t, ['console', 'users', 'list'], { home });
  t.same(
    listed.map((user) => [user.email, user.role, user.status]),
    [
      ['ops@example.com', 'operator', 'invited'],
      ['ana@lender.cl', 'admin', 'invited'],
    ],
  );
  const table = await runCli(['console', 'users', 'list'], { home });
  t.match(table.stdout, /^ID\s+EMAIL\s+ROLE\s+ORG\s+STATUS/);
  t.notMatch(table.stdout + JSON.stringify(listed), /password|scrypt|cut_/, 'no hash and no link in a list');

  const reset = await runCli(['console', 'users', 'reset', 'ana@lender.cl'], { home });
  t.equal(reset.code, 0, reset.stderr);
  t.match(reset.stdout, 'had not accepted their invitation; this new one replaces it.');
  t.match(reset.stdout, /\/console\/accept\/cut_/);
  t.notMatch(reset.stdout, admin.invitation_url.split('/').at(-1)!, 'a new link, not the old one');

  const disabled = await runCliJson<ConsoleUserView>(t, ['console', 'users', 'disable', admin.id], {
    home,
  });
  t.equal(disabled.status, 'disabled');
  const resetDisabled = await runCli(['console', 'users', 'reset', admin.id], { home });
  t.not(resetDisabled.code, 0);
  t.match(resetDisabled.stderr, 'is disabled');
  const missing = await runCli(['console', 'users', 'disable', 'nobody@example.com'], { home });
  t.not(missing.code, 0);
  t.match(missing.stderr, 'No console user nobody@example.com');
});
