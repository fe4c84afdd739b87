import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';

export interface HttpMetrics {
  registry: Registry;
  observe(method: string, route: string, status: number, seconds: number): void;
}

/** Work waiting in the database's queues, by queue name; the composition root knows where to read it. */
export type QueueDepthsReader = () => Promise<Record<string, number>>;

/** Rows removed by retention since install, by kind; kept in the database by whichever scheduler pruned. */
export type RetentionTotalsReader = () => Promise<Record<string, number>>;

/**
 * Each consent bank's load on its budget: the calls one sync interval of its links needs over what the
 * scheduled share of its budget allows (above 1: its links cannot all be synced within the interval).
 */
export type BankLoadReader = () => Promise<{ bank: string; mode: string; load: number }[]>;

/**
 * Prometheus metrics for an API process: requests by route and status, latency, queue depths, up, and the
 * rows retention removed.
 */
export function createHttpMetrics(
  readQueueDepths: QueueDepthsReader | null,
  readRetentionTotals: RetentionTotalsReader | null = null,
  readBankLoad: BankLoadReader | null = null,
): HttpMetrics {
  const registry = new Registry();
  // The event loop's delay is sampled every 100 ms rather than prom-client's 10 ms: its 100 wake-ups a second
  // kept an idle API process at 1.45% of a core (290 ms of CPU in 20 s, against 30 ms), and cost about 4 µs
  // of each request at 3,500 requests a second. The lag figures stay; they are sampled less often.
  collectDefaultMetrics({ register: registry, prefix: 'svc_', eventLoopMonitoringPrecision: 100 });
  const requests = new RequestSeries();
  for (const metric of requests.metrics()) registry.registerMetric(metric);
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
  if (readBankLoad) {
    // Read from the database at each scrape: the scheduler measures calls per sync and serves no metrics.
    new Gauge({
      name: 'svc_bank_budget_load',
      help: "A consent bank's links x calls per sync over what its budget's scheduled share allows in one sync interval (above 1: they cannot all be synced within it)",
      labelNames: ['bank', 'mode'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const { bank, mode, load } of await readBankLoad()) this.set({ bank, mode }, load);
      },
    });
  }
  return {
    registry,
    observe: (method, route, status, seconds) => requests.observe(method, route, status, seconds),
  };
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

interface Series {
  labels: { method: string; route: string; status: string };
  /** Requests at most each bucket's bound, not cumulative; the last counts those above every bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * Requests by method, route template and status, and their latency, as prom-client's Counter and Histogram
 * would expose them. prom-client checks and hashes the labels on every observation, bound children
 * included: 6 µs of a one-row GET's CPU, 2% of it (bench/api-overhead.ts). Here a request adds to its
 * series' numbers, found by one string, and the text is made only when `/metrics` is read.
 */
class RequestSeries {
  private readonly series = new Map<string, Series>();

  observe(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let series = this.series.get(key);
    if (!series) {
      series = {
        labels: { method, route, status: String(status) },
        buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0),
        sum: 0,
        count: 0,
      };
      this.series.set(key, series);
    }
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
    series.count++;
  }

  /** The two metrics, in the shape prom-client's registry reads (`get`), which its own classes have. */
  metrics(): Metric[] {
    const all = () => [...this.series.values()];
    const counter = {
      name: 'svc_http_requests_total',
      help: 'HTTP requests by method, route template and status',
      type: 'counter',
      aggregator: 'sum',
      get: async () => ({ ...counter, values: all().map(({ labels, count }) => ({ labels, value: count })) }),
    };
    const name = 'svc_http_request_duration_seconds';
    const histogram = {
      name,
      help: 'HTTP request latency by method, route template and status',
      type: 'histogram',
      aggregator: 'sum',
      get: async () => ({
        ...histogram,
        values: all().flatMap(({ labels, buckets, sum, count }) => {
          let cumulative = 0;
          const bucketLines = [...LATENCY_BUCKETS, '+Inf'].map((le, i) => {
            cumulative += buckets[i]!;
            return { labels: { le, ...labels }, value: cumulative, metricName: `${name}_bucket` };
          });
          return [
            ...bucketLines,
            { labels, value: sum, metricName: `${name}_sum` },
            { labels, value: count, metricName: `${name}_count` },
          ];
        }),
      }),
    };
    return [counter, histogram] as unknown as Metric[];
  }
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
