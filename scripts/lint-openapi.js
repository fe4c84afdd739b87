#!/usr/bin/env node
// Lints the OpenAPI document the API serves with Redocly's recommended rules (redocly.yaml): the document is
// built from the compiled routes (run `npm run build` first), as GET /v1/openapi.json builds it, and written
// to a temporary file for `redocly lint`. Exits with redocly's status.
//
// Usage: npm run lint:openapi
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { allRoutes, components } = await import(join(root, 'dist/src/http/catalogue.js'));
const { buildOpenApi } = await import(join(root, 'dist/src/http/openapi.js'));
const dir = mkdtempSync(join(tmpdir(), 'svc-openapi-'));
try {
  const file = join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(buildOpenApi(allRoutes, components, 'http://127.0.0.1:8080', 'svc')));
  const lint = spawnSync(
    process.execPath,
    [
      join(root, 'node_modules/@redocly/cli/bin/cli.js'),
      'lint',
      file,
      '--config',
      join(root, 'redocly.yaml'),
    ],
    {
      stdio: 'inherit',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    },
  );
  process.exitCode = lint.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
