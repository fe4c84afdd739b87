import { defaultConfig } from './defaults.js';
import { envName } from './load-config.js';
import { configSchema } from './schema.js';

/**
 * The README's configuration table, rendered from the schema (each setting's `description`) and the
 * defaults, so that the two cannot drift apart: `npm run docs:config` writes it between the markers below,
 * and test/unit/config-table.test.ts fails when the README holds anything else.
 */
export const TABLE_START = '<!-- config-table:start -->';
export const TABLE_END = '<!-- config-table:end -->';

export interface ConfigRow {
  setting: string;
  /** The `SVC_*` variable that sets it; empty for a setting only config.json can hold (`banks.connectors`). */
  env: string;
  default: string;
  description: string;
}

interface SchemaNode {
  description?: string;
  properties?: Record<string, SchemaNode>;
}

/** Defaults that are worked out at load rather than held in defaults.ts. */
const SHOWN_DEFAULTS: Record<string, string> = { home: '`~/.svc`' };

/** One row per setting that holds a value (objects with `properties` are folders of settings), in schema order. */
export function configRows(): ConfigRow[] {
  const rows: ConfigRow[] = [];
  // `<home>` stands for the data directory in the defaults that are paths inside it.
  walk(configSchema as SchemaNode, defaultConfig('<home>') as unknown as Record<string, unknown>, [], rows);
  return rows;
}

function walk(
  schema: SchemaNode,
  defaults: Record<string, unknown>,
  path: string[],
  rows: ConfigRow[],
): void {
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    const here = [...path, key];
    const value = defaults[key];
    if (child.properties) {
      walk(child, value as Record<string, unknown>, here, rows);
      continue;
    }
    const setting = here.join('.');
    if (!child.description) throw new Error(`${setting} has no description in src/config/schema.ts`);
    // load-config reads a variable for every leaf of the defaults; an object (a map) has none.
    const fromEnv = value === null || typeof value !== 'object' || Array.isArray(value);
    rows.push({
      setting,
      env: fromEnv ? envName(here) : '',
      default: SHOWN_DEFAULTS[setting] ?? shown(value),
      description: child.description,
    });
  }
}

function shown(value: unknown): string {
  if (value === '') return 'empty';
  if (typeof value === 'number' || typeof value === 'boolean') return `\`${String(value)}\``;
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

/** The table as prettier would lay it out (columns padded to their widest cell), so `npm run lint` agrees. */
export function renderConfigTable(rows: ConfigRow[] = configRows()): string {
  const cells = [
    ['Setting', 'Variable', 'Default', 'Meaning'],
    ...rows.map((row) => [
      `\`${row.setting}\``,
      row.env ? `\`${row.env}\`` : 'config.json only',
      row.default,
      row.description,
    ]),
  ].map((line) => line.map((cell) => cell.replace(/\|/g, '\\|')));
  const widths = cells[0]!.map((_, column) => Math.max(3, ...cells.map((line) => width(line[column]!))));
  const line = (values: string[]) =>
    `| ${values.map((value, column) => value + ' '.repeat(widths[column]! - width(value))).join(' | ')} |`;
  const [header, ...body] = cells;
  return [line(header!), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** Characters as a terminal counts them; the descriptions hold no wide or combining ones. */
function width(text: string): number {
  return [...text].length;
}

/** The README with its configuration table replaced by the one the schema renders. */
export function withConfigTable(readme: string, table: string = renderConfigTable()): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README.md has no ${TABLE_START} … ${TABLE_END} pair`);
  return `${readme.slice(0, start + TABLE_START.length)}\n\n${table}\n\n${readme.slice(end)}`;
}
