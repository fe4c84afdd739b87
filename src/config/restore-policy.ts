import { configSchema } from './schema.js';

/**
 * What `svc restore` may take from an archive's config.json, setting by setting: the one allow-list, beside
 * the schema it classifies. Every leaf of the schema (`settingLeaves`) has a decision here, and
 * test/unit/restore-policy.test.ts fails when a setting is added to the schema without one; a leaf missing
 * here all the same is set aside like an `operator` one (backup/archived-config.ts), never taken.
 *
 * An archive may come from anyone (docs/security.md), so a restore takes from it only what shapes how the
 * restored data is served, never what decides where secrets, bank logins or traffic go, or which key opens
 * them:
 *
 * - `archive`: taken when valid by the schema.
 * - `target`: a path, decided by the restore from the target home and its flags; never taken.
 * - `operator`: set aside; the restored config.json has the target installation's own value (`--force`
 *   over one) or the default, and the restore lists the archived value beside it. The operator takes it
 *   by name, once seen: `svc restore … --force --keep-config banks.connectors`. Each default here is the
 *   closed one (no connector, loopback, no private addresses, no redirect URI), so setting one aside never
 *   opens anything.
 */
export type RestoreDecision =
  { take: 'archive' } | { take: 'target'; why: string } | { take: 'operator'; why: string; secret?: boolean };

const archive = { take: 'archive' } as const;
const target = (why: string) => ({ take: 'target', why }) as const;
const operator = (why: string, secret = false) => ({ take: 'operator', why, secret }) as const;

/** Both settings of a token bucket (schema.ts's `rateLimit`). */
const bucket = (prefix: string) => ({ [`${prefix}.perMinute`]: archive, [`${prefix}.burst`]: archive });

