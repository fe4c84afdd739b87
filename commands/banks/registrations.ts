import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';
import type { ConsentClientView } from '../../src/banks/consent/registrations.js';

export default class BanksRegistrations extends BaseCommand {
  static override summary = 'List the consent banks this appliance is registered with (no secret is shown)';
  static override examples = [
    '<%= config.bin %> banks registrations',
    '<%= config.bin %> banks registrations --json',
  ];

  async run(): Promise<(ConsentClientView & { problems: string[] })[]> {
    const { flags } = await this.parse(BanksRegistrations);
    const config = this.appConfig(flags.home);
    const { listRegistrations, viewOf } = await import('../../src/banks/consent/registrations.js');
    const { gapsOfRegistration } = await import('../../src/banks/consent/register.js');
    const { institutionsOf } = await import('../../src/banks/institutions.js');
    // What the bank registered short of what was asked (bound tokens, RAR types, client_credentials).
    const views = (await this.withDatabase(config, (db) => listRegistrations(db.reader))).map((row) => ({
      ...viewOf(row),
      problems: gapsOfRegistration(row, institutionsOf(config)),
    }));
    if (this.jsonEnabled()) return views;
    if (views.length === 0) {
      this.log(
        'No consent bank registrations. Register with: svc banks register BANK --issuer … (docs/open-finance.md).',
      );
      return views;
    }
    const rows = views.map((v) => [
      v.bank_id,
      v.mode,
      v.client_id,
      v.issuer,
      v.api_base,
      new Date(v.registered_at).toISOString(),
      v.certificate_expires_at === null ? 'unreadable' : new Date(v.certificate_expires_at).toISOString(),
    ]);
    for (const line of formatTable(
      ['BANK', 'MODE', 'CLIENT ID', 'ISSUER', 'API BASE', 'REGISTERED', 'CERTIFICATE ENDS'],
      rows,
    ))
      this.log(line);
    for (const view of views)
      for (const problem of view.problems) this.log(`${view.bank_id} (${view.mode}): ${problem}.`);
    return views;
  }
}
