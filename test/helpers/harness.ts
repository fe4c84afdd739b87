import './untracked-children.js';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory from 'knex';
import type { Test } from 'tap';
import { ManualClock } from '../../src/clock/clock.js';
import type { Config } from '../../src/config/defaults.js';
import { loadConfig } from '../../src/config/load-config.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { migrateUp } from '../../src/db/migrations.js';
import { silentLogger, type Logger } from '../../src/logging/logger.js';
import { buildServices } from '../../src/processes/services.js';
import { startApiServer, type ApiServer } from '../../src/http/server.js';
import { listenForApi } from '../../src/http/listener.js';
import type { ConsentBank } from '../../src/consent-bank/consent-bank.js';
import type { CustomerData } from '../../src/consent-bank/customer-data.js';
import type { BrasilBank } from '../../src/consent-bank/brasil/brasil-bank.js';
import type { BankOptions } from '../../src/consent-bank/bank-profile.js';
import { serveAndRegister } from '../../src/test-mode/serve-consent-banks.js';
import { testCaDirectory, writeTestCa } from '../../src/consent-bank/test-ca.js';
import type { AppServices } from '../../src/api/services.js';
import type { AnyRoute } from '../../src/api/route.js';
import { SecretBox } from '../../src/secrets/secret-box.js';
import type { StoredAttempt } from '../../src/webhooks/deliveries.js';
import { createOrganisation } from '../../src/orgs/orgs.js';
import { createApiKey } from '../../src/keys/keys.js';
import type { Mode, KeyType } from '../../src/keys/key-format.js';
import type { RateLimitOverrides } from '../../src/ratelimit/overrides.js';
import { contractViolation } from './contract.js';
import type { ConnectorResolver } from '../../src/banks/resolver.js';
import type { Connector } from '../../src/banks/connector.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';

export type EngineName = 'sqlite' | 'postgres';

/**
 * How long a test waits for work that takes a second or two on an idle machine (a process starting, a
 * sync, a delivery) before calling it hung. Not a promise of the product's: room for a loaded 2-core
 * machine, where the same work has been seen to take ten times as long.
 */
export const HANG_GUARD_MS = 60_000;

/**
 * Where every test app's clock starts. Sandbox data is a function of time, so a fixed start makes every
 * run see the same bank (here: pending card charges on the day, a reversal within the month).
 */
export const TEST_EPOCH = Date.UTC(2026, 5, 15, 15, 0, 0);

/**
 * Sets this test file's time limit (tap's, which the runner enforces) and says it in the TAP stream, where
 * the runner reads it to print each file's time beside its limit (scripts/test.js). Files that do not call
 * this have tap's default (package.json, 300 s).
 */
export function setTimeLimit(t: Test, ms: number): void {
  t.setTimeout(ms);
  t.comment(`time limit: ${Math.round(ms)} ms`);
}

