import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { buildLabel } from '../src/processes/build-info.js';
import { CliError } from '../src/errors/cli-error.js';
import type { Config } from '../src/config/defaults.js';
import { maskUrl } from '../src/db/database-url.js';
import type { RoleName } from '../src/processes/roles.js';

export default class Serve extends BaseCommand {
  static override summary = 'Run the API, scheduler and webhook dispatcher under one supervisor';
  static override description =
    'Restarts a crashed child with backoff and exits non-zero if one crash-loops. SIGTERM drains in-flight work and exits 0; a second SIGTERM stops at once.';
  static override enableJsonFlag = false;
  static override examples = [
    '<%= config.bin %> serve',
    '<%= config.bin %> serve --roles api --port 8081',
    '<%= config.bin %> serve --roles scheduler,dispatcher',
  ];
  static override flags = {
    roles: Flags.string({
      description: 'comma-separated subset of api, scheduler, dispatcher',
      default: 'api,scheduler,dispatcher',
    }),
    host: Flags.string({ description: 'address the API listens on (default from config: 127.0.0.1)' }),
    json: Flags.boolean({
      description: 'log JSON lines even on a terminal (they are JSON whenever stdout is not a terminal)',
      default: false,
    }),
    port: Flags.integer({
      description: 'port the API listens on (default from config: 8080)',
      min: 0,
      max: 65535,
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Serve);
    const { parseRoles } = await import('../src/processes/roles.js');
    const roles = parseRoles(flags.roles);
    const config = this.appConfig(flags.home, { api: { host: flags.host, port: flags.port } });
    if (roles.includes('api') && config.api.port !== 0) {
      const { apiPortProblem } = await import('../src/http/port-check.js');
      const { runningSupervisors } = await import('../src/processes/status.js');
      const taken = await apiPortProblem(config.api.host, config.api.port, runningSupervisors(config.home));
      // 69 (EX_UNAVAILABLE), as for a database that does not answer: what serve needs is taken.
      if (taken) throw new CliError('port_unavailable', taken, 69);
    }
    const { migrationStatus, schemaMismatch } = await import('../src/db/migrations.js');
    const { ServePresence, currentBuild } = await import('../src/processes/presence.js');
    // The migrations this build knows, read once: installing another build under a running server replaces
    // them on disk, and this server's row and heartbeat must go on naming the code it runs.
    const build = await currentBuild(buildLabel());
    const problem = await this.withDatabase(config, async (db) =>
      schemaMismatch(await migrationStatus(db, build.migrations, build.kinds)),
    );
    if (problem) this.error(problem, { exit: 78 });
    // This server's row, so that `svc migrate` of another build refuses while it runs (docs: README, Upgrading).
    const presence = new ServePresence(
      await this.openDatabase(config),
      build,
      roles,
      config.supervisor.heartbeatSeconds,
    );
    await presence.start().catch(async (error: unknown) => {
      await presence.stop().catch(() => undefined);
      throw error;
    });

    const { Supervisor } = await import('../src/processes/supervisor.js');
    const { createLogger, flushLogger } = await import('../src/logging/logger.js');
    const env: Record<string, string | undefined> = { ...process.env };
    if (flags.host) env.SVC_API_HOST = flags.host;
    if (flags.port !== undefined) env.SVC_API_PORT = String(flags.port);
    // Every process of this serve writes the same format: the children share this stdout.
    const { resolveLogFormat } = await import('../src/logging/pretty.js');
    const format = resolveLogFormat(
      flags.json ? 'json' : config.log.format,
      config.log.file !== '',
      process.stdout.isTTY === true,
    );
    env.SVC_LOG_FORMAT = format;
    const logger = createLogger({
      level: config.log.level,
      name: 'supervisor',
      file: config.log.file,
      format,
    });
    logger.info(
      {
        roles,
        api: `${config.api.host}:${config.api.port}`,
        database: config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres',
      },
      'starting',
    );
    // A person at a terminal gets one line saying what runs where; journald and log files keep the JSON.
    const announce =
      process.stdout.isTTY && !flags.json ? () => this.log(runningLine(config, roles)) : () => undefined;
    const supervisor = new Supervisor(config, roles, env, logger, announce, presence);
    let code: number;
    try {
      code = await supervisor.run();
    } finally {
      await presence
        .stop()
        .catch((error: Error) =>
          logger.warn({ err: error }, 'could not remove this server from the database'),
        );
    }
    await flushLogger(logger);
    if (code !== 0) this.error(supervisor.failureReason ?? 'a child process failed', { exit: code });
  }
}

/**
 * What `svc serve` runs, for the person at the terminal, with the database password masked:
 * `svc serve: API on http://127.0.0.1:8080, console http://127.0.0.1:8080/console, simulated consent bank https://127.0.0.1:8443; roles api, scheduler, dispatcher; data /root/.svc; database sqlite /root/.svc/svc.db. Ctrl-C stops it.`
 */
function runningLine(config: Readonly<Config>, roles: readonly RoleName[]): string {
  const database = config.databaseUrl.startsWith('sqlite')
    ? `sqlite ${config.databaseUrl.replace(/^sqlite:(\/\/)?/, '')}`
    : maskUrl(config.databaseUrl);
  const host = config.api.host.includes(':') ? `[${config.api.host}]` : config.api.host;
  const address = `http://${host}:${config.api.port}`;
  const bank = config.sandbox.consentBank;
  const listeners = [
    `API on ${address}`,
    ...(config.console.enabled ? [`console ${address}/console`] : []),
    // Its mTLS face; its pages are under the API's address. A taken port turns it off (the log says so).
    ...(bank.enabled
      ? [`simulated consent bank ${bank.port === 0 ? 'on a free port' : `https://${bank.host}:${bank.port}`}`]
      : []),
  ];
  const what = roles.includes('api') ? listeners.join(', ') : 'no API in this process';
  return `svc serve: ${what}; roles ${roles.join(', ')}; data ${config.home}; database ${database}. Ctrl-C stops it.`;
}
