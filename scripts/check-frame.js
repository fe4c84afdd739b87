#!/usr/bin/env node
// The HTTP frame (src/http/: the app, listener, router, route table and the catalogue that mounts every
// feature) sits on top: features declare their routes with src/api/'s kit and never import the frame, so a
// feature can be read, tested and moved without the whole server. This fails, naming file:line, on an import
// of src/http/ from any file of src/ but the frame itself and the processes that start it (src/processes/);
// commands/ may import it too.
//
// Usage: node scripts/check-frame.js [ROOT] (default: the checkout this script is in).
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { sourceFiles } from './check-table-owners.js';

const FRAME = 'src/http/';
const MAY_IMPORT_FRAME = [FRAME, 'src/processes/'];
/** Static imports, re-exports and dynamic `import('…')` with a literal path. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"]+)\1/g;

/** Every import of the frame from outside it, as `file:line: …` lines. */
export function violations(root) {
  const out = [];
  for (const file of sourceFiles(join(root, 'src'))) {
    const path = relative(root, file).split(sep).join('/');
    if (MAY_IMPORT_FRAME.some((prefix) => path.startsWith(prefix))) continue;
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(IMPORT)) {
      const target = relative(root, normalize(join(dirname(file), match[2])))
        .split(sep)
        .join('/');
      if (!target.startsWith(FRAME)) continue;
      const line = text.slice(0, match.index).split('\n').length;
      out.push(
        `${path}:${line}: imports ${target}; features declare routes with src/api/ and never import the frame`,
      );
    }
  }
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const found = violations(root);
  for (const line of found) console.error(line);
  if (found.length > 0) {
    console.error(`check-frame: ${found.length} import(s) of src/http/ from a feature`);
    process.exit(1);
  }
}
