import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import type { RotationProgress, RotationReport } from '../../src/secrets/rotate.js';

export default class MasterKeyRotate extends BaseCommand {
  static override summary =
    'Add a new master key and re-seal every stored secret with it; older keys stay until retired';
  static override description =
    'Bank credentials, webhook signing secrets and MFA material are re-encrypted in batches, one transaction each. Running processes pick the new key up from the key file by themselves. Safe to run again: an interrupted rotation is finished rather than started over. API keys are stored as hashes and rotate with `svc keys rotate`.';
  static override examples = [
    '<%= config.bin %> master-key rotate',
    '<%= config.bin %> master-key rotate --retire-old --json',
  ];
  static override flags = {
    'retire-old': Flags.boolean({
      description: 'then remove the older keys from the key file, if no stored value needs them',
    }),
    'batch-size': Flags.integer({ description: 'rows re-sealed per transaction', default: 200, min: 1 }),
  };

  async run(): Promise<RotationReport> {
    const { flags } = await this.parse(MasterKeyRotate);
    const config = this.appConfig(flags.home);
    const clock = this.clock(config);
    const { rotateMasterKey } = await import('../../src/secrets/rotate.js');
    const report = await this.withDatabase(config, (db) =>
      rotateMasterKey(db, config, {
        actor: this.actor(),
        now: () => clock.now(),
        batchSize: flags['batch-size'],
        retireOld: flags['retire-old'],
        onProgress: (progress) => this.showProgress(progress),
      }),
    );
    this.log(
      report.created
        ? `Created master key ${report.key_id}; it seals from now on.`
        : `Finished the interrupted rotation to ${report.key_id}.`,
    );
    this.log(`Re-sealed ${report.resealed_total} value(s):`);
    for (const [column, count] of Object.entries(report.resealed)) this.log(`  ${column}: ${count}`);
    if (report.remaining > 0)
      this.log(`${report.remaining} value(s) are still on an older key; run this command again.`);
    for (const value of report.unreadable)
      this.log(`Unreadable: ${value.table}.${value.column} of ${value.id} (${value.reason}).`);
    if (report.retired.length > 0) this.log(`Retired ${report.retired.join(', ')}.`);
    else if (report.previous_key_ids.length > 0)
      this.log(
        `Older key(s) ${report.previous_key_ids.join(', ')} stay in ${config.masterKeyFile}; remove them with svc master-key retire.`,
      );
    return report;
  }

  private showProgress({ table, done, total }: RotationProgress): void {
    if (process.stderr.isTTY) {
      process.stderr.write(`\rRe-sealing ${table}: ${done}/${total}${done === total ? '\n' : ''}`);
    } else if (done === total) {
      process.stderr.write(`Re-sealing ${table}: ${done}/${total}\n`);
    }
  }
}
