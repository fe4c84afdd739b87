const rateLimit = {
  type: 'object',
  additionalProperties: false,
  required: ['perMinute', 'burst'],
  properties: { perMinute: { type: 'integer', minimum: 1 }, burst: { type: 'integer', minimum: 1 } },
} as const;

const port = { type: 'integer', minimum: 0, maximum: 65535 } as const;

/** JSON Schema of the configuration; a bad value stops the start with a message naming the key. */
export const configSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    home: { type: 'string', minLength: 1 },
    brand: { type: 'string', pattern: '^[a-z][a-z0-9]{1,15}$' },
    databaseUrl: { type: 'string', pattern: '^(sqlite:|postgres://|postgresql://)' },
    masterKeyFile: { type: 'string', minLength: 1 },
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
        requestTimeoutMs: { type: 'integer', minimum: 1000 },
        headersTimeoutMs: { type: 'integer', minimum: 1000 },
      },
    },
    metrics: { type: 'object', additionalProperties: false, properties: { host: { type: 'string' }, port } },
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
      properties: { cacheSeconds: { type: 'number', minimum: 0, maximum: 5 }, refusedRequests: rateLimit },
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
      },
    },
    scheduler: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cron: { type: 'string', minLength: 1 },
        syncIntervalMinutes: { type: 'number', exclusiveMinimum: 0 },
        concurrency: { type: 'integer', minimum: 1 },
        perBankConcurrency: { type: 'integer', minimum: 1 },
        leaseSeconds: { type: 'integer', minimum: 1 },
        pollIntervalMs: { type: 'integer', minimum: 10 },
      },
    },
    refresh: {
      type: 'object',
      additionalProperties: false,
      properties: {
        onlyLastCooldownMinutes: { type: 'number', minimum: 0 },
        historicalCooldownMinutes: { type: 'number', minimum: 0 },
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
        pollIntervalMs: { type: 'integer', minimum: 10 },
        concurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        perEndpointConcurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        perOrganisationConcurrency: { type: 'integer', minimum: 1, maximum: 1024 },
        backoffAfterUnanswered: { type: 'integer', minimum: 1, maximum: 1000 },
        backoffInitialSeconds: { type: 'number', minimum: 0.1, maximum: 86_400 },
        backoffMaxSeconds: { type: 'number', minimum: 0.1, maximum: 604_800 },
        leaseSeconds: { type: 'integer', minimum: 1 },
        // The first delay must be 0 (checked in load-config: JSON Schema has no strict way to say it).
        retryScheduleSeconds: {
          type: 'array',
          minItems: 1,
          maxItems: 50,
          items: { type: 'number', minimum: 0, maximum: 2_592_000 },
        },
        attemptTimeoutMs: { type: 'integer', minimum: 100, maximum: 300_000 },
        responseBytesKept: { type: 'integer', minimum: 0, maximum: 65_536 },
        wakeOnCommit: { type: 'boolean' },
      },
    },
    webhooks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        allowPrivateAddresses: { type: 'boolean' },
        allowPrivateAddressesInTestMode: { type: 'boolean' },
        secretRollGraceSeconds: { type: 'integer', minimum: 0, maximum: 604_800 },
      },
    },
    widget: {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 60 },
        primaryColour: { type: 'string', pattern: '^#[0-9a-fA-F]{6}$' },
        // An http(s) or data:image URL, or a file name under the data directory (no `..`).
        logoUrl: {
          type: 'string',
          maxLength: 100_000,
          pattern:
            '^($|https?://\\S+$|data:image/[a-z+.-]+;base64,[A-Za-z0-9+/=]+$|(?!/)(?!.*\\.\\.)[\\w./-]+\\.(png|jpe?g|gif|svg|webp)$)',
        },
        tokenTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        exchangeTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        sessionTtlMinutes: { type: 'number', exclusiveMinimum: 0, maximum: 1440 },
        allowedOrigins: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+$' },
        },
      },
    },
    banks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        connectors: {
          type: 'object',
          propertyNames: {
            enum: [
              'bancochile',
              'bancoestado',
              'santander',
              'bci',
              'itau',
              'scotiabank',
              'security',
              'bice',
              'falabella',
              'ripley',
              'consorcio',
            ],
          },
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            required: ['url', 'secret'],
            properties: {
              url: { type: 'string', pattern: '^https?://' },
              secret: { type: 'string', minLength: 16 },
              timeoutMs: { type: 'integer', minimum: 100, default: 15000 },
            },
          },
        },
      },
    },
  },
} as const;
