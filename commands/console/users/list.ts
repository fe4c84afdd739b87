import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { formatTable } from '../../../src/cli/views/table.js';

export default class ConsoleUsersList extends BaseCommand {
  static override summary = 'List console users with their role, organisation, status and last sign-in';
  static override examples = [
    '<%= config.bin %> console users list',
    '<%= config.bin %> console users list --json',
  ];
  static override flags = {
    org: Flags.string({ description: 'only this organisation' }),
  };

  async run() {
    const { flags } = await this.parse(ConsoleUsersList);
    const config = this.appConfig(flags.home);
    const { listConsoleUsers, presentConsoleUser } = await import('../../../src/console/users.js');
    const users = (
      await this.withDatabase(config, (db) => listConsoleUsers(db.reader, { orgId: flags.org }))
    ).map(presentConsoleUser);
    if (this.jsonEnabled()) return users;
    if (users.length === 0) {
      this.logNothingFound(
        'No console users. Invite one: svc console users create --email … --role operator',
      );
      return users;
    }
    const rows = users.map((user) => [
      user.id,
      user.email,
      user.role,
      user.org_id ?? 'all',
      user.status,
      user.totp ? 'yes' : 'no',
      user.last_login_at ?? 'never',
    ]);
    for (const line of formatTable(['ID', 'EMAIL', 'ROLE', 'ORG', 'STATUS', 'TOTP', 'LAST SIGN-IN'], rows))
      this.log(line);
    return users;
  }
}
