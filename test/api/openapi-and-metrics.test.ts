import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { allRoutes } from '../../src/http/catalogue.js';
import { contractViolation } from '../helpers/contract.js';
import { createHttpMetrics, startMetricsServer } from '../../src/metrics/metrics.js';
import { queueDepths } from '../../src/processes/queue-depths.js';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REDOCLY = join(REPO_ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);

  t.test('the served OpenAPI document describes every mounted route', async (t) => {
    const response = await app.request('GET', '/v1/openapi.json', { key: tenant.keys.sk_test.secret });
    t.equal(response.status, 200);
    const doc = response.body;
    t.equal(doc.openapi, '3.1.0');
    t.equal(doc.info.version, '1.0.0');
    t.equal(doc.servers[0].url, app.config.api.baseUrl);
    for (const route of allRoutes) {
      const operation = doc.paths[route.path]?.[route.method];
      t.ok(operation, `${route.method.toUpperCase()} ${route.path} is documented`);
      t.equal(operation?.operationId, route.operationId);
      // Every status the server can answer, as its declaration implies.
      const implied = ['400', '408', '431', '500', '503'];
      if (route.auth !== 'none') implied.push('401', '403', '429');
      if (route.params) implied.push('404');
      if (route.method === 'post' || route.method === 'patch') implied.push('413', '415');
      if (route.method === 'post' && route.auth !== 'none') implied.push('409');
      for (const status of implied)
        t.ok(operation?.responses[status], `${route.operationId} documents ${status}`);
    }
    const operationIds = allRoutes.map((route) => route.operationId);
    t.equal(new Set(operationIds).size, operationIds.length, 'operation ids are unique');
    const documented = Object.entries(doc.paths as Record<string, object>).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m} ${path}`),
    );
    t.same(
      documented.sort(),
      allRoutes.map((r) => `${r.method} ${r.path}`).sort(),
      'nothing documented that is not mounted',
    );
  });

  t.test('the contract check fails on a status the document does not declare', async (t) => {
    const refusal = { error: { type: 'invalid_request_error', code: 'x', message: 'x' } };
    t.equal(
      contractViolation('GET', '/v1/links/link_0123456789abcdef', 404, refusal),
      null,
      'a declared 404',
    );
    t.equal(contractViolation('POST', '/v1/links', 413, refusal), null, 'a declared 413');
    t.equal(contractViolation('POST', '/v1/links', 409, refusal), null, 'an idempotency 409');
    t.match(
      contractViolation('GET', '/v1/links', 404, refusal),
      /GET \/v1\/links answered 404, which the document does not declare/,
      'a list takes no id: 404 is not among its answers',
    );
    t.match(contractViolation('GET', '/v1/links', 402, refusal), /does not declare/);
    t.match(contractViolation('GET', '/v1/links', 413, refusal), /does not declare/, 'a GET reads no body');
    t.match(contractViolation('GET', '/health', 401, refusal), /does not declare/, '/health takes no key');
    t.match(contractViolation('GET', '/v1/links/link_0123456789abcdef', 404, {}), /breaks its schema/);
  });

  t.test("the served document lints clean with Redocly's recommended rules", async (t) => {
    const response = await app.request('GET', '/v1/openapi.json', { key: tenant.keys.sk_test.secret });
    const dir = mkdtempSync(join(tmpdir(), 'svc-openapi-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'openapi.json');
    writeFileSync(file, response.text);
    const lint = spawnSync(
      process.execPath,
      [REDOCLY, 'lint', file, '--config', join(REPO_ROOT, 'redocly.yaml'), '--format', 'json'],
      {
        encoding: 'utf8',
        cwd: dir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      },
    );
    t.equal(lint.status, 0, `redocly lint exits 0\n${lint.stderr}`);
    const report = JSON.parse(lint.stdout) as {
      totals: { errors: number; warnings: number };
      problems: unknown[];
    };
    t.same(report.problems, [], 'no problem, warnings included');
    t.same(report.totals, { ...report.totals, errors: 0, warnings: 0 });
  });

  t.test('/metrics counts requests by route template and status', async (t) => {
    const metrics = createHttpMetrics(async () => ({ ...(await queueDepths(app.db)) }));
    const server = await startMetricsServer(metrics, '127.0.0.1', 0);
    t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
    metrics.observe('GET', '/v1/webhook_endpoints/{endpointId}', 200, 0.004);
    metrics.observe('GET', '/v1/webhook_endpoints/{endpointId}', 200, 0.006);
    metrics.observe('GET', '/v1/webhook_endpoints/{endpointId}', 404, 0.001);
    const { port } = server.address() as { port: number };
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    t.match(
      text,
      /svc_http_requests_total\{method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="200"\} 2/,
    );
    t.match(
      text,
      /svc_http_requests_total\{method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="404"\} 1/,
    );
    t.match(
      text,
      /svc_http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="200"\} 1/,
    );
    t.match(
      text,
      /svc_http_request_duration_seconds_bucket\{le="\+Inf",method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="200"\} 2/,
      'the buckets are cumulative, up to +Inf',
    );
    t.match(
      text,
      /svc_http_request_duration_seconds_sum\{method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="200"\} 0\.01\b/,
    );
    t.match(
      text,
      /svc_http_request_duration_seconds_count\{method="GET",route="\/v1\/webhook_endpoints\/\{endpointId\}",status="200"\} 2/,
    );
    t.match(text, /svc_up 1/);
    t.match(text, /svc_queue_depth\{queue="sync_jobs_queued"\} 0/);
    t.match(text, /svc_queue_depth\{queue="webhook_deliveries_pending"\} 0/);
    t.match(text, /svc_process_cpu_seconds_total/);
    t.match(text, /svc_nodejs_eventloop_lag_p99_seconds \d/, "the event loop's lag is reported");
    t.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
  });

  t.test('the API process reports its own requests', async (t) => {
    await app.request('GET', '/health');
    const text = await app.services.metrics.registry.metrics();
    t.match(text, /svc_http_requests_total\{method="GET",route="\/health",status="200"\} \d+/);
  });
});
