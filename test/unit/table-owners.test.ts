import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { checkTree } from '../helpers/tree-check.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-table-owners.js', import.meta.url));
const check = (t: Test, files: Record<string, string>) => checkTree(t, SCRIPT, files);

t.test('writes by the owner, reads by anyone, and db/ helpers pass', async (t) => {
  const { status, stderr } = check(t, {
    'src/links/store.ts': "export const f = (trx) => trx('links').where({ id: 1 }).update({ a: 1 });\n",
    'src/sync/engine.ts': [
      "const link = await trx('links').where({ id }).first();",
      "const rows = await Promise.all([db('accounts').select('id'), db('jobs').count()]);",
      '// we never update links here: the store does',
      "throw new Error('could not .update( links');",
    ].join('\n'),
    // The owner's write may read another owner's table in a subquery.
    'src/widget/sessions.ts':
      "await trx('widget_sessions').whereNotIn('refresh_intent_id', trx('refresh_intents').select('id')).delete();\n",
    'src/db/claims.ts': "await db.raw('UPDATE jobs SET status = ?', ['running']);\n",
  });
  t.equal(status, 0, stderr);
});

t.test('a planted write outside the owner fails, naming file, line and owner', async (t) => {
  const { status, stderr } = check(t, {
    'src/sync/engine.ts': [
      "const link = await trx('links').where({ id }).first();",
      "await trx('links')",
      '  .where({ id })',
      "  .update({ status: 'expired' });",
    ].join('\n'),
    'commands/links/purge.ts': "await db.knex.raw('delete from movements where link_id = ?', [id]);\n",
    'src/widget/flows.ts':
      "await trx('jobs').insert(row);\nawait trx<Row>(\"accounts\").where({ id }).increment('n');\n",
  });
  t.equal(status, 1);
  t.match(stderr, /src\/sync\/engine\.ts:2: writes links, which only src\/links\/ may write/);
  t.match(stderr, /commands\/links\/purge\.ts:1: writes movements, which only src\/movements\//);
  t.match(stderr, /src\/widget\/flows\.ts:1: writes jobs/);
  t.match(stderr, /src\/widget\/flows\.ts:2: writes accounts/);
  t.notMatch(stderr, /engine\.ts:1:/, 'the read on line 1 is not a write');
});

t.test("a table owned by one file: the folder's other files write it through that file", async (t) => {
  const { status, stderr } = check(t, {
    'src/widget/sessions.ts': "await trx('widget_sessions').where({ id }).update({ finished_at: now });\n",
    'src/widget/flows.ts': "await trx('widget_sessions').where({ id }).update({ last_error_code: code });\n",
  });
  t.equal(status, 1);
  t.match(
    stderr,
    /src\/widget\/flows\.ts:1: writes widget_sessions, which only src\/widget\/sessions\.ts may write/,
  );
  t.notMatch(stderr, /sessions\.ts:1:/, 'the owner file writes it');
});
