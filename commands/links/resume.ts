import type { Knex } from 'knex';
import type { Principal } from '../../src/auth/principal.js';
import type { ConsentView } from '../../src/links/consent/consent-life.js';
import { LinkActionCommand } from '../../src/cli/link-action-command.js';

export default class LinksResume extends LinkActionCommand {
  static override summary = "Resume a link's automatic sync at the next scheduler tick";
  static override examples = ['<%= config.bin %> links resume link_0123456789abcdef'];
  static override args = LinkActionCommand.args;

  protected async apply(trx: Knex, principal: Principal, linkId: string, view: ConsentView) {
    const { resumeLink } = await import('../../src/links/links.js');
    return resumeLink(trx, principal, linkId, view);
  }

  protected done(linkId: string): string {
    return `${linkId} resumed: it syncs at the next scheduler tick.`;
  }
}
