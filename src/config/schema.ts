import type { FromSchema } from 'json-schema-to-ts';
import { connectorSettingsSchema } from '../banks/connector-settings.js';
import { bankBudgetSchema, budgetDefaultsSchema } from '../banks/budget/budget-settings.js';
import { CONSENT_COVERAGES } from '../banks/consent/authorization-details.js';
import {
  BANK_ID_PATTERN,
  COUNTRIES,
  DATA_PROFILES,
  PRODUCTS,
  SECURITY_PROFILES,
} from '../banks/institutions.js';

/**
 * A token bucket: `perMinute` refills it, `burst` is its size. `what` names what is counted, for the
 * descriptions (the README's configuration table is rendered from them: `npm run docs:config`).
 */
function rateLimit(what: string, more = '') {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['perMinute', 'burst'],
    properties: {
      perMinute: { type: 'integer', minimum: 1, description: `${what} per minute${more}` },
      burst: { type: 'integer', minimum: 1, description: `${what} at once: the size of the bucket` },
    },
  } as const;
}

const port = { type: 'integer', minimum: 0, maximum: 65535 } as const;
const days = { type: 'integer', minimum: 0, maximum: 36_500 } as const;

/**
 * JSON Schema of the configuration; a bad value stops the start with a message naming the key. It is the
 * settings' TypeScript type too (`Config`, below), and their documentation: every setting's `description`
 * is its line in the README's configuration table (`src/config/config-table.ts` renders it, and a test
 * fails when the README differs). It validates the merged settings (defaults, file, environment, flags),
 * which always hold every key, so it names no `required` keys of its own: `Config` makes every key present
 * instead.
 */
