import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class LinksPause extends BaseCommand {
  static override summary = "Stop a link's automatic sync (on-demand refreshes keep working)";
  static override examples = ['<%= config.bin %> links pause link_0123456789abcdef'];
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };

  async run() {
    const { args, flags } = await this.parse(LinksPause);
    const config = this.appConfig(flags.home);
    const { pauseLink } = await import('../../src/links/links.js');
    const { operatorPrincipal } = await import('../../src/links/inspect.js');
    const { recordAudit } = await import('../../src/audit/audit-log.js');
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        const principal = await operatorPrincipal(trx, args.linkId);
        const outcome = await pauseLink(trx, principal, args.linkId, now);
        await recordAudit(
          trx,
          {
            orgId: principal.orgId,
            actor: this.actor(),
            action: 'link.pause',
            targetType: 'link',
            targetId: args.linkId,
          },
          now,
        );
        return outcome;
      }),
    );
    this.log(`${args.linkId} paused: the scheduler skips it until it is resumed.`);
    return result;
  }
}
