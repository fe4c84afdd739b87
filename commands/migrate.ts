import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { buildLabel } from '../src/processes/build-info.js';
import { formatTable } from '../src/cli/views/table.js';

export default class Migrate extends BaseCommand {
  static override summary =
    'Apply pending database migrations (or show their status, or roll back the last batch)';
  static override examples = [
    '<%= config.bin %> migrate',
    '<%= config.bin %> migrate --status',
    '<%= config.bin %> migrate --rollback',
  ];
  static override flags = {
    status: Flags.boolean({
      description: 'show applied and pending migrations; change nothing',
      exclusive: ['rollback'],
    }),
    rollback: Flags.boolean({ description: 'revert the last batch of migrations' }),
  };

  async run() {
    const { flags } = await this.parse(Migrate);
    const config = this.appConfig(flags.home);
    const { migrateRollback, migrateUp, migrationStatus } = await import('../src/db/migrations.js');
    const { currentBuild, refuseUnderRunningServers } = await import('../src/processes/presence.js');
    return this.withDatabase(config, async (db) => {
      if (flags.status) {
        const status = await migrationStatus(db);
        this.log(`Database  ${db.describe()}`);
        this.log(`Version   ${status.version ?? '(empty)'}`);
        if (this.jsonEnabled()) return status;
        const rows = [
          ...status.applied.map((name) => ['applied', name]),
          ...status.pending.map((name) => ['pending', `${name} (${status.kinds[name]})`]),
          ...status.unknown.map((name) => [
            'unknown',
            `${name} (newer than this svc; ${status.kinds[name]})`,
          ]),
        ];
        if (rows.length > 0) for (const line of formatTable(['STATE', 'MIGRATION'], rows)) this.log(line);
        return status;
      }
      // Not under a running svc serve of another build (of any build, for a rollback): the README's upgrade.
      const build = await currentBuild(buildLabel());
      if (flags.rollback) {
        const guard = refuseUnderRunningServers(db, build, config.home, 'svc migrate --rollback');
        const reverted = await migrateRollback(db, { guard });
        this.log(reverted.length ? `Rolled back ${reverted.join(', ')}` : 'Nothing to roll back.');
        return { reverted };
      }
      const applied = await migrateUp(db, {
        guard: refuseUnderRunningServers(db, build, config.home, 'svc migrate'),
      });
      this.log(applied.length ? `Applied ${applied.join(', ')}` : 'Already up to date.');
      return { applied };
    });
  }
}
