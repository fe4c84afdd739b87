import type { Config } from './schema.js';
import { DRAFT_PER_MINUTE, DRAFT_PER_SECOND } from '../banks/budget/budget-settings.js';
import { ARRIVAL_MARGIN_MS } from '../banks/budget/budget.js';

/** The spec's constants and the appliance's settings, each with the spec's value as its default. */
export const RATE_GROUPS = [
  'read',
  'sync_write',
  'widget_tokens',
  'resource_write',
  'webhook_deliveries',
] as const;
export type RateGroup = (typeof RATE_GROUPS)[number];

export type { Config, RateLimit, RetentionConfig, WidgetConfig } from './schema.js';

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
      trustProxy: [],
    },
    metrics: { host: '127.0.0.1', port: 9464 },
    /** The web console under /console on the API's address (docs/console.md). */
    console: { enabled: true, timeZone: 'America/Santiago', actions: { perMinute: 30, burst: 20 } },
    log: { level: 'info', file: '', format: 'auto' },
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
      heartbeatSeconds: 5,
    },
    scheduler: {
      cron: '* * * * *',
      syncIntervalMinutes: 240,
      concurrency: 4,
      perBankConcurrency: 2,
      leaseSeconds: 120,
      pollIntervalMs: 1000,
      wakeOnCommit: true,
    },
    sync: { failuresToExpire: 3 },
    // A week: time for the end user to renew before the consent ends (issue 31).
    links: { consentExpiryWarningDays: 7 },
    // Stripe keeps events 30 days; deliveries and attempts go with their event. Jobs and bank outcomes are
    // diagnostics of recent syncs (institution health reads one hour). Refresh intents past a quarter are
    // history nobody polls. Widget tokens live 10 minutes; a week past expiry answers any support question.
    // A grant revocation the bank confirmed answers `svc links inspect` for a quarter, like an intent.
    retention: {
      eventsDays: 30,
      jobsDays: 14,
      bankOutcomesDays: 7,
      refreshIntentsDays: 90,
      widgetTokensDays: 7,
      auditLogDays: 0,
      grantRevocationsDays: 90,
      batchSize: 500,
      maxRowsPerPass: 20_000,
    },
    refresh: { onlyLastCooldownMinutes: 5, historicalCooldownMinutes: 60, mfaAttempts: 3 },
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
      // Stripe disables an endpoint that has failed for a few days; its deliveries would only pile up.
      disableAfterFailingDays: 3,
    },
    banks: {
      connectors: {},
      // The CMF's draft: a bank serves 10 requests a second and 60 a minute toward one client.
      budget: {
        perSecond: DRAFT_PER_SECOND,
        perMinute: DRAFT_PER_MINUTE,
        scheduledShare: 0.8,
        arrivalMarginMs: ARRIVAL_MARGIN_MS,
        // Consent starts (a PAR each, three calls at a Brazilian bank) may take a quarter: 15 a minute at 60.
        consentStartShare: 0.25,
      },
      budgets: {},
      institutions: [],
    },
    // The simulated consent bank (src/consent-bank/): 8443 is HTTPS's usual alternate port; loopback only.
    sandbox: { consentBank: { enabled: true, host: '127.0.0.1', port: 8443 } },
    widget: {
      name: 'Bank Connect',
      primaryColour: '#1f5eff',
      logoUrl: '',
      tokenTtlMinutes: 10,
      exchangeTtlMinutes: 5,
      sessionTtlMinutes: 30,
      allowedOrigins: [],
      locale: 'es',
      allowedRedirectUris: [],
      // A busy checkout page starts a few connections a minute; a script behind a public key, hundreds.
      consentStarts: { perMinute: 20, burst: 10 },
      // A third of one bank's start share (15 a minute at the draft's 60; widget/consent/consent-starts.ts): one
      // abused publishable key leaves every other key two thirds of it. 5 a minute is 300 connections an
      // hour from one page, against the 195 starts one key drove in 60 s.
      consentStartsPerKey: { perMinute: 5, burst: 3 },
      // A person starts again when the bank's window was closed or blocked, or for another bank: 3 at once,
      // then one a minute, within the session's five attempts.
      consentStartsPerSession: { perMinute: 1, burst: 3 },
    },
  };
}
