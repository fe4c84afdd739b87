/** The spec's constants and the appliance's settings, each with the spec's value as its default. */
export const RATE_GROUPS = [
  'read',
  'sync_write',
  'widget_tokens',
  'resource_write',
  'webhook_deliveries',
] as const;
export type RateGroup = (typeof RATE_GROUPS)[number];

export interface RateLimit {
  perMinute: number;
  burst: number;
}

export interface Config {
  home: string;
  brand: string;
  databaseUrl: string;
  masterKeyFile: string;
  /** Base64 of 32 bytes; when set (SVC_MASTER_KEY) it replaces the key file. Never printed. */
  masterKey: string;
  clockOffsetMs: number;
  api: {
    host: string;
    port: number;
    baseUrl: string;
    bodyLimitBytes: number;
    /** Whole request, body included; an unfinished one is answered 408 and its socket closed. */
    requestTimeoutMs: number;
    /** Request line and headers; a client trickling them (slow loris) is cut off after this. */
    headersTimeoutMs: number;
  };
  metrics: { host: string; port: number };
  /** `file` empty: JSON lines on stdout (journald under systemd); otherwise appended to that file. */
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'; file: string };
  auth: {
    cacheSeconds: number;
    /** Requests refused for their credential (401, 403), per client address or credential (refusals.ts). */
    refusedRequests: RateLimit;
  };
  rateLimits: Record<RateGroup, RateLimit>;
  rateLimitStore: 'auto' | 'memory' | 'database';
  idempotency: { ttlHours: number };
  supervisor: {
    restartDelaysMs: number[];
    crashLoopRestarts: number;
    crashLoopWindowSeconds: number;
    shutdownTimeoutSeconds: number;
  };
  scheduler: {
    cron: string;
    syncIntervalMinutes: number;
    concurrency: number;
    /** Workers of one process working for one bank at once: a bank that hangs holds no more (worker-pool.ts). */
    perBankConcurrency: number;
    leaseSeconds: number;
    pollIntervalMs: number;
  };
  sync: { failuresToExpire: number };
  /** On-demand refreshes: cooldowns per link and type, independent of the rate limits. */
  refresh: { onlyLastCooldownMinutes: number; historicalCooldownMinutes: number };
  dispatcher: {
    /** How often an idle dispatcher looks for due deliveries when nothing woke it earlier. */
    pollIntervalMs: number;
    /** Attempts in flight at once in one dispatcher process. */
    concurrency: number;
    /** Attempts in flight to any one endpoint, so a slow receiver holds at most this many slots. */
    perEndpointConcurrency: number;
    /**
     * Attempts in flight for any one organisation (all its endpoints, both modes), so that one tenant's
     * slow or dead receivers hold at most this share of `concurrency` and every other tenant keeps flowing.
     */
    perOrganisationConcurrency: number;
    /** Attempts in a row without an HTTP answer (timeouts, refused connections) that back an endpoint off. */
    backoffAfterUnanswered: number;
    /** The first back-off; each further unanswered attempt doubles it, up to `backoffMaxSeconds`. */
    backoffInitialSeconds: number;
    backoffMaxSeconds: number;
    leaseSeconds: number;
    /** Delay before each attempt, in seconds; its length is the number of attempts. The first must be 0. */
    retryScheduleSeconds: number[];
    /** Deadline of one attempt: connect, headers and the part of the body that is read. */
    attemptTimeoutMs: number;
    /** How much of a response is read and kept with the attempt. */
    responseBytesKept: number;
    /** Wake on another process's commit (Postgres LISTEN/NOTIFY, SQLite WAL file watch), not only on the poll. */
    wakeOnCommit: boolean;
  };
  webhooks: {
    /** Endpoints of both modes may reach private, loopback and link-local addresses (docs/security.md). */
    allowPrivateAddresses: boolean;
    /** Test-mode endpoints may: a development box whose receivers run beside it. */
    allowPrivateAddressesInTestMode: boolean;
    secretRollGraceSeconds: number;
  };
  /** Live-mode connectors by bank code; a bank without one is unavailable in live mode. */
  banks: { connectors: Record<string, BankConnectorConfig> };
  /** The hosted widget (docs/widget.md): the operator's branding and the lifetimes of its tokens. */
  widget: WidgetConfig;
}