/** SQLite always; Postgres too when SVC_TEST_DATABASE_URL names a server (CI gives one). */
export function engines(): EngineName[] {
  return process.env.SVC_TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

/** Runs `body` once per engine as a subtest named after the engine. */
export function forEachEngine(t: Test, body: (t: Test, engine: EngineName) => Promise<void>): void {
  for (const engine of engines()) t.test(engine, (sub) => body(sub, engine));
}

export interface TestDatabase {
  url: string;
  home: string;
}

/**
 * An isolated, empty database: a fresh SQLite file in a temporary home, or a fresh Postgres schema. Removed
 * when the test ends, unless it failed and SVC_KEEP_FAILED_DB=1, so the evidence can be read.
 */
export async function freshDatabase(t: Test, engine: EngineName): Promise<TestDatabase> {
  const home = mkdtempSync(join(tmpdir(), 'svc-test-'));
  if (engine === 'sqlite') {
    t.teardown(() => cleanup(t, () => rmSync(home, { recursive: true, force: true })));
    return { url: `sqlite://${home}/svc.db`, home };
  }
  const base = process.env.SVC_TEST_DATABASE_URL!;
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  await admin.raw(`create schema ${schema}`);
  await admin.destroy();
  t.teardown(() =>
    cleanup(t, async () => {
      const dropper = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
      await dropper.raw(`drop schema if exists ${schema} cascade`);
      await dropper.destroy();
      rmSync(home, { recursive: true, force: true });
    }),
  );
  const separator = base.includes('?') ? '&' : '?';
  return { url: `${base}${separator}schema=${schema}`, home };
}

/**
 * A new, empty PostgreSQL database on the test server, as a new machine's server would hold: where a restore
 * is pointed. Its URL, with `schema` set when given (pg_restore recreates the schema it dumped); dropped when
 * the test ends, with any connection still open to it.
 */
export async function emptyPostgresDatabase(t: Test, prefix: string, schema: string | null): Promise<string> {
  const base = process.env.SVC_TEST_DATABASE_URL!;
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = () => knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  const creator = admin();
  await creator.raw(`create database ${name}`);
  await creator.destroy();
  t.teardown(async () => {
    const dropper = admin();
    await dropper.raw(`drop database if exists ${name} with (force)`);
    await dropper.destroy();
  });
  const url = new URL(base);
  url.pathname = `/${name}`;
  if (schema) url.searchParams.set('schema', schema);
  return url.toString();
}

async function cleanup(t: Test, remove: () => unknown): Promise<void> {
  if (process.env.SVC_KEEP_FAILED_DB === '1' && !t.passing()) return;
  await remove();
}

export interface TestApp {
  engine: EngineName;
  url: string;
  config: Readonly<Config>;
  clock: ManualClock;
  services: AppServices;
  db: Database;
  server: ApiServer;
  /** The simulated consent bank this app serves (`consentBank` option), else null. */
  /** The Chilean simulated bank, with the Brazilian one beside it (`brasil`). */
  consentBank: (ConsentBank & { brasil: BrasilBank | null; pagesUrl: string }) | null;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as is, for malformed bodies. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

export type ConfigOverrides = Parameters<typeof loadConfig>[0] extends infer O
  ? O extends { overrides?: infer V }
    ? V
    : never
  : never;

const RAISED_STARTS = { perMinute: 1_000_000, burst: 100_000 };

export function testConfig(database: TestDatabase, overrides: ConfigOverrides = {}): Readonly<Config> {
  return loadConfig({
    home: database.home,
    env: {},
    overrides: {
      ...overrides,
      // The suite's receivers listen on loopback, which webhooks may reach only when the operator allows it;
      // the tests of that policy turn this off.
      webhooks: { allowPrivateAddressesInTestMode: true, ...(overrides?.webhooks ?? {}) },
      // The suite's syncs call the simulated consent bank far more often than a bank allows (a sync is a
      // dozen calls) at a clock that does not move (its arrival margin would last forever): the tests of the
      // banks' limits set them (bank-budget.test.ts).
      // Likewise the widgets' consent starts, per organisation, key and session (the tests of the bounds set
      // them: widget-consent-budget.test.ts, widget-consent-start-bounds.test.ts).
      widget: {
        consentStarts: RAISED_STARTS,
        consentStartsPerKey: RAISED_STARTS,
        consentStartsPerSession: RAISED_STARTS,
        ...(overrides?.widget ?? {}),
      },
      banks: {
        ...(overrides?.banks ?? {}),
        budget: {
          perSecond: 1_000_000,
          perMinute: 1_000_000,
          arrivalMarginMs: 0,
          ...(overrides?.banks?.budget ?? {}),
        },
      },
      databaseUrl: database.url,
      log: { level: 'silent' },
      metrics: { port: 0 },
      api: { port: 0, ...(overrides?.api ?? {}) },
    },
  });
}

/** A migrated database, its services and a real HTTP server on an ephemeral port, all torn down after. */
export async function startTestApp(
  t: Test,
  engine: EngineName,
  options: {
    config?: ConfigOverrides;
    database?: TestDatabase;
    clock?: ManualClock;
    extraRoutes?: AnyRoute[];
    connectors?: ConnectorResolver;
    /** Instead of a silent one: to read what the app logs. */
    logger?: Logger;
    /**
     * Serve the simulated consent bank as the API process does (the suite's test CA written into the data
     * directory, the appliance registered with it), on a free port unless one is given. Off by default: it
     * costs a listener and a registration. The clock then starts at the real time (the CA's certificates are
     * made now) unless the test gives one.
     */
    consentBank?:
      | boolean
      | {
          port?: number;
          pagesPort?: number;
          brasil?: Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'>;
          /** The banks' customers, when not the credential sandbox's. */
          data?: CustomerData;
        };
  } = {},
): Promise<TestApp> {
  const database = options.database ?? (await freshDatabase(t, engine));
  const config = testConfig(database, options.config);
  const db = openDatabase({ url: config.databaseUrl });
  await migrateUp(db);
  const clock = options.clock ?? new ManualClock(options.consentBank ? Date.now() : TEST_EPOCH);
  const services = buildServices(config, 'api', {
    db,
    clock,
    logger: options.logger ?? silentLogger,
    secrets: new SecretBox({ id: 'mk_test', key: randomBytes(32) }),
    connectors: options.connectors,
  });
  const listener = await listenForApi({ ...config.api, host: '127.0.0.1' });
  const server = await startApiServer(services, listener, options.extraRoutes);
  let bank: (ConsentBank & { brasil: BrasilBank | null; pagesUrl: string }) | null = null;
  if (options.consentBank) {
    const { testCa } = await import('./consent-bank.js');
    writeTestCa(testCaDirectory(config.home), await testCa());
    bank = await serveAndRegister({
      ...services,
      config,
      publicBaseUrl: listener.url,
      port: options.consentBank === true ? 0 : (options.consentBank.port ?? 0),
      ...(options.consentBank !== true && options.consentBank.pagesPort !== undefined
        ? { pagesPort: options.consentBank.pagesPort }
        : {}),
      ...(options.consentBank !== true && options.consentBank.brasil
        ? { brasil: options.consentBank.brasil }
        : {}),
      ...(options.consentBank !== true && options.consentBank.data ? { data: options.consentBank.data } : {}),
    });
  }
  t.teardown(async () => {
    await server.close(1000);
    await bank?.close();
    await services.consentClients.close();
    await db.close();
  });
  return {
    engine,
    url: server.url,
    config,
    clock,
    services,
    db,
    server,
    consentBank: bank,
    request: (method, path, opts) => request(server.url, method, path, opts),
  };
}

export async function request(
  baseUrl: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(baseUrl + path, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (text && method !== 'HEAD') {
    const violation = contractViolation(method, path, response.status, parsed);
    if (violation) throw new Error(`OpenAPI contract: ${violation}`);
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

export interface TestTenant {
  orgId: string;
  keys: Record<`${'sk' | 'pk'}_${Mode}`, { id: string; secret: string }>;
}

/** An organisation with one secret and one publishable key in each mode. */
export async function createTenant(
  app: Pick<TestApp, 'db' | 'clock' | 'config'>,
  options: { rateLimits?: RateLimitOverrides } = {},
): Promise<TestTenant> {
  return app.db.transaction(async (trx) => {
    const now = app.clock.now();
    const org = await createOrganisation(trx, `Tenant ${randomBytes(3).toString('hex')}`, 'test', now);
    const keys = {} as TestTenant['keys'];
    for (const mode of ['test', 'live'] as Mode[]) {
      for (const type of ['secret', 'publishable'] as KeyType[]) {
        const issued = await createApiKey(trx, {
          brand: app.config.brand,
          orgId: org.id,
          mode,
          type,
          actor: 'test',
          now,
          rateLimits: options.rateLimits,
        });
        keys[`${type === 'secret' ? 'sk' : 'pk'}_${mode}`] = { id: issued.key.id, secret: issued.secret };
      }
    }
    return { orgId: org.id, keys };
  });
}

const TABLES = [
  'organisations',
  'api_keys',
  'links',
  'accounts',
  'movements',
  'refresh_intents',
  'widget_tokens',
  'exchange_tokens',
  'webhook_endpoints',
  'events',
  'webhook_deliveries',
  'jobs',
  'consent_clients',
  'link_grants',
  'grant_revocations',
  'idempotency_keys',
  'audit_log',
  'console_users',
  'console_tokens',
];

/** Row counts of every resource table: a rejected request must leave them as they were. */
export async function tableCounts(db: Database): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const [row] = await db.knex(table).count({ n: '*' });
    counts[table] = Number((row as { n: number | string }).n);
  }
  return counts;
}

/** Every attempt the deliveries keep (`attempt_history`), each with its delivery's id. */
export async function storedAttempts(db: Database): Promise<(StoredAttempt & { delivery_id: string })[]> {
  const rows: { id: string; attempt_history: string }[] = await db
    .knex('webhook_deliveries')
    .whereNotNull('attempt_history')
    .select('id', 'attempt_history');
  return rows.flatMap((row) =>
    (JSON.parse(row.attempt_history) as StoredAttempt[]).map((attempt) => ({
      delivery_id: row.id,
      ...attempt,
    })),
  );
}

/** Runs every due sync job now, as the scheduler's workers would. */
export async function runSyncs(app: Pick<TestApp, 'services'>): Promise<number> {
  const { drainSyncJobs } = await import('../../src/sync/worker-pool.js');
  return drainSyncJobs(app.services);
}

/** One scheduler tick at the app's clock (due links get a job), then the syncs it queued. */
export async function schedulerTick(app: Pick<TestApp, 'services' | 'clock' | 'config'>): Promise<number> {
  const { enqueueDueLinks } = await import('../../src/scheduler/enqueue-due.js');
  const queued = await enqueueDueLinks(
    app.services.db,
    app.clock.now(),
    app.config.scheduler.syncIntervalMinutes * 60_000,
  );
  await runSyncs(app);
  return queued;
}

export const CONSENT = { consent_version: '2026-01', consent_text_hash: 'a'.repeat(64) };

/** A test-mode link body for the sandbox; `password` picks the scenario. */
export function linkBody(overrides: Record<string, unknown> = {}, password = 'sandbox') {
  return {
    bank_id: 'bancochile',
    holder_type: 'individual',
    credentials: { rut: '11.111.111-1', password },
    ...CONSENT,
    ...overrides,
  };
}

export async function eventTypes(app: Pick<TestApp, 'db'>, linkId: string): Promise<string[]> {
  const rows: { type: string }[] = await app.db
    .knex('events')
    .where({ link_id: linkId })
    .orderBy('seq')
    .orderBy('id')
    .select('type');
  return rows.map((row) => row.type);
}

/** The real sandbox behind a spy that counts calls by method: "no call to the bank" becomes checkable. */
export function spiedSandbox(): {
  connectors: ConnectorResolver;
  calls: Record<string, number>;
  reset(): void;
} {
  const sandbox = createSandboxConnector();
  const calls: Record<string, number> = {};
  const spy = new Proxy(sandbox, {
    get(target, name: string) {
      const value = (target as unknown as Record<string, unknown>)[name];
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls[name] = (calls[name] ?? 0) + 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as Connector;
  return {
    connectors: (_bank, mode) => (mode === 'test' ? spy : null),
    calls,
    reset: () => {
      for (const key of Object.keys(calls)) delete calls[key];
    },
  };
}

/** A console user's budget of changes high enough for a test that makes many (console-ceilings tests the default). */
export const RAISED_CONSOLE_ACTIONS = { console: { actions: { perMinute: 1_000_000, burst: 100_000 } } };

/**
 * Limits high enough to keep rate limiting out of a test's way; tests of the limits themselves use a fresh
 * tenant with the defaults.
 */
export const RAISED_LIMITS = {
  read: { perMinute: 1_000_000, burst: 100_000 },
  sync_write: { perMinute: 1_000_000, burst: 100_000 },
  widget_tokens: { perMinute: 1_000_000, burst: 100_000 },
  resource_write: { perMinute: 1_000_000, burst: 100_000 },
  webhook_deliveries: { perMinute: 1_000_000, burst: 100_000 },
};

/**
 * What most API tests start from: the app on `engine` and a tenant whose rate limits the test does not
 * reach, with its secret test key.
 */
export async function appWithTenant(
  t: Test,
  engine: EngineName,
  options: Parameters<typeof startTestApp>[2] = {},
): Promise<{ app: TestApp; tenant: TestTenant; sk: string }> {
  const app = await startTestApp(t, engine, options);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  return { app, tenant, sk: tenant.keys.sk_test.secret };
}

/** appWithTenant, and another tenant like the first, whose data the first must never see (nor it the first's). */
export async function appWithTenants(
  t: Test,
  engine: EngineName,
  options: Parameters<typeof startTestApp>[2] = {},
): Promise<{ app: TestApp; tenant: TestTenant; other: TestTenant; sk: string }> {
  const { app, tenant, sk } = await appWithTenant(t, engine, options);
  const other = await createTenant(app, { rateLimits: RAISED_LIMITS });
  return { app, tenant, other, sk };
}

/** Every table's rows as JSON text, read as an operator with a SQL client would. */
export async function dumpTables(db: Database): Promise<Record<string, string>> {
  const names: { name: string }[] =
    db.engine === 'sqlite'
      ? await db
          .knex('sqlite_master')
          .where({ type: 'table' })
          .whereNot('name', 'like', 'sqlite_%')
          .select('name')
      : (
          await db.knex.raw(
            'select table_name as name from information_schema.tables where table_schema = current_schema()',
          )
        ).rows;
  const dump: Record<string, string> = {};
  for (const { name } of names) dump[name] = JSON.stringify(await db.knex(name).select('*'));
  return dump;
}
