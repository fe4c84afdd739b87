#!/usr/bin/env node
// Writes the README's configuration table from the config schema's descriptions and the defaults
// (src/config/config-table.ts), between its `<!-- config-table:start -->` and `<!-- config-table:end -->`
// markers. Run after a build: `npm run docs:config`. test/unit/config-table.test.ts fails while the README
// differs from what this writes.
import { readFileSync, writeFileSync } from 'node:fs';
import { URL } from 'node:url';

const { withConfigTable } = await import(new URL('../dist/src/config/config-table.js', import.meta.url).href);
const readmeUrl = new URL('../README.md', import.meta.url);
const before = readFileSync(readmeUrl, 'utf8');
const after = withConfigTable(before);
if (after === before) console.log('README.md: the configuration table is up to date');
else {
  writeFileSync(readmeUrl, after);
  console.log('README.md: configuration table rewritten from src/config/schema.ts');
}
