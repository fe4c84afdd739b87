import { readFileSync } from 'node:fs';
import t from 'tap';
import { configRows, renderConfigTable, withConfigTable } from '../../src/config/config-table.js';
import { defaultConfig } from '../../src/config/defaults.js';
import { envName } from '../../src/config/load-config.js';

const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

t.test("the README's configuration table is the one the schema renders (npm run docs:config)", async (t) => {
  t.equal(withConfigTable(README), README, 'run `npm run docs:config` and commit README.md');
});

t.test('every setting has its row, its variable and a description', async (t) => {
  const rows = configRows();
  const settings = rows.map((row) => row.setting);
  t.ok(settings.includes('api.port') && settings.includes('rateLimits.read.burst'), 'nested settings');
  t.equal(new Set(settings).size, settings.length, 'one row per setting');
  const port = rows.find((row) => row.setting === 'api.port')!;
  t.same(port, { ...port, env: 'SVC_API_PORT', default: '`8080`' });
  t.equal(
    rows.find((row) => row.setting === 'rateLimits.sync_write.perMinute')!.env,
    envName(['rateLimits', 'sync_write', 'perMinute']),
  );
  t.equal(
    rows.find((row) => row.setting === 'banks.connectors')!.env,
    '',
    'a map is set in config.json only',
  );
  t.equal(rows.find((row) => row.setting === 'log.file')!.default, 'empty');
  t.equal(rows.find((row) => row.setting === 'databaseUrl')!.default, '`sqlite://<home>/svc.db`');
  for (const row of rows) t.ok(row.description.length > 10, `${row.setting} is described`);

  // Every leaf of the defaults is a row, so a setting added to the schema and defaults is in the table.
  const leaves: string[] = [];
  const walk = (node: Record<string, unknown>, path: string[]) => {
    for (const [key, value] of Object.entries(node)) {
      if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length)
        walk(value as Record<string, unknown>, [...path, key]);
      else leaves.push([...path, key].join('.'));
    }
  };
  walk(defaultConfig('/h') as unknown as Record<string, unknown>, []);
  t.same([...settings].sort(), leaves.sort());
});

t.test('a pipe in a description cannot break the table', async (t) => {
  const table = renderConfigTable([{ setting: 'a', env: 'SVC_A', default: '`1`', description: 'x | y' }]);
  t.match(table, /x \\\| y/);
  t.equal(new Set(table.split('\n').map((line) => line.length)).size, 1, 'columns aligned');
});
