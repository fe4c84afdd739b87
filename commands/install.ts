import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { buildLabel } from '../src/processes/build-info.js';
import { resolveHome } from '../src/config/load-config.js';
import type { InstallResult } from '../src/install/install.js';

export default class Install extends BaseCommand {
  static override summary =
    'Create the data directory, config, master key and database, and issue the first test keys';
  static override description =
    'Safe to run again: it creates only what is missing, never overwrites a master key or database, and prints keys only on the run that created them.';
  static override examples = [
    '<%= config.bin %> install',
    '<%= config.bin %> install --database-url postgres://svc@db.internal/svc --brand acme',
  ];
  static override flags = {
    'database-url': Flags.string({
      description: 'postgres://… to use Postgres instead of the embedded SQLite file',
    }),
    brand: Flags.string({ description: 'prefix of API keys and of the signature header (default svc)' }),
    'new-keys': Flags.boolean({
      description:
        'on an existing installation, issue a new pair of test keys for its first organisation (a first install issues them anyway)',
      default: false,
    }),
  };

  async run(): Promise<InstallResult> {
    const { flags } = await this.parse(Install);
    const { install } = await import('../src/install/install.js');
    const { systemClock } = await import('../src/clock/clock.js');
    const result = await install({
      home: resolveHome(flags.home, process.env),
      env: process.env,
      databaseUrl: flags['database-url'],
      brand: flags.brand,
      clock: systemClock,
      actor: this.actor(),
      version: buildLabel(),
      newKeys: flags['new-keys'],
    });
    this.log(`Data directory  ${result.home}`);
    this.log(`Config          ${result.configFile}`);
    this.log(
      `Master key      ${result.masterKeyFile}${result.createdMasterKey ? ' (created, mode 0600: back it up)' : ''}`,
    );
    this.log(`Database        ${result.database}`);
    this.log(
      `Migrations      ${result.migrationsApplied.length ? `applied ${result.migrationsApplied.join(', ')}` : 'up to date'}`,
    );
    if (result.organisation && result.keys) {
      this.log(`\nOrganisation    ${result.organisation.id} (${result.organisation.name})`);
      this.log('\nThese keys are shown once. Store them now; only their hashes are kept.');
      this.log(`  Test secret key       ${result.keys.secret}`);
      this.log(`  Test publishable key  ${result.keys.publishable}`);
      this.log('\nNext: svc serve');
    } else {
      this.log(
        `\nAlready installed: nothing else to do. Its keys were shown once, when it was created. For a new pair of test keys: ${result.newKeysCommand} (or \`svc keys create\` for one key of any kind).`,
      );
    }
    return result;
  }
}
