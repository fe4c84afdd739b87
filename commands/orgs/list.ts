import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';

export default class OrgsList extends BaseCommand {
  static override summary = 'List organisations';
  static override examples = ['<%= config.bin %> orgs list', '<%= config.bin %> orgs list --json'];

  async run() {
    const { flags } = await this.parse(OrgsList);
    const config = this.appConfig(flags.home);
    const { listOrganisations } = await import('../../src/orgs/orgs.js');
    const orgs = await this.withDatabase(config, (db) => listOrganisations(db.reader));
    if (this.jsonEnabled()) return orgs;
    if (orgs.length === 0) {
      this.log('No organisations. Run `svc install` or `svc orgs create NAME`.');
      return orgs;
    }
    const rows = orgs.map((org) => [org.id, org.created_at, org.name]);
    for (const line of formatTable(['ID', 'CREATED', 'NAME'], rows)) this.log(line);
    return orgs;
  }
}