export interface WidgetConfig {
  /** Shown in the widget's header and page title. */
  name: string;
  /** `#rrggbb`: buttons, focus rings and the spinner. */
  primaryColour: string;
  /** Empty (the name's initial), an `https://` or `data:image/…` URL, or a file in the data directory. */
  logoUrl: string;
  /** Lifetime of a `wt_…` widget token (the spec: 10 minutes). */
  tokenTtlMinutes: number;
  /** Lifetime of an `et_…` exchange token (the spec: 5 minutes). */
  exchangeTtlMinutes: number;
  /** Lifetime of the session a widget gets when it opens; its JSON API refuses it afterwards. */
  sessionTtlMinutes: number;
  /** Origins allowed to open the widget (e.g. `https://app.example.com`); empty: any origin. */
  allowedOrigins: string[];
}

export interface BankConnectorConfig {
  /** Base URL of a gateway that speaks the HTTP connector protocol (docs/connector-protocol.md). */
  url: string;
  /** Shared secret that signs every request to the gateway. */
  secret: string;
  timeoutMs: number;
}

export function defaultConfig(home: string): Config {
  return {
    home,
    brand: 'svc',
    databaseUrl: `sqlite://${home}/svc.db`,
    masterKeyFile: `${home}/master.key`,
    masterKey: '',
    clockOffsetMs: 0,
    api: {
      host: '127.0.0.1',
      port: 8080,
      baseUrl: '',
      bodyLimitBytes: 1024 * 1024,
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
    },
    metrics: { host: '127.0.0.1', port: 9464 },
    log: { level: 'info', file: '' },
    auth: { cacheSeconds: 5, refusedRequests: { perMinute: 60, burst: 30 } },
    rateLimits: {
      read: { perMinute: 100, burst: 20 },
      sync_write: { perMinute: 10, burst: 5 },
      widget_tokens: { perMinute: 30, burst: 10 },
      resource_write: { perMinute: 30, burst: 10 },
      webhook_deliveries: { perMinute: 60, burst: 20 },
    },
    rateLimitStore: 'auto',
    idempotency: { ttlHours: 24 },
    supervisor: {
      restartDelaysMs: [250, 500, 1000, 2000, 4000],
      crashLoopRestarts: 5,
      crashLoopWindowSeconds: 60,
      shutdownTimeoutSeconds: 30,
    },
    scheduler: {
      cron: '* * * * *',
      syncIntervalMinutes: 240,
      concurrency: 4,
      perBankConcurrency: 2,
      leaseSeconds: 120,
      pollIntervalMs: 1000,
    },
    sync: { failuresToExpire: 3 },
    refresh: { onlyLastCooldownMinutes: 5, historicalCooldownMinutes: 60 },
    dispatcher: {
      pollIntervalMs: 500,
      concurrency: 32,
      perEndpointConcurrency: 4,
      perOrganisationConcurrency: 8,
      backoffAfterUnanswered: 5,
      backoffInitialSeconds: 30,
      backoffMaxSeconds: 3600,
      leaseSeconds: 60,
      retryScheduleSeconds: [0, 60, 300, 1800, 7200, 21600],
      attemptTimeoutMs: 10_000,
      responseBytesKept: 2048,
      wakeOnCommit: true,
    },
    webhooks: {
      allowPrivateAddresses: false,
      allowPrivateAddressesInTestMode: false,
      secretRollGraceSeconds: 86_400,
    },
    banks: { connectors: {} },
    widget: {
      name: 'Bank Connect',
      primaryColour: '#1f5eff',
      logoUrl: '',
      tokenTtlMinutes: 10,
      exchangeTtlMinutes: 5,
      sessionTtlMinutes: 30,
      allowedOrigins: [],
    },
  };
}
