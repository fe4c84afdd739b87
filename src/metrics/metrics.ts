import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface HttpMetrics {
  registry: Registry;
  observe(method: string, route: string, status: number, seconds: number): void;
}

/** Work waiting in the database's queues, by queue name; the composition root knows where to read it. */
export type QueueDepthsReader = () => Promise<Record<string, number>>;

/** Rows removed by retention since install, by kind; kept in the database by whichever scheduler pruned. */
export type RetentionTotalsReader = () => Promise<Record<string, number>>;

/**
 * Prometheus metrics for an API process: requests by route and status, latency, queue depths, up, and the
 * rows retention removed.
 */
export function createHttpMetrics(
  readQueueDepths: QueueDepthsReader | null,
  readRetentionTotals: RetentionTotalsReader | null = null,
): HttpMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests by method, route template and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency by method, route template and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const bound = new Map<string, { count: { inc(): void }; latency: { observe(value: number): void } }>();
  new Gauge({ name: 'svc_up', help: '1 while the process serves', registers: [registry] }).set(1);
  if (readQueueDepths) {
    new Gauge({
      name: 'svc_queue_depth',
      help: 'Work waiting in the database queues',
      labelNames: ['queue'],
      registers: [registry],
      async collect() {
        const depths = await readQueueDepths();
        for (const [queue, depth] of Object.entries(depths)) this.set({ queue }, depth);
      },
    });
  }
  if (readRetentionTotals) {
    // A counter whose value lives in the database: housekeeping runs in a scheduler process (perhaps on
    // another node), which serves no metrics, and adds each pass's counts to `retention_totals`. The total
    // never goes down, so it is a counter to Prometheus; `rate()` over it reads rows pruned per second.
    new Counter({
      name: 'svc_retention_pruned_rows_total',
      help: 'Rows removed by retention (housekeeping) since install, by kind',
      labelNames: ['kind'],
      registers: [registry],
      async collect() {
        const totals = await readRetentionTotals();
        this.reset();
        for (const [kind, rows] of Object.entries(totals)) this.inc({ kind }, rows);
      },
    });
  }
  return {
    registry,
    observe(method, route, status, seconds) {
      // Bound children skip prom-client's per-call label hashing.
      const key = `${method} ${route} ${status}`;
      let series = bound.get(key);
      if (!series) {
        const labels = { method, route, status: String(status) };
        series = { count: requests.labels(labels), latency: duration.labels(labels) };
        bound.set(key, series);
      }
      series.count.inc();
      series.latency.observe(seconds);
    },
  };
}

/** The operator port: `/metrics` only, bound to localhost unless the operator says otherwise. */
export async function startMetricsServer(metrics: HttpMetrics, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (error: Error) =>
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${error.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
