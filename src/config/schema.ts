import type { FromSchema } from 'json-schema-to-ts';
import { BANK_IDS } from '../banks/institutions.js';

const rateLimit = {
  type: 'object',
  additionalProperties: false,
  required: ['perMinute', 'burst'],
  properties: { perMinute: { type: 'integer', minimum: 1 }, burst: { type: 'integer', minimum: 1 } },
} as const;

const port = { type: 'integer', minimum: 0, maximum: 65535 } as const;

/**
 * JSON Schema of the configuration; a bad value stops the start with a message naming the key. It is the
 * settings' TypeScript type too (`Config`, below). It validates the merged settings (defaults, file,
 * environment, flags), which always hold every key, so it names no `required` keys of its own: `Config`
 * makes every key present instead.
 */
export const configSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    home: { type: 'string', minLength: 1 },
    brand: { type: 'string', pattern: '^[a-z][a-z0-9]{1,15}$' },
    databaseUrl: { type: 'string', pattern: '^(sqlite:|postgres://|postgresql://)' },
    masterKeyFile: { type: 'string', minLength: 1 },
    /** Base64 of 32 bytes; when set (SVC_MASTER_KEY) it replaces the key file. Never printed. */
    masterKey: { type: 'string' },
    clockOffsetMs: { type: 'integer' },
    api: {
      type: 'object',
      additionalProperties: false,
      properties: {
        host: { type: 'string', minLength: 1 },
        port,
        baseUrl: { type: 'string', pattern: '^(https?://[^\\s]+[^/])?$' },
        bodyLimitBytes: { type: 'integer', minimum: 1024 },
        /** Whole request, body included; an unfinished one is answered 408 and its socket closed. */
        requestTimeoutMs: { type: 'integer', minimum: 1000 },
        /** Request line and headers; a client trickling them (slow loris) is cut off after this. */
        headersTimeoutMs: { type: 'integer', minimum: 1000 },
      },
    },
    metrics: { type: 'object', additionalProperties: false, properties: { host: { type: 'string' }, port } },
    console: {
      type: 'object',
      additionalProperties: false,
      /** `actions`: what one console user may change (issue a key, redeliver, fire a test event, …) per minute. */
      properties: { enabled: { type: 'boolean' }, actions: rateLimit },
    },
    /** `file` empty: JSON lines on stdout (journald under systemd); otherwise appended to that file. */
    log: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
        file: { type: 'string' },
      },
    },
    auth: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cacheSeconds: { type: 'number', minimum: 0, maximum: 5 },
        /** Requests refused for their credential (401, 403), per client address or credential (refusals.ts). */
        refusedRequests: rateLimit,
      },
    },
    rateLimits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        read: rateLimit,
        sync_write: rateLimit,
        widget_tokens: rateLimit,
        resource_write: rateLimit,
        webhook_deliveries: rateLimit,
      },
    },
    rateLimitStore: { enum: ['auto', 'memory', 'database'] },
    idempotency: {
      type: 'object',
      additionalProperties: false,
      properties: { ttlHours: { type: 'number', exclusiveMinimum: 0 } },
    },
    supervisor: {
      type: 'object',
      additionalProperties: false,
      properties: {
        restartDelaysMs: { type: 'array', minItems: 1, items: { type: 'integer', minimum: 0 } },
        crashLoopRestarts: { type: 'integer', minimum: 1 },
        crashLoopWindowSeconds: { type: 'integer', minimum: 1 },
        shutdownTimeoutSeconds: { type: 'integer', minimum: 1 },
        /**
         * How often `svc serve` renews its row in the database and compares the schema with its build: a
         * server that misses 3 counts as gone, and one whose schema moved stops its workers within one.
         */
        heartbeatSeconds: { type: 'integer', minimum: 1, maximum: 300 },
      },
    },
    scheduler: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cron: { type: 'string', minLength: 1 },
        syncIntervalMinutes: { type: 'number', exclusiveMinimum: 0 },
        concurrency: { type: 'integer', minimum: 1 },
        /** Workers of one process working for one bank at once: a bank that hangs holds no more (worker-pool.ts). */
        perBankConcurrency: { type: 'integer', minimum: 1 },
        leaseSeconds: { type: 'integer', minimum: 1 },
        pollIntervalMs: { type: 'integer', minimum: 10 },
      },
    },
    /** On-demand refreshes: cooldowns per link and type, independent of the rate limits. */
    refresh: {
      type: 'object',
      additionalProperties: false,
      properties: {
        onlyLastCooldownMinutes: { type: 'number', minimum: 0 },
        historicalCooldownMinutes: { type: 'number', minimum: 0 },
        /** Codes one MFA wait accepts: a wrong one below this leaves the intent waiting for another. */
        mfaAttempts: { type: 'integer', minimum: 1, maximum: 10 },
      },
    },
    /**
     * How long each kind of history is kept (docs: the README's configuration table). Days; 0 keeps that
     * kind forever. Movements are customer data and are never pruned by age. Pruning runs in housekeeping,
     * `batchSize` rows per short transaction, at most `maxRowsPerPass` rows of each kind per pass.
     */
    retention: {
      type: 'object',
      additionalProperties: false,
      properties: {
        /** Events, with their webhook deliveries and attempts; an event with a pending delivery stays. */
        eventsDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        /** Finished and failed sync jobs; queued, running and MFA-waiting ones and each link's latest stay. */
        jobsDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        /** Bank sync outcomes (institution health reads the last hour); each bank's latest stays. */
        bankOutcomesDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        /** Succeeded and failed refresh intents; waiting and running ones stay. */
        refreshIntentsDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        /** Widget and exchange tokens, counted from their expiry; a widget token a kept session points at stays. */
        widgetTokensDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        /** The audit log; 0 (the default) keeps it forever. */
        auditLogDays: { type: 'integer', minimum: 0, maximum: 36_500 },
        batchSize: { type: 'integer', minimum: 1, maximum: 10_000 },
        maxRowsPerPass: { type: 'integer', minimum: 1, maximum: 10_000_000 },
      },
    },
    sync: {
      type: 'object',
      additionalProperties: false,
      properties: { failuresToExpire: { type: 'integer', minimum: 1 } },
    },
    dispatcher: {
      type: 'object',
      additionalProperties: false,
      properties: {
        /** How often an idle dispatcher looks for due deliveries when nothing woke it earlier. */
        pollIntervalMs: { type: 'integer', minimum: 10 },
        /** Attempts in flight at once in one dispatcher process. */
        concurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        /** Attempts in flight to any one endpoint, so a slow receiver holds at most this many slots. */
        perEndpointConcurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        /**
         * Attempts in flight for any one organisation (all its endpoints, both modes), so that one tenant's
         * slow or dead receivers hold at most this share of `concurrency` and every other tenant keeps flowing.
         */
        perOrganisationConcurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        /** Attempts in a row without an HTTP answer (timeouts, refused connections) that back an endpoint off. */
        backoffAfterUnanswered: { type: 'integer', minimum: 1, maximum: 1000 },
        /** The first back-off; each further unanswered attempt doubles it, up to `backoffMaxSeconds`. */
        backoffInitialSeconds: { type: 'number', minimum: 0.1, maximum: 86_400 },
        backoffMaxSeconds: { type: 'number', minimum: 0.1, maximum: 604_800 },
        leaseSeconds: { type: 'integer', minimum: 1 },
        /**
         * Delay before each attempt, in seconds; its length is the number of attempts. The first must be 0
         * (checked in load-config: JSON Schema has no strict way to say it).
         */
        retryScheduleSeconds: {
          type: 'array',
          minItems: 1,
          maxItems: 50,
          items: { type: 'number', minimum: 0, maximum: 2_592_000 },
        },
        /** Deadline of one attempt: connect, headers and the part of the body that is read. */
        attemptTimeoutMs: { type: 'integer', minimum: 100, maximum: 300_000 },
        /** How much of a response is read and kept with the attempt. */
        responseBytesKept: { type: 'integer', minimum: 0, maximum: 65_536 },
        /** Wake on another process's commit (Postgres LISTEN/NOTIFY, SQLite WAL file watch), not only on the poll. */
        wakeOnCommit: { type: 'boolean' },
      },
    },
    webhooks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        /** Endpoints of both modes may reach private, loopback and link-local addresses (docs/security.md). */
        allowPrivateAddresses: { type: 'boolean' },
        /** Test-mode endpoints may: a development box whose receivers run beside it. */
        allowPrivateAddressesInTestMode: { type: 'boolean' },
        secretRollGraceSeconds: { type: 'integer', minimum: 0, maximum: 604_800 },
      },
    },
    /** The hosted widget (docs/widget.md): the operator's branding and the lifetimes of its tokens. */
    widget: {
      type: 'object',
      additionalProperties: false,
      properties: {
        /** Shown in the widget's header and page title. */
        name: { type: 'string', minLength: 1, maxLength: 60 },
        /** `#rrggbb`: buttons, focus rings and the spinner. */
        primaryColour: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$' },
        /**
         * Empty (the name's initial), an `https://` or `data:image/…` URL, or a file in the data directory
         * (no `..`).
         */
        logoUrl: {
          type: 'string',
          maxLength: 100_000,
          pattern:
            '^($|https?://\\S+$|data:image/[a-z+.-]+;base64,[A-Za-z0-9+/=]+$|(?!/)(?!.*\\.\\.)[\\w./-]+\\.(png|jpe?g|gif|svg|webp)$)',
        },
        /** Lifetime of a `wt_…` widget token (the spec: 10 minutes). */
        tokenTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        /** Lifetime of an `et_…` exchange token (the spec: 5 minutes). */
        exchangeTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        /** Lifetime of the session a widget gets when it opens; its JSON API refuses it afterwards. */
        sessionTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        /** Origins allowed to open the widget (e.g. `https://app.example.com`); empty: any origin. */
        allowedOrigins: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+$' },
        },
        /** The widget's language when neither the token nor the browser names `es` or `en`. */
        locale: { enum: ['es', 'en'] },
        /**
         * Where a widget token's `redirect_uri` may point (the hosted flow, docs/widget.md): an entry matches
         * a redirect_uri exactly, or, when it ends in `/`, as an origin-and-path prefix. Empty: none.
         */
        allowedRedirectUris: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+(/\\S*)?$', maxLength: 2048 },
        },
      },
    },
    banks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        /** Live-mode connectors by bank code; a bank without one is unavailable in live mode. */
        connectors: {
          type: 'object',
          /** The institutions' codes, from the one list of banks (banks/institutions.ts). */
          propertyNames: { enum: BANK_IDS },
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            required: ['url', 'secret'],
            properties: {
              /** Base URL of a gateway that speaks the HTTP connector protocol (docs/connector-protocol.md). */
              url: { type: 'string', pattern: '^https?://' },
              /** Shared secret that signs every request to the gateway. */
              secret: { type: 'string', minLength: 16 },
              timeoutMs: { type: 'integer', minimum: 100, default: 15000 },
            },
          },
        },
      },
    },
  },
} as const;

/** Every key present, at every depth: what the merged settings always are. */
type Complete<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { -readonly [K in keyof T]-?: Complete<T[K]> }
    : T;

/** The settings, validated and complete (defaults.ts fills every key; the schema checks each value). */
export type Config = Complete<FromSchema<typeof configSchema>>;
export type RateLimit = Config['auth']['refusedRequests'];
export type WidgetConfig = Config['widget'];
export type RetentionConfig = Config['retention'];
export type BankConnectorConfig = Config['banks']['connectors'][string];
