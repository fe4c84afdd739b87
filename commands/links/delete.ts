import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class LinksDelete extends BaseCommand {
  static override summary = 'Delete a link with its accounts, movements, intents and tokens (irreversible)';
  static override examples = ['<%= config.bin %> links delete link_0123456789abcdef'];
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };

  async run() {
    const { args, flags } = await this.parse(LinksDelete);
    const config = this.appConfig(flags.home);
    const { deleteLink } = await import('../../src/links/links.js');
    const { operatorPrincipal } = await import('../../src/links/inspect.js');
    const { recordAudit } = await import('../../src/audit/audit-log.js');
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        const principal = await operatorPrincipal(trx, args.linkId);
        const outcome = await deleteLink(trx, principal, args.linkId, now);
        await recordAudit(
          trx,
          {
            orgId: principal.orgId,
            actor: this.actor(),
            action: 'link.delete',
            targetType: 'link',
            targetId: args.linkId,
          },
          now,
        );
        return outcome;
      }),
    );
    this.log(`${args.linkId} deleted, with its accounts, movements, refresh intents and tokens.`);
    return result;
  }
}
