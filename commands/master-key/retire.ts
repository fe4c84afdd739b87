import { BaseCommand } from '../../src/cli/base-command.js';
import type { RetireReport } from '../../src/secrets/rotate.js';

export default class MasterKeyRetire extends BaseCommand {
  static override summary = 'Remove the older master keys from the key file, once no stored value needs them';
  static override examples = [
    '<%= config.bin %> master-key retire',
    '<%= config.bin %> master-key retire --json',
  ];

  async run(): Promise<RetireReport> {
    const { flags } = await this.parse(MasterKeyRetire);
    const config = this.appConfig(flags.home);
    const clock = this.clock(config);
    const { retireOldKeys } = await import('../../src/secrets/rotate.js');
    const report = await this.withDatabase(config, (db) =>
      retireOldKeys(db, config, { actor: this.actor(), now: () => clock.now() }),
    );
    this.log(
      report.retired.length > 0
        ? `Retired ${report.retired.join(', ')}; ${config.masterKeyFile} now holds ${report.key_id} only.`
        : `${config.masterKeyFile} holds ${report.key_id} only; nothing to retire.`,
    );
    for (const value of report.unreadable)
      this.log(`Unreadable: ${value.table}.${value.column} of ${value.id} (${value.reason}).`);
    return report;
  }
}