export const configSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    home: {
      type: 'string',
      minLength: 1,
      description:
        'The data directory: `config.json`, `master.key`, the SQLite database, backups. `--home`, else `SVC_HOME`, else `~/.svc`',
    },
    brand: {
      type: 'string',
      pattern: '^[a-z][a-z0-9]{1,15}$',
      description: 'Prefix of keys and of the signature header; set at install',
    },
    databaseUrl: {
      type: 'string',
      pattern: '^(sqlite:|postgres://|postgresql://)',
      description: '`sqlite://PATH` or `postgres://…` (`?schema=NAME` selects a schema)',
    },
    masterKeyFile: {
      type: 'string',
      minLength: 1,
      description:
        'The AES-256-GCM master key that seals stored bank logins and webhook secrets (docs/security.md)',
    },
    masterKey: {
      type: 'string',
      description: 'Base64 of 32 bytes; when set (`SVC_MASTER_KEY`) it replaces the key file. Never printed',
    },
    clockOffsetMs: { type: 'integer', description: "Shifts every process's clock (for drills and tests)" },
    api: {
      type: 'object',
      additionalProperties: false,
      properties: {
        host: {
          type: 'string',
          minLength: 1,
          description: 'Listen address of the API (and the widget and console)',
        },
        port: { ...port, description: 'Listen port of the API' },
        baseUrl: {
          type: 'string',
          pattern: '^(https?://[^\\s]+[^/])?$',
          description: 'Public URL used in pagination links; empty: `http://<api.host>:<api.port>`',
        },
        bodyLimitBytes: { type: 'integer', minimum: 1024, description: 'Larger request bodies get 413' },
        requestTimeoutMs: {
          type: 'integer',
          minimum: 1000,
          description:
            'Whole request, body included: a request not fully received in time gets 408 and its connection is closed',
        },
        headersTimeoutMs: {
          type: 'integer',
          minimum: 1000,
          description:
            'The request line and headers must arrive within this; a client trickling them (slow loris) is cut off',
        },
        trustProxy: {
          type: 'array',
          maxItems: 64,
          items: { type: 'string', minLength: 1, maxLength: 64 },
          description:
            'Addresses or CIDRs of the reverse proxies in front of the API (`["127.0.0.1"]`); empty: `X-Forwarded-For` is ignored. From a listed proxy the client is the right-most address of `X-Forwarded-For` that is not one of them ([docs/console.md](docs/console.md#behind-a-reverse-proxy))',
        },
      },
    },
    metrics: {
      type: 'object',
      additionalProperties: false,
      properties: {
        host: { type: 'string', description: 'Listen address of the Prometheus endpoint (`/metrics`)' },
        port: { ...port, description: 'Port of the Prometheus endpoint; `0` turns it off' },
      },
    },
    console: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: {
          type: 'boolean',
          description:
            "The web console under `/console` on the API's address and port ([docs/console.md](docs/console.md)); `false` serves no console page",
        },
        timeZone: {
          type: 'string',
          minLength: 1,
          maxLength: 64,
          description:
            "IANA time zone the console shows times in (`America/Santiago`, `UTC`), in the page language's format",
        },
        actions: rateLimit(
          'Changes one console user may make (issue a key, redeliver, fire a test event, …)',
          ': a token bucket per user; past it a 429 page with Retry-After',
        ),
      },
    },
    log: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: {
          enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
          description: '`fatal` … `trace`, or `silent`',
        },
        file: {
          type: 'string',
          description:
            'Empty: JSON lines on stdout (journald under systemd); otherwise appended to this file instead',
        },
        format: {
          enum: ['auto', 'json', 'pretty'],
          description:
            '`auto`: one readable line per entry when stdout is a terminal, JSON lines otherwise (and always in `log.file`); `json` or `pretty` to choose',
        },
      },
    },
    auth: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cacheSeconds: {
          type: 'number',
          minimum: 0,
          maximum: 5,
          description: 'How long a key record is trusted from memory (at most 5)',
        },
        refusedRequests: rateLimit(
          'Requests refused for their credential (401 per client address, 403 per key)',
          '; beyond it 429 (refusals.ts)',
        ),
      },
    },
    /** The spec's groups (docs/api.md); a key's own limits and an organisation's ceilings can differ. */
    rateLimits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        read: rateLimit('Requests of one key in the `read` group (every `GET` except deliveries)'),
        sync_write: rateLimit('Requests of one key in the `sync_write` group (`POST /v1/refresh_intents`)'),
        widget_tokens: rateLimit(
          'Requests of one key in the `widget_tokens` group (`POST /v1/widget_tokens`)',
        ),
        resource_write: rateLimit(
          'Requests of one key in the `resource_write` group (every other `POST`, `PATCH` and `DELETE`)',
        ),
        webhook_deliveries: rateLimit(
          'Requests of one key in the `webhook_deliveries` group (`GET /v1/webhook_deliveries…`)',
        ),
      },
    },
    rateLimitStore: {
      enum: ['auto', 'memory', 'database'],
      description:
        '`memory` (one node) or `database` (shared by all API nodes); `auto` picks `database` on PostgreSQL',
    },
    idempotency: {
      type: 'object',
      additionalProperties: false,
      properties: {
        ttlHours: {
          type: 'number',
          exclusiveMinimum: 0,
          description: 'How long an `Idempotency-Key` replays its first response',
        },
      },
    },
    supervisor: {
      type: 'object',
      additionalProperties: false,
      properties: {
        restartDelaysMs: {
          type: 'array',
          minItems: 1,
          items: { type: 'integer', minimum: 0 },
          description: 'Backoff between restarts of a crashed child',
        },
        crashLoopRestarts: {
          type: 'integer',
          minimum: 1,
          description: 'Crashes within `crashLoopWindowSeconds` that stop `serve`',
        },
        crashLoopWindowSeconds: {
          type: 'integer',
          minimum: 1,
          description: 'The window in which `crashLoopRestarts` crashes stop `serve`',
        },
        shutdownTimeoutSeconds: {
          type: 'integer',
          minimum: 1,
          description: 'Drain time before children are killed',
        },
        heartbeatSeconds: {
          type: 'integer',
          minimum: 1,
          maximum: 300,
          description:
            'How often `svc serve` renews its row in the database and compares the schema with its build: a server that misses 3 counts as gone (`svc migrate` no longer counts it), and one whose schema moved stops its workers within one',
        },
      },
    },
    scheduler: {
      type: 'object',
      additionalProperties: false,
      properties: {
        cron: {
          type: 'string',
          minLength: 1,
          description: 'The scheduler tick, which enqueues due syncs (cron)',
        },
        syncIntervalMinutes: {
          type: 'number',
          exclusiveMinimum: 0,
          description: 'How often each link is synced on schedule',
        },
        concurrency: {
          type: 'integer',
          minimum: 1,
          description:
            "Sync workers of one scheduler process (plus one spare, which takes only a person's refresh at a bank whose refreshes hold their share of the workers, of an organisation with nothing running there)",
        },
        perBankConcurrency: {
          type: 'integer',
          minimum: 1,
          description:
            'Sync workers of one process that may work for one bank at once, for scheduled syncs and as many again for on-demand refreshes: a bank that hangs holds no more (worker-pool.ts)',
        },
        leaseSeconds: {
          type: 'integer',
          minimum: 1,
          description: "A claimed sync job's lease: a killed worker's job is claimed again once it runs out",
        },
        pollIntervalMs: {
          type: 'integer',
          minimum: 10,
          description: 'How long a sync worker that found nothing to do (or a failing database) waits',
        },
        wakeOnCommit: {
          type: 'boolean',
          description:
            'Wake idle sync workers when another process queues a job (Postgres LISTEN/NOTIFY, SQLite WAL file watch), not only on the poll',
        },
      },
    },
    /** On-demand refreshes: cooldowns per link and type, independent of the rate limits. */
    refresh: {
      type: 'object',
      additionalProperties: false,
      properties: {
        onlyLastCooldownMinutes: {
          type: 'number',
          minimum: 0,
          description:
            'Cooldown per link between on-demand `only_last` refreshes, independent of the rate limits',
        },
        historicalCooldownMinutes: {
          type: 'number',
          minimum: 0,
          description:
            'Cooldown per link between on-demand `historical` refreshes, independent of the rate limits',
        },
        mfaAttempts: {
          type: 'integer',
          minimum: 1,
          maximum: 10,
          description:
            'MFA codes one wait accepts: a wrong one below this leaves the intent waiting for another; past it the refresh fails with `mfa_invalid`',
        },
      },
    },
    /**
     * How long each kind of history is kept. Days; 0 keeps that kind forever. Movements are customer data
     * and are never pruned by age. Pruning runs in housekeeping, `batchSize` rows per short transaction, at
     * most `maxRowsPerPass` rows of each kind pruned per pass (held events passed by do not count).
     */
    retention: {
      type: 'object',
      additionalProperties: false,
      properties: {
        eventsDays: {
          ...days,
          description:
            'Days events are kept (Stripe keeps 30), with their webhook deliveries and attempts; an event with a delivery still pending is kept whatever its age. `0` keeps them forever',
        },
        jobsDays: {
          ...days,
          description:
            "Days finished and failed sync jobs are kept; queued, running and MFA-waiting jobs and each link's latest job always stay",
        },
        bankOutcomesDays: {
          ...days,
          description:
            "Days bank sync outcomes are kept (institution health reads the last hour); each bank's latest outcome always stays",
        },
        refreshIntentsDays: {
          ...days,
          description:
            'Days succeeded and failed refresh intents are kept (an intent stays while a job of it is kept); waiting and running ones always stay',
        },
        widgetTokensDays: {
          ...days,
          description:
            'Days widget and exchange tokens are kept after they expire (ended widget sessions go a day after they end); a widget token a kept session points at stays',
        },
        auditLogDays: { ...days, description: 'Days the audit log is kept; `0` never prunes it' },
        grantRevocationsDays: {
          ...days,
          description:
            "Days a consent grant's revocation is kept after the bank confirmed it (what `svc links inspect` says of a deleted consent link); pending and failed ones always stay",
        },
        batchSize: {
          type: 'integer',
          minimum: 1,
          maximum: 10_000,
          description: 'Rows removed per short transaction',
        },
        maxRowsPerPass: {
          type: 'integer',
          minimum: 1,
          maximum: 10_000_000,
          description:
            'Rows of each kind pruned in one housekeeping pass (the rest waits for the next); events passed by because a pending delivery holds them do not count, whatever their number',
        },
      },
    },
    sync: {
      type: 'object',
      additionalProperties: false,
      properties: {
        failuresToExpire: {
          type: 'integer',
          minimum: 1,
          description:
            'Syncs in a row refused for their credentials that expire an active link (reconnect it)',
        },
      },
    },
    /** Links (docs/links-and-sync.md, docs/open-finance.md). */
    links: {
      type: 'object',
      additionalProperties: false,
      properties: {
        consentExpiryWarningDays: {
          type: 'integer',
          minimum: 0,
          maximum: 365,
          description:
            "Days before a consent link's consent ends that it shows `expiring` and `link.consent_expiring` is sent (once); `0` warns only when it ends",
        },
      },
    },
    /** The webhook dispatcher (docs/webhooks.md). */
    dispatcher: {
      type: 'object',
      additionalProperties: false,
      properties: {
        pollIntervalMs: {
          type: 'integer',
          minimum: 10,
          description:
            'How often an idle dispatcher looks for due deliveries when nothing woke it earlier (the fallback poll)',
        },
        concurrency: {
          type: 'integer',
          minimum: 1,
          maximum: 1024,
          description: 'Attempts in flight at once in one dispatcher process',
        },
        perEndpointConcurrency: {
          type: 'integer',
          minimum: 1,
          maximum: 1024,
          description:
            'Attempts in flight to any one endpoint, so a slow receiver holds at most this many slots',
        },
        perOrganisationConcurrency: {
          type: 'integer',
          minimum: 1,
          maximum: 1024,
          description:
            "Attempts in flight for any one organisation (all its endpoints, both modes), per dispatcher process, so that one tenant's slow or dead receivers hold at most this share of `concurrency` and every other tenant keeps flowing",
        },
        backoffAfterUnanswered: {
          type: 'integer',
          minimum: 1,
          maximum: 1000,
          description:
            'Attempts in a row without an HTTP answer (timeouts, refused connections) that back an endpoint off',
        },
        backoffInitialSeconds: {
          type: 'number',
          minimum: 0.1,
          maximum: 86_400,
          description:
            'The first back-off; each further unanswered attempt doubles it, up to `backoffMaxSeconds`',
        },
        backoffMaxSeconds: {
          type: 'number',
          minimum: 0.1,
          maximum: 604_800,
          description: 'The longest back-off of an endpoint (docs/webhooks.md)',
        },
        leaseSeconds: {
          type: 'integer',
          minimum: 1,
          description: "A claimed delivery's lease (docs/webhooks.md)",
        },
        // The first must be 0, checked in load-config: JSON Schema has no strict way to say it.
        retryScheduleSeconds: {
          type: 'array',
          minItems: 1,
          maxItems: 50,
          items: { type: 'number', minimum: 0, maximum: 2_592_000 },
          description:
            'Delay before each attempt, in seconds; its length is the number of attempts. The first must be 0',
        },
        attemptTimeoutMs: {
          type: 'integer',
          minimum: 100,
          maximum: 300_000,
          description: "One attempt's deadline: connect, headers and the part of the body that is read",
        },
        responseBytesKept: {
          type: 'integer',
          minimum: 0,
          maximum: 65_536,
          description: 'How much of a response is read and kept with the attempt',
        },
        wakeOnCommit: {
          type: 'boolean',
          description:
            "Wake on another process's commit (Postgres LISTEN/NOTIFY, SQLite WAL file watch), not only on the poll",
        },
      },
    },
    webhooks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        allowPrivateAddresses: {
          type: 'boolean',
          description:
            'Let webhook endpoints of both modes reach private, loopback and link-local addresses (internal receivers; docs/security.md)',
        },
        allowPrivateAddressesInTestMode: {
          type: 'boolean',
          description:
            'Let test-mode endpoints reach them (a development box whose receivers run beside it); `svc webhooks listen` needs neither',
        },
        secretRollGraceSeconds: {
          type: 'integer',
          minimum: 0,
          maximum: 604_800,
          description: 'How long a rolled secret keeps signing beside the new one',
        },
        disableAfterFailingDays: {
          type: 'number',
          minimum: 0,
          maximum: 365,
          description:
            'An endpoint whose every attempt has failed for this many days (no 2xx since its first failure) is disabled, with a `webhook_endpoint.disabled` event, and its pending deliveries end `failed`; `0` never disables',
        },
      },
    },
    /** The hosted widget (docs/widget.md): the operator's branding and the lifetimes of its tokens. */
    widget: {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: {
          type: 'string',
          minLength: 1,
          maxLength: 60,
          description: "The hosted widget's name, shown in its header and page title (docs/widget.md)",
        },
        primaryColour: {
          type: 'string',
          pattern: '^#[0-9a-fA-F]{6}$',
          description: "`#rrggbb`: the widget's buttons, focus rings and spinner",
        },
        logoUrl: {
          type: 'string',
          maxLength: 100_000,
          pattern:
            '^($|https?://\\S+$|data:image/[a-z+.-]+;base64,[A-Za-z0-9+/=]+$|(?!/)(?!.*\\.\\.)[\\w./-]+\\.(png|jpe?g|gif|svg|webp)$)',
          description:
            "The widget's logo: empty (the name's initial), an `https://` or `data:image/…` URL, or a file in the data directory (no `..`)",
        },
        tokenTtlMinutes: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: 1440,
          description: 'Lifetime of a `wt_…` widget token (the spec: 10 minutes)',
        },
        exchangeTtlMinutes: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: 1440,
          description: 'Lifetime of an `et_…` exchange token (the spec: 5 minutes)',
        },
        sessionTtlMinutes: {
          type: 'number',
          exclusiveMinimum: 0,
          maximum: 1440,
          description:
            'Lifetime of the session a widget gets when it opens; its JSON API refuses it afterwards',
        },
        allowedOrigins: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+$' },
          description:
            'Page origins allowed to open the widget and call it from the browser (e.g. `https://app.example.com`); empty: any origin',
        },
        locale: {
          enum: ['es', 'en'],
          description:
            "The widget's language when neither the token's `locale` nor the browser's language is `es` or `en`",
        },
        allowedRedirectUris: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+(/\\S*)?$', maxLength: 2048 },
          description:
            '`redirect_uri` values a widget token may name for the hosted flow (docs/widget.md): exact, or an origin-and-path prefix when the entry ends in `/`. Empty: none',
        },
        consentStarts: rateLimit(
          'Consent starts (each a call to the bank) of one organisation and mode, all its keys together',
          ' (docs/open-finance.md, "Bank limits")',
        ),
        consentStartsPerKey: rateLimit(
          'Consent starts (each a call to the bank) from widgets whose token one key issued (a publishable key is public)',
          ' (docs/open-finance.md, "Bank limits")',
        ),
        consentStartsPerSession: rateLimit(
          'Consent starts (each a call to the bank) of one widget session, within its five attempts',
          ' (docs/open-finance.md, "Bank limits")',
        ),
      },
    },
    banks: {
      type: 'object',
      additionalProperties: false,
      properties: {
        connectors: {
          type: 'object',
          description:
            'Live-mode connectors by bank code, in config.json only: `{"bci": {"url": …, "secret": …, "timeoutMs": 15000}}`, the `url` of a gateway that speaks the HTTP connector protocol (docs/connector-protocol.md) and the `secret` (16 characters or more) that signs every request to it; a bank without one is unavailable in live mode',
          /**
           * Bank codes; load-config.ts then checks each against the one list of institutions (the built-in
           * banks and `banks.institutions`), which this schema cannot see whole.
           */
          propertyNames: { type: 'string', pattern: BANK_ID_PATTERN },
          additionalProperties: connectorSettingsSchema,
        },
        budget: budgetDefaultsSchema,
        budgets: {
          type: 'object',
          description:
            'One consent bank\'s own limits, by bank code, in config.json only: `{"bancoabierto": {"perSecond": 5, "perMinute": 30}}`; a limit left out is `banks.budget`\'s',
          propertyNames: { type: 'string', pattern: BANK_ID_PATTERN },
          additionalProperties: bankBudgetSchema,
        },
        institutions: {
          type: 'array',
          description:
            'Consent banks the operator adds to the built-in ones, in config.json only (docs/open-finance.md, "Adding an institution"): `[{"id": "bancoandino", "name": "Banco Andino", "country": "CL", "connection": "consent", "profile": {"security": "fapi2-cl", "data": ["ob-br-accounts-2"], "covers": ["accounts", "balances", "movements"], "maxDurationMonths": 12}, "products": ["movements", "income"], "holderTypes": ["individual"]}]`. Each connects by consent only, once `svc banks register` registered a client for it',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['id', 'name', 'country', 'connection', 'profile', 'products', 'holderTypes'],
            properties: {
              id: { type: 'string', pattern: BANK_ID_PATTERN },
              name: { type: 'string', minLength: 1, maxLength: 100 },
              country: { enum: COUNTRIES },
              connection: { const: 'consent' },
              profile: {
                type: 'object',
                additionalProperties: false,
                required: ['security', 'data', 'covers', 'maxDurationMonths'],
                properties: {
                  security: { enum: SECURITY_PROFILES },
                  data: { type: 'array', items: { enum: DATA_PROFILES }, minItems: 1, uniqueItems: true },
                  covers: {
                    type: 'array',
                    items: { enum: CONSENT_COVERAGES },
                    minItems: 1,
                    uniqueItems: true,
                  },
                  maxDurationMonths: { type: 'integer', minimum: 1, maximum: 120 },
                },
              },
              products: { type: 'array', items: { enum: PRODUCTS }, minItems: 1, uniqueItems: true },
              holderTypes: {
                type: 'array',
                items: { enum: ['individual', 'business'] },
                minItems: 1,
                uniqueItems: true,
              },
            },
          },
        },
      },
    },
    /** Test mode's own banks (docs/open-finance.md, "How test mode works"). */
    sandbox: {
      type: 'object',
      additionalProperties: false,
      properties: {
        consentBank: {
          type: 'object',
          additionalProperties: false,
          properties: {
            enabled: {
              type: 'boolean',
              description:
                "The API process serves the simulated consent bank `bancoabierto` (test mode; docs/open-finance.md): its pages on an origin of their own (`sandbox.consentBank.host`, port `sandbox.consentBank.port` + 2; never the API's), its mTLS endpoints on `sandbox.consentBank.port`",
            },
            host: {
              type: 'string',
              minLength: 1,
              description:
                "Listen address of the simulated bank's mTLS endpoints: loopback only, `127.0.0.1` or `localhost` (the names its certificate carries)",
            },
            port: {
              ...port,
              description:
                "Port of the simulated bank's mTLS endpoints; `0` picks a free one. Taken: the API runs without the bank, with a warning",
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
