import type { Knex } from 'knex';
import type { Principal } from '../../src/auth/principal.js';
import type { ConsentView } from '../../src/links/consent/consent-life.js';
import { LinkActionCommand } from '../../src/cli/link-action-command.js';

export default class LinksPause extends LinkActionCommand {
  static override summary = "Stop a link's automatic sync (on-demand refreshes keep working)";
  static override examples = ['<%= config.bin %> links pause link_0123456789abcdef'];
  static override args = LinkActionCommand.args;

  protected async apply(trx: Knex, principal: Principal, linkId: string, view: ConsentView) {
    const { pauseLink } = await import('../../src/links/links.js');
    return pauseLink(trx, principal, linkId, view);
  }

  protected done(linkId: string): string {
    return `${linkId} paused: the scheduler skips it until it is resumed.`;
  }
}
