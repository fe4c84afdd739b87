import { fileURLToPath } from 'node:url';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import type { UpgradeResult } from '../src/upgrade/upgrade.js';

export default class Upgrade extends BaseCommand {
  static override summary =
    'Upgrade this box to the sources pulled into its checkout: check, backup, stop, swap, migrate, start, health';
  static override description =
    "Run it in the checkout svc runs from, after `git pull`, naming the data directory it serves (--home, else SVC_HOME, else ~/.svc). It refuses while a svc serve of another data directory runs from the same checkout (the swap would change the code under it), naming each and the command to use. It builds the new sources beside the running build (<checkout>/.svc-upgrade/next), backs up the home into <home>/backups, stops this home's svc serve (systemctl stop when it runs under systemd), puts the new build in place of dist/ (the previous one kept in .svc-upgrade/previous), migrates with the new build, starts svc serve as it ran (one that ran in a terminal comes back detached: the command and that terminal print how to have it there again), and waits for /health and `svc status` to show the new version. A failure from the swap on stops the new build, puts the previous one back, restores the backup, starts the previous build as it ran and exits 1 naming the step. See docs/upgrade.md.";
  static override examples = [
    'git pull && <%= config.bin %> upgrade',
    '<%= config.bin %> upgrade --dry-run',
    '<%= config.bin %> upgrade --json',
  ];
  static override flags = {
    'dry-run': Flags.boolean({
      description: 'only the check: what would change, and build the new sources (reused by the next run)',
    }),
  };

  async run(): Promise<UpgradeResult> {
    const { flags } = await this.parse(Upgrade);
    const config = this.appConfig(flags.home);
    // Everything the upgrade runs in this process is loaded now, before the swap replaces dist/.
    const { runUpgrade } = await import('../src/upgrade/upgrade.js');
    const { describeVersion } = await import('../src/upgrade/plan.js');
    const { holdUpgradeLock } = await import('../src/upgrade/lock.js');
    const checkout = fileURLToPath(new URL('../..', import.meta.url));
    const clock = this.clock(config);
    const release = holdUpgradeLock(checkout);
    const result = await runUpgrade({
      checkout,
      config,
      dryRun: flags['dry-run'],
      env: process.env,
      now: () => new Date(clock.now()),
      say: (line) => this.log(line),
    }).finally(release);
    if (result.failure) {
      // The exit code is set, not thrown: oclif's exit error reached BaseCommand.catch, which printed a second
      // JSON document (`usage`, "EEXIT: 1") after this one under --json.
      process.exitCode = result.outcome === 'rollback_failed' ? 2 : 1;
      if (!this.jsonEnabled()) process.stderr.write(`Error: ${result.failure.message}\n`);
      return Object.assign(result, {
        error: { code: `upgrade_${result.outcome}`, message: result.failure.message },
      });
    }
    if (result.outcome === 'nothing_to_do') this.log('Nothing to upgrade.');
    if (result.outcome === 'checked' && result.to)
      this.log(
        `Checked: svc upgrade would take this box from ${describeVersion(result.from)} to ${describeVersion(result.to)}.`,
      );
    if (result.outcome === 'upgraded' && result.to) {
      this.log(`\nUpgraded ${result.from.version} → ${result.to.version} in ${Math.round(result.seconds)} s`);
      if (result.backup) this.log(`The backup taken before it: ${result.backup}`);
      if (result.changelog.length > 0) {
        this.log('\nWhat changed (CHANGELOG.md):\n');
        for (const entry of result.changelog) this.log(`${entry.text}\n`);
      }
    }
    for (const note of result.notes) this.log(`\nNote: ${note}`);
    return result;
  }
}
