import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import type { ConsoleRole } from '../../../src/console/users.js';

export default class ConsoleUsersCreate extends BaseCommand {
  static override summary =
    'Invite a console user; prints the invitation link once (the appliance sends no mail)';
  static override examples = [
    '<%= config.bin %> console users create --email ops@example.com --role operator',
    '<%= config.bin %> console users create --email ana@lender.cl --role admin --org org_0123456789abcdef',
    '<%= config.bin %> console users create --email help@lender.cl --role support --org org_0123456789abcdef --json',
  ];
  static override flags = {
    email: Flags.string({ required: true, description: 'the email the user signs in with' }),
    role: Flags.string({
      required: true,
      options: ['operator', 'admin', 'support'],
      description:
        'operator: every organisation; admin: one organisation; support: read and operate, no keys or endpoints',
    }),
    org: Flags.string({ description: 'the organisation (admin, and support of one organisation)' }),
  };

  async run() {
    const { flags } = await this.parse(ConsoleUsersCreate);
    const config = this.appConfig(flags.home);
    const { inviteConsoleUser, presentConsoleUser, INVITATION_TTL_MS } =
      await import('../../../src/console/users.js');
    const { consoleLink } = await import('../../../src/console/links.js');
    const now = this.clock(config).now();
    const { user, token } = await this.withDatabase(config, (db) =>
      db.transaction((trx) =>
        inviteConsoleUser(trx, {
          email: flags.email,
          role: flags.role as ConsoleRole,
          orgId: flags.org ?? null,
          actor: this.actor(),
          now,
        }),
      ),
    );
    const link = consoleLink(config, 'accept', token);
    const expires = new Date(now + INVITATION_TTL_MS).toISOString();
    if (this.jsonEnabled())
      return { ...presentConsoleUser(user), invitation_url: link, invitation_expires_at: expires };
    this.log(`Invited ${user.email} (${user.id}) as ${user.role}${user.org_id ? ` of ${user.org_id}` : ''}.`);
    this.log(`Send them this link; it is shown once and works until ${expires}:`);
    this.log(`  ${link}`);
    return undefined;
  }
}
