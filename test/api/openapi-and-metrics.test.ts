import t from 'tap';
import { allRoutes } from '../../src/api/catalogue.js';
import { createHttpMetrics, startMetricsServer } from '../../src/metrics/metrics.js';
import { queueDepths } from '../../src/processes/queue-depths.js';
import { createTenant, forEachEngine, startTestApp } from '../helpers/harness.js';

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
      if (route.auth !== 'none') {
        for (const status of ['401', '403', '429'])
          t.ok(operation?.responses[status], `${route.operationId} documents ${status}`);
      }
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
    t.match(text, /svc_up 1/);
    t.match(text, /svc_queue_depth\{queue="sync_jobs_queued"\} 0/);
    t.match(text, /svc_queue_depth\{queue="webhook_deliveries_pending"\} 0/);
    t.match(text, /svc_process_cpu_seconds_total/);
    t.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
  });

  t.test('the API process reports its own requests', async (t) => {
    await app.request('GET', '/health');
    const text = await app.services.metrics.registry.metrics();
    t.match(text, /svc_http_requests_total\{method="GET",route="\/health",status="200"\} \d+/);
  });
});
