import { Args } from '@oclif/core';
import type { Knex } from 'knex';
import type { Principal } from '../auth/principal.js';
import { BaseCommand } from './base-command.js';

/**
 * An operator's action on one link (`svc links pause|resume|delete LINK_ID`): acts with the link's own
 * organisation and mode, and writes the audit log in the same transaction.
 */
export abstract class LinkActionCommand extends BaseCommand {
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };
  // (oclif reads `args` from each command class itself, so subclasses repeat `static args = LinkActionCommand.args`.)

  protected abstract readonly action: 'pause' | 'resume' | 'delete';
  protected abstract apply(trx: Knex, principal: Principal, linkId: string, now: number): Promise<unknown>;
  protected abstract done(linkId: string): string;

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(this.constructor as typeof LinkActionCommand);
    const config = this.appConfig(flags.home);
    const { operatorPrincipal } = await import('../links/inspect.js');
    const { recordAudit } = await import('../audit/audit-log.js');
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        const principal = await operatorPrincipal(trx, args.linkId);
        const outcome = await this.apply(trx, principal, args.linkId, now);
        await recordAudit(
          trx,
          {
            orgId: principal.orgId,
            actor: this.actor(),
            action: `link.${this.action}`,
            targetType: 'link',
            targetId: args.linkId,
          },
          now,
        );
        return outcome;
      }),
    );
    this.log(this.done(args.linkId));
    return result;
  }
}
