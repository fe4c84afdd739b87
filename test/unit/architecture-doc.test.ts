import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/*
 * docs/architecture.md is the newcomer's map: it must name every capability folder of src/, every sub-room
 * and every owned table with its owner, so that a new folder or table cannot be added without its line
 * there; and what it names must still be there, so that a file moved or a function renamed cannot leave
 * the map pointing at nothing.
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

/** The checkout's files and folders (`/`-separated; a folder ends in `/`), but dependencies and builds. */
function tree(): string[] {
  const root = fileURLToPath(ROOT);
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (['node_modules', '.git', 'dist', 'test-output'].includes(entry.name)) continue;
      const path = join(dir, entry.name);
      const name = relative(root, path).split('\\').join('/');
      if (entry.isDirectory()) {
        out.push(`${name}/`);
        walk(path);
      } else out.push(name);
    }
  };
  walk(root);
  return out;
}

t.test('the code map names every sub-room of src/ (a folder of TypeScript inside a room)', async (t) => {
  const named = /has\s+sub-rooms \(([^)]*)\)/.exec(DOC.replace(/\n/g, ' '));
  t.ok(named, 'the code map lists its sub-rooms');
  const listed = new Set([...(named?.[1] ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1]));
  const paths = tree();
  const subRooms = paths
    .filter((path) => /^src\/[^/]+\/.+\/$/.test(path))
    .filter((folder) =>
      paths.some((file) => file.startsWith(folder) && /^[^/]+\.ts$/.test(file.slice(folder.length))),
    )
    .map((folder) => folder.slice('src/'.length));
  for (const room of subRooms) t.ok(listed.has(room), `${room} is named among the sub-rooms`);
});

t.test('every file and folder the page names is in the tree', async (t) => {
  const paths = tree();
  const names = new Set(
    [...DOC.matchAll(/`([\w./-]+(?:\.(?:ts|js|md|json)|\/))`/g)].map((match) => match[1]!),
  );
  for (const name of names)
    t.ok(
      paths.some((path) => path === name || path.endsWith(`/${name}`)),
      `${name} is a file or folder of the checkout`,
    );
});

t.test('the path of a consent: each function is defined in the file it is named with', async (t) => {
  const rows = tableAfter('## The path of a consent');
  t.ok(rows.length > 20, 'the path is walked step by step');
  for (const [, fileCell, functionCell] of rows) {
    const file = /^`([^`]+)`$/.exec(fileCell!)?.[1];
    t.ok(file, `one file a row: ${fileCell}`);
    if (!file) continue;
    const text = readFileSync(new URL(`src/${file}`, ROOT), 'utf8');
    for (const [, name] of functionCell!.matchAll(/`(\w+)`/g)) {
      const defined = new RegExp(
        `function\\s+${name}\\b|(?:async\\s+)?\\b${name}\\s*\\([^)]*\\)\\s*[:{]|(?:const|let)\\s+${name}\\s*=`,
      );
      t.match(text, defined, `${name} is defined in src/${file}`);
    }
  }
});
