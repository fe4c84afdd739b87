import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class LinksResume extends BaseCommand {
  static override summary = "Resume a link's automatic sync at the next scheduler tick";
  static override examples = ['<%= config.bin %> links resume link_0123456789abcdef'];
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };

  async run() {
    const { args, flags } = await this.parse(LinksResume);
    const config = this.appConfig(flags.home);
    const { resumeLink } = await import('../../src/links/links.js');
    const { operatorPrincipal } = await import('../../src/links/inspect.js');
    const { recordAudit } = await import('../../src/audit/audit-log.js');
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        const principal = await operatorPrincipal(trx, args.linkId);
        const outcome = await resumeLink(trx, principal, args.linkId, now);
        await recordAudit(
          trx,
          {
            orgId: principal.orgId,
            actor: this.actor(),
            action: 'link.resume',
            targetType: 'link',
            targetId: args.linkId,
          },
          now,
        );
        return outcome;
      }),
    );
    this.log(`${args.linkId} resumed: it syncs at the next scheduler tick.`);
    return result;
  }
}
