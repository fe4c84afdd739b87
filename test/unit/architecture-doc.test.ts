import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';

/*
 * docs/architecture.md is the newcomer's map: it must name every capability folder of src/ and every owned
 * table with its owner, so that a new folder or table cannot be added without its line there.
 */
const ROOT = new URL('../../../', import.meta.url);
const DOC = readFileSync(new URL('docs/architecture.md', ROOT), 'utf8');
const { OWNERS } = (await import(new URL('scripts/check-table-owners.js', ROOT).href)) as {
  OWNERS: Record<string, string>;
};

/** The rows of the markdown table that follows `heading`, as trimmed cells. */
function tableAfter(heading: string): string[][] {
  const at = DOC.indexOf(heading);
  if (at < 0) throw new Error(`docs/architecture.md has no "${heading}"`);
  const lines = DOC.slice(at).split('\n');
  const start = lines.findIndex((line) => line.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

t.test('the code map has one line for each folder of src/', async (t) => {
  const folders = readdirSync(new URL('src/', ROOT), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `\`${entry.name}/\``);
  const mapped = tableAfter('## Code map').map((row) => row[0]);
  t.same([...mapped].sort(), [...folders].sort());
});

t.test('every owned table is in the owners table, with the owner the lint check enforces', async (t) => {
  const rows = tableAfter('## Who owns which table');
  for (const [table, owner] of Object.entries(OWNERS)) {
    const row = rows.find((cells) => cells[0]!.split(', ').includes(`\`${table}\``));
    t.ok(row, `${table} is listed`);
    if (row) t.match(row[1], `\`${owner}\``, `${table} is owned by ${owner}`);
  }
});

t.test("the floor list is the floor check's, top floor first, with the same exceptions", async (t) => {
  const { FLOORS, EXCEPTIONS } = (await import(new URL('scripts/check-floors.js', ROOT).href)) as {
    FLOORS: string[][];
    EXCEPTIONS: { from: string; to: string }[];
  };
  const room = (name: string) => (name === 'index' ? '`index.ts`' : `\`${name}/\``);
  const documented = tableAfter('## Floors').map(([floor, rooms]) => [floor, rooms]);
  const checked = FLOORS.map((rooms, i) => [String(i + 1), rooms.map(room).join(', ')]).reverse();
  t.same(documented, checked);
  const exceptions = tableAfter('The imports that still run back up').map(([from, to]) => [from, to]);
  t.same(
    exceptions,
    EXCEPTIONS.map((e) => [`\`${e.from}\``, `\`${e.to}\``]),
  );
});
