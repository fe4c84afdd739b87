import type { Knex } from 'knex';
import type { Principal } from '../../src/auth/principal.js';
import type { ConsentView } from '../../src/links/consent/consent-life.js';
import { LinkActionCommand } from '../../src/cli/link-action-command.js';

export default class LinksDelete extends LinkActionCommand {
  static override summary = 'Delete a link with its accounts, movements, intents and tokens (irreversible)';
  static override examples = ['<%= config.bin %> links delete link_0123456789abcdef'];
  static override args = LinkActionCommand.args;

  protected async apply(trx: Knex, principal: Principal, linkId: string, { now }: ConsentView) {
    const { deleteLink } = await import('../../src/links/links.js');
    return deleteLink(trx, principal, linkId, now);
  }

  protected done(linkId: string): string {
    return `${linkId} deleted, with its accounts, movements, refresh intents and tokens.`;
  }
}
