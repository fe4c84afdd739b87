import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class KeysRevoke extends BaseCommand {
  static override summary = 'Revoke a key at once (every API process refuses it within 5 seconds)';
  static override examples = ['<%= config.bin %> keys revoke key_0123456789abcdef'];
  static override args = { keyId: Args.string({ required: true, description: 'the key to revoke (key_…)' }) };

  async run() {
    const { args, flags } = await this.parse(KeysRevoke);
    const config = this.appConfig(flags.home);
    const { revokeApiKey } = await import('../../src/keys/keys.js');
    const key = await this.withDatabase(config, (db) =>
      db.transaction((trx) =>
        revokeApiKey(trx, { keyId: args.keyId, actor: this.actor(), now: this.clock(config).now() }),
      ),
    );
    this.log(`Revoked ${key.id} (${key.redacted}) at ${key.revoked_at}.`);
    return key;
  }
}
