import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';

export default class ConsoleUsersDisable extends BaseCommand {
  static override summary = 'Disable a console user: their sessions end at once and they cannot sign in';
  static override examples = ['<%= config.bin %> console users disable ana@lender.cl'];
  static override args = {
    user: Args.string({ required: true, description: 'the user id (cu_…) or email' }),
  };

  async run() {
    const { args, flags } = await this.parse(ConsoleUsersDisable);
    const config = this.appConfig(flags.home);
    const { disableConsoleUser, presentConsoleUser } = await import('../../../src/console/users.js');
    const user = await this.withDatabase(config, (db) =>
      db.transaction((trx) => disableConsoleUser(trx, args.user, this.actor(), this.clock(config).now())),
    );
    if (this.jsonEnabled()) return presentConsoleUser(user);
    this.log(`Disabled ${user.email} (${user.id}); their sessions have ended.`);
    return undefined;
  }
}
