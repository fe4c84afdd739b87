import type { Config } from '../config/defaults.js';
import { flushLogger } from '../logging/logger.js';

export const ROLE_NAMES = ['api', 'scheduler', 'dispatcher'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/**
 * A process role: runs until `signal` aborts, then drains its work and resolves. Each role imports what only
 * it needs inside `run`, so a restarted child is back sooner (the API's Koa stack and route schemas alone
 * took 130 ms of a dispatcher's 450 ms start).
 */
export interface Role {
  name: RoleName;
  run(config: Readonly<Config>, signal: AbortSignal, ready: () => void): Promise<void>;
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) =>
    signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

async function openServices(config: Readonly<Config>, role: RoleName) {
  const { buildServices } = await import('./services.js');
  const { migrationStatus, schemaMismatch } = await import('../db/migrations.js');
  const services = buildServices(config, role);
  const problem = schemaMismatch(await migrationStatus(services.db));
  if (problem) {
    await services.db.close();
    throw new SchemaMismatchError(problem);
  }
  return services;
}

export class SchemaMismatchError extends Error {
  override name = 'SchemaMismatchError';
}

const api: Role = {
  name: 'api',
  async run(config, signal, ready) {
    const { listenForApi } = await import('../http/listener.js');
    const listener = await listenForApi(config.api);
    const services = await openServices(config, 'api');
    const { startApiServer } = await import('../http/server.js');
    const { startMetricsServer } = await import('../metrics/metrics.js');
    // The simulated consent bank (below) serves its pages on an origin of its own, never this one.
    const server = await startApiServer(services, listener, []);
    const metricsAddress = `${config.metrics.host}:${config.metrics.port}`;
    // Metrics are an aid, the API is the product: a taken metrics port turns metrics off, with the reason,
    // rather than crash-looping the API until `svc serve` gives up.
    const metrics =
      config.metrics.port > 0
        ? await startMetricsServer(services.metrics, config.metrics.host, config.metrics.port).catch(
            (error: NodeJS.ErrnoException) => {
              services.logger.warn(
                { metrics: metricsAddress, err: error },
                `metrics off: cannot listen on ${metricsAddress} (${error.code ?? error.message}); set metrics.port (SVC_METRICS_PORT) to a free port, or 0`,
              );
              return null;
            },
          )
        : null;
    services.logger.info(
      {
        url: server.url,
        metrics: metrics ? metricsAddress : 'off',
      },
      'api listening',
    );
    ready();
    // After `ready`: loading and starting the bank takes about a second (its modules 0.7 s), which a
    // restarted API need not wait for. It logs `consent bank started` with its addresses, or why it is off.
    const consentBank = config.sandbox.consentBank.enabled
      ? import('../test-mode/serve-consent-banks.js')
          .then(({ bankPublicBase, serveAndRegister }) =>
            serveAndRegister({ ...services, config, publicBaseUrl: bankPublicBase(config, listener.url) }),
          )
          .catch((error: Error) => {
            services.logger.error({ err: error.message }, 'simulated consent bank off: it failed to load');
            return null;
          })
      : Promise.resolve(null);
    await waitForAbort(signal);
    services.logger.info('api draining in-flight requests');
    await server.close(config.supervisor.shutdownTimeoutSeconds * 1000);
    await new Promise((resolve) => (metrics ? metrics.close(resolve) : resolve(undefined)));
    await (await consentBank)?.close();
    await services.consentClients.close();
    await services.db.close();
    services.logger.info('api stopped');
    await flushLogger(services.logger);
  },
};

const scheduler: Role = {
  name: 'scheduler',
  async run(config, signal, ready) {
    const services = await openServices(config, 'scheduler');
    const { Cron } = await import('croner');
    const { enqueueDueLinks } = await import('../scheduler/enqueue-due.js');
    const { runHousekeeping } = await import('../scheduler/housekeeping.js');
    const { revokeDueGrants } = await import('../links/consent/revocations.js');
    const { runConsentExpiry } = await import('../scheduler/consent-expiry.js');
    const { runSyncWorkers } = await import('../sync/worker-pool.js');
    const { CapacityWarnings, capacitySettingsOf } = await import('../banks/budget/capacity.js');
    const { stretchIntervals } = await import('../scheduler/stretch.js');
    const capacityWarnings = new CapacityWarnings();
    let running: Promise<void> = Promise.resolve();
    const intervalMs = config.scheduler.syncIntervalMinutes * 60_000;
    const tick = () => {
      running = (async () => {
        // A bank whose links need more calls than its budget allows: every link's interval stretched alike.
        const stretched = await stretchIntervals(
          services.db,
          capacitySettingsOf(config),
          periodMs,
          services.clock.now(),
        );
        const queued = await enqueueDueLinks(
          services.db,
          services.clock.now(),
          intervalMs,
          periodMs,
          undefined,
          stretched,
        );
        if (queued > 0) services.logger.info({ queued }, 'due links queued');
        await runHousekeeping(services, periodMs);
        await runConsentExpiry(services, periodMs);
        await revokeDueGrants(services);
        await capacityWarnings.check(
          services.db.reader,
          capacitySettingsOf(config),
          services.logger,
          services.clock.now(),
        );
      })().catch((error: Error) => services.logger.error({ err: error }, 'scheduler tick failed'));
    };
    const cron = new Cron(config.scheduler.cron, { protect: true }, tick);
    const [first, second] = cron.nextRuns(2);
    const periodMs = first && second ? second.getTime() - first.getTime() : 60_000;
    services.logger.info(
      {
        cron: config.scheduler.cron,
        next: cron.nextRun()?.toISOString(),
        wake_on_commit: config.scheduler.wakeOnCommit,
      },
      'scheduler started',
    );
    ready();
    tick();
    const workers = runSyncWorkers(services, signal);
    await waitForAbort(signal);
    cron.stop();
    await Promise.all([running, workers]);
    await services.consentClients.close();
    await services.db.close();
    services.logger.info('scheduler stopped');
    await flushLogger(services.logger);
  },
};

const dispatcher: Role = {
  name: 'dispatcher',
  async run(config, signal, ready) {
    const services = await openServices(config, 'dispatcher');
    const { Dispatcher } = await import('../webhooks/dispatch/dispatcher.js');
    const dispatcher = new Dispatcher(services);
    const settings = config.dispatcher;
    services.logger.info(
      {
        poll_ms: settings.pollIntervalMs,
        concurrency: settings.concurrency,
        per_endpoint: settings.perEndpointConcurrency,
        schedule_s: settings.retryScheduleSeconds,
        wake_on_commit: settings.wakeOnCommit,
      },
      'dispatcher started',
    );
    ready();
    await dispatcher.run(signal);
    await services.consentClients.close();
    await services.db.close();
    services.logger.info('dispatcher stopped');
    await flushLogger(services.logger);
  },
};

export const ROLES: Record<RoleName, Role> = { api, scheduler, dispatcher };

export function parseRoles(text: string): RoleName[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(ROLE_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0) {
    throw new Error(`--roles takes a comma-separated list of ${ROLE_NAMES.join(', ')}; got "${text}".`);
  }
  return [...new Set(names)] as RoleName[];
}
