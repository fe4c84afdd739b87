import { Args } from '@oclif/core';
import type { Knex } from 'knex';
import type { Principal } from '../auth/principal.js';
import type { ConsentView } from '../links/consent/consent-life.js';
import { BaseCommand } from './base-command.js';

/**
 * An operator's action on one link (`svc links pause|resume|delete LINK_ID`): acts as the link's owner (its
 * organisation, in its mode) and as the CLI's user, whom the service writes in the audit log.
 */
export abstract class LinkActionCommand extends BaseCommand {
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };
  // (oclif reads `args` from each command class itself, so subclasses repeat `static args = LinkActionCommand.args`.)

  /** `view`: the time now, and how a consent link's consent is read (the result shows it as the API does). */
  protected abstract apply(
    trx: Knex,
    principal: Principal,
    linkId: string,
    view: ConsentView,
  ): Promise<unknown>;
  protected abstract done(linkId: string): string;

  async run(): Promise<unknown> {
    const { args, flags } = await this.parse(this.constructor as typeof LinkActionCommand);
    const config = this.appConfig(flags.home);
    const { linkOwner } = await import('../inspect/inspect.js');
    const view = {
      now: this.clock(config).now(),
      warningDays: config.links.consentExpiryWarningDays,
    };
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) =>
        this.apply(trx, await linkOwner(trx, args.linkId, this.actor()), args.linkId, view),
      ),
    );
    this.log(this.done(args.linkId));
    return result;
  }
}
