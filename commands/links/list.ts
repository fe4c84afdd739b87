import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';

export default class LinksList extends BaseCommand {
  static override summary = 'List links across organisations, newest first';
  static override examples = [
    '<%= config.bin %> links list --status expired',
    '<%= config.bin %> links list --org org_0123456789abcdef --bank bci --json',
  ];
  static override flags = {
    org: Flags.string({ description: 'only this organisation' }),
    mode: Flags.string({ options: ['test', 'live'] }),
    status: Flags.string({ options: ['active', 'expired'] }),
    bank: Flags.string({ description: 'only this bank code' }),
    'external-user': Flags.string({ description: "only this customer's user reference" }),
    paused: Flags.boolean({ description: 'only paused links', allowNo: true }),
    limit: Flags.integer({ default: 50, min: 1, max: 10_000 }),
  };

  async run() {
    const { flags } = await this.parse(LinksList);
    const config = this.appConfig(flags.home);
    const { listLinksForOperator } = await import('../../src/inspect/inspect.js');
    const links = await this.withDatabase(config, (db) =>
      listLinksForOperator(
        db.reader,
        {
          org: flags.org,
          mode: flags.mode,
          status: flags.status,
          bank: flags.bank,
          externalUser: flags['external-user'],
          paused: flags.paused,
          limit: flags.limit,
        },
        { now: this.clock(config).now(), warningDays: config.links.consentExpiryWarningDays },
      ),
    );
    if (this.jsonEnabled()) return links;
    if (links.length === 0) {
      this.logNothingFound('No links match.');
      return links;
    }
    const rows = links.map((link) => [
      link.id,
      link.mode,
      link.bank_id,
      `${link.status}${link.paused ? ',paused' : ''}`,
      link.last_synced_at ?? 'never',
      link.next_sync_at ?? '-',
      link.last_error_code ?? '-',
    ]);
    const headers = ['ID', 'MODE', 'BANK', 'STATUS', 'LAST SYNC', 'NEXT SYNC', 'LAST ERROR'];
    for (const line of formatTable(headers, rows)) this.log(line);
    return links;
  }
}
