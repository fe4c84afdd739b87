import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class OrgsCreate extends BaseCommand {
  static override summary =
    'Create an organisation (a tenant that owns API keys and everything made with them)';
  static override examples = ['<%= config.bin %> orgs create "Acme Lending"'];
  static override args = { name: Args.string({ required: true, description: 'display name' }) };

  async run() {
    const { args, flags } = await this.parse(OrgsCreate);
    const config = this.appConfig(flags.home);
    const { createOrganisation } = await import('../../src/orgs/orgs.js');
    const org = await this.withDatabase(config, (db) =>
      db.transaction((trx) => createOrganisation(trx, args.name, this.actor(), this.clock(config).now())),
    );
    this.log(
      `Created ${org.id} (${org.name}). Issue its keys with: svc keys create --org ${org.id} --mode test --type secret`,
    );
    return org;
  }
}