export const RESTORE_POLICY: Readonly<Record<string, RestoreDecision>> = {
  home: target('the data directory is the one restored into'),
  // The prefix of the API keys in the restored database: they stop parsing under another.
  brand: archive,
  databaseUrl: target('the database is --database-url, else <home>/svc.db'),
  masterKeyFile: target('the key goes to <home>/master.key'),
  masterKey: operator('it replaces the restored key file as the key that opens every stored secret', true),
  // Every expiry (tokens, sessions, consents) and every retention cut-off follows it: +10 years prunes
  // the audit log at the first pass. Drills and tests only.
  clockOffsetMs: operator("it shifts every process's clock, and every expiry and retention cut-off with it"),

  'api.host': operator('it decides which network the API, the widget and the console listen on'),
  'api.port': archive,
  // Pagination links (which clients follow with their key) and the consent bank's redirects are built on it.
  'api.trustProxy': operator(
    'it decides whose X-Forwarded-For is believed: a listed proxy chooses the client address every budget counts by',
  ),
  'api.baseUrl': operator('API clients follow its links with their keys, and bank redirects go to it'),
  'api.bodyLimitBytes': archive,
  'api.requestTimeoutMs': archive,
  'api.headersTimeoutMs': archive,
  'metrics.host': operator('it decides which network the metrics endpoint listens on'),
  'metrics.port': archive,
  'console.enabled': archive,
  'console.timeZone': archive,
  ...bucket('console.actions'),
  'log.level': archive,
  // Kept inside the archived home only, moved to the same place in the new one (archived-config.ts).
  'log.file': archive,
  'log.format': archive,
  'auth.cacheSeconds': archive,
  ...bucket('auth.refusedRequests'),
  ...bucket('rateLimits.read'),
  ...bucket('rateLimits.sync_write'),
  ...bucket('rateLimits.widget_tokens'),
  ...bucket('rateLimits.resource_write'),
  ...bucket('rateLimits.webhook_deliveries'),
  rateLimitStore: archive,
  'idempotency.ttlHours': archive,
  'supervisor.restartDelaysMs': archive,
  'supervisor.crashLoopRestarts': archive,
  'supervisor.crashLoopWindowSeconds': archive,
  'supervisor.shutdownTimeoutSeconds': archive,
  'supervisor.heartbeatSeconds': archive,
  'scheduler.cron': archive,
  'scheduler.syncIntervalMinutes': archive,
  'scheduler.concurrency': archive,
  'scheduler.perBankConcurrency': archive,
  'scheduler.leaseSeconds': archive,
  'scheduler.pollIntervalMs': archive,
  'scheduler.wakeOnCommit': archive,
  'refresh.onlyLastCooldownMinutes': archive,
  'refresh.historicalCooldownMinutes': archive,
  'refresh.mfaAttempts': archive,
  'retention.eventsDays': archive,
  'retention.jobsDays': archive,
  'retention.bankOutcomesDays': archive,
  'retention.refreshIntentsDays': archive,
  'retention.widgetTokensDays': archive,
  'retention.auditLogDays': archive,
  'retention.grantRevocationsDays': archive,
  'retention.batchSize': archive,
  'retention.maxRowsPerPass': archive,
  'sync.failuresToExpire': archive,
  'links.consentExpiryWarningDays': archive,
  'dispatcher.pollIntervalMs': archive,
  'dispatcher.concurrency': archive,
  'dispatcher.perEndpointConcurrency': archive,
  'dispatcher.perOrganisationConcurrency': archive,
  'dispatcher.backoffAfterUnanswered': archive,
  'dispatcher.backoffInitialSeconds': archive,
  'dispatcher.backoffMaxSeconds': archive,
  'dispatcher.leaseSeconds': archive,
  'dispatcher.retryScheduleSeconds': archive,
  'dispatcher.attemptTimeoutMs': archive,
  'dispatcher.responseBytesKept': archive,
  'dispatcher.wakeOnCommit': archive,
  'webhooks.allowPrivateAddresses': operator(
    'it lets webhook deliveries reach private, loopback and link-local addresses',
  ),
  'webhooks.allowPrivateAddressesInTestMode': operator(
    'it lets test-mode webhook deliveries reach private, loopback and link-local addresses',
  ),
  'webhooks.secretRollGraceSeconds': archive,
  'webhooks.disableAfterFailingDays': archive,
  'widget.name': archive,
  'widget.primaryColour': archive,
  // An http(s) logo is fetched by every end user's browser that opens the widget.
  'widget.logoUrl': operator("every end user's browser that opens the widget fetches it"),
  'widget.tokenTtlMinutes': archive,
  'widget.exchangeTtlMinutes': archive,
  'widget.sessionTtlMinutes': archive,
  // Empty allows any origin: setting a list aside would only widen who may open the widget.
  'widget.allowedOrigins': archive,
  'widget.locale': archive,
  // Bounds on what reaches the banks: an archive's only sets how many starts pass, never where they go.
  ...bucket('widget.consentStarts'),
  ...bucket('widget.consentStartsPerKey'),
  ...bucket('widget.consentStartsPerSession'),
  'widget.allowedRedirectUris': operator('the hosted widget sends end users and their exchange tokens there'),
  'banks.connectors': operator('live bank logins are sent to these gateways, signed with these secrets'),
  'banks.budget.perSecond': archive,
  'banks.budget.perMinute': archive,
  'banks.budget.arrivalMarginMs': archive,
  'banks.budget.scheduledShare': archive,
  'banks.budget.consentStartShare': archive,
  'banks.budgets': archive,
  // Names and profiles only: a consent bank is reached at what `svc banks register` stored, in the database.
  'banks.institutions': archive,
  'sandbox.consentBank.enabled': archive,
  'sandbox.consentBank.host': operator("it decides which address the simulated bank's endpoints listen on"),
  'sandbox.consentBank.port': archive,
};

interface SchemaNode {
  type?: string;
  properties?: Record<string, SchemaNode>;
}

/**
 * Every setting of a schema by its dotted path: a group (an object with `properties`) is walked, anything
 * else (a value, a list, a map such as `banks.connectors`) is one setting.
 */
export function settingLeaves(schema: SchemaNode = configSchema as unknown as SchemaNode): string[] {
  const leaves: string[] = [];
  const walk = (node: SchemaNode, path: string[]) => {
    if (node.type === 'object' && node.properties)
      for (const [key, child] of Object.entries(node.properties)) walk(child, [...path, key]);
    else leaves.push(path.join('.'));
  };
  walk(schema, []);
  return leaves;
}

/** The decision for a setting; one the table misses is set aside, never taken. */
export function restoreDecision(path: string): RestoreDecision {
  return Object.hasOwn(RESTORE_POLICY, path)
    ? RESTORE_POLICY[path]!
    : { take: 'operator', why: 'this svc has made no decision about restoring it' };
}

/** The settings a restore sets aside unless `--keep-config` names them. */
export function operatorSettings(): string[] {
  return settingLeaves().filter((path) => restoreDecision(path).take === 'operator');
}
