import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';

export default class ConsoleUsersReset extends BaseCommand {
  static override summary = "Print a link to set a new password (ends the user's sessions)";
  static override examples = [
    '<%= config.bin %> console users reset ana@lender.cl',
    '<%= config.bin %> console users reset cu_0123456789abcdef --remove-totp',
  ];
  static override args = {
    user: Args.string({ required: true, description: 'the user id (cu_…) or email' }),
  };
  static override flags = {
    'remove-totp': Flags.boolean({ description: 'also remove the second factor (a lost authenticator)' }),
  };

  async run() {
    const { args, flags } = await this.parse(ConsoleUsersReset);
    const config = this.appConfig(flags.home);
    const { resetConsoleUser, presentConsoleUser, INVITATION_TTL_MS, RESET_TTL_MS } =
      await import('../../../src/console/users.js');
    const { consoleLink } = await import('../../../src/console/links.js');
    const now = this.clock(config).now();
    const { user, token, purpose } = await this.withDatabase(config, (db) =>
      db.transaction((trx) =>
        resetConsoleUser(trx, args.user, { actor: this.actor(), now, removeTotp: flags['remove-totp'] }),
      ),
    );
    const link = consoleLink(config, 'accept', token);
    const expires = new Date(now + (purpose === 'invite' ? INVITATION_TTL_MS : RESET_TTL_MS)).toISOString();
    if (this.jsonEnabled())
      return { ...presentConsoleUser(user), reset_url: link, reset_expires_at: expires };
    this.log(
      purpose === 'invite'
        ? `${user.email} had not accepted their invitation; this new one replaces it.`
        : `${user.email}'s sessions have ended${flags['remove-totp'] ? ' and their second factor is removed' : ''}.`,
    );
    this.log(`Send them this link; it is shown once and works until ${expires}:`);
    this.log(`  ${link}`);
    return undefined;
  }
}
