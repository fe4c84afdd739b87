import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import type { ApplianceStatus } from '../src/processes/status.js';

export default class Status extends BaseCommand {
  static override summary = 'Show the supervised processes, the database and the queues';
  static override description =
    'Exits non-zero with one line when there is no installation or the database does not answer; `svc doctor` then says what to fix.';
  static override examples = [
    '<%= config.bin %> status',
    '<%= config.bin %> status --json',
    '<%= config.bin %> status --watch',
  ];
  static override flags = {
    watch: Flags.boolean({ description: 'refresh every two seconds until Ctrl-C' }),
  };

  async run(): Promise<ApplianceStatus> {
    const { flags } = await this.parse(Status);
    const config = this.appConfig(flags.home);
    const { collectStatus } = await import('../src/processes/status.js');
    const { notInstalled } = await import('../src/errors/cli-error.js');
    const { emptyDatabaseProblem } = await import('../src/install/installation.js');
    return this.withDatabase(config, async (db) => {
      const status = await collectStatus(config, db);
      if (status.database.reachable && status.database.schema_version === null)
        throw notInstalled(emptyDatabaseProblem(db.describe()));
      if (this.jsonEnabled()) return status;
      const { renderStatus } = await import('../src/cli/views/status-view.js');
      await renderStatus(status, flags.watch ? () => collectStatus(config, db) : null);
      return status;
    });
  }
}
