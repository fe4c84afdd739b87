import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';

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
    const { migrationStatus, schemaMismatch } = await import('../src/db/migrations.js');
    const problem = await this.withDatabase(config, async (db) => schemaMismatch(await migrationStatus(db)));
    if (problem) this.error(problem, { exit: 78 });

    const { Supervisor } = await import('../src/processes/supervisor.js');
    const { createLogger, flushLogger } = await import('../src/logging/logger.js');
    const env: Record<string, string | undefined> = { ...process.env };
    if (flags.host) env.SVC_API_HOST = flags.host;
    if (flags.port !== undefined) env.SVC_API_PORT = String(flags.port);
    const logger = createLogger({ level: config.log.level, name: 'supervisor', file: config.log.file });
    logger.info(
      {
        roles,
        api: `${config.api.host}:${config.api.port}`,
        database: config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres',
      },
      'starting',
    );
    const supervisor = new Supervisor(config, roles, env, logger);
    const code = await supervisor.run();
    await flushLogger(logger);
    if (code !== 0) this.error(supervisor.failureReason ?? 'a child process failed', { exit: code });
  }
}
