import { Args, Flags } from '@oclif/core';
import { BaseCommand, parseDuration } from '../../src/cli/base-command.js';

export default class KeysRotate extends BaseCommand {
  static override summary =
    'Replace a key: the new one is printed once, the old one works until the grace period ends';
  static override examples = [
    '<%= config.bin %> keys rotate key_0123456789abcdef --grace 24h',
    '<%= config.bin %> keys rotate key_0123456789abcdef --grace 0',
  ];
  static override args = {
    keyId: Args.string({ required: true, description: 'the key to replace (key_…)' }),
  };
  static override flags = {
    grace: Flags.string({
      description: 'how long the old key keeps working (e.g. 0, 90s, 30m, 24h, 7d)',
      default: '24h',
    }),
  };

  async run() {
    const { args, flags } = await this.parse(KeysRotate);
    const config = this.appConfig(flags.home);
    const graceSeconds = parseDuration(flags.grace);
    const { rotateApiKey } = await import('../../src/keys/keys.js');
    const issued = await this.withDatabase(config, (db) =>
      db.transaction((trx) =>
        rotateApiKey(trx, {
          brand: config.brand,
          keyId: args.keyId,
          graceSeconds,
          actor: this.actor(),
          now: this.clock(config).now(),
          defaultLimits: config.rateLimits,
        }),
      ),
    );
    this.log(
      `Created ${issued.key.id} to replace ${issued.previous.id}, which stops working at ${issued.previous.expires_at}.`,
    );
    if (issued.limits_lowered.length > 0)
      this.log(
        `Its own limits were held to the organisation's ceilings for ${issued.limits_lowered.join(', ')} (the old key's were above them).`,
      );
    this.log('The new key is shown once. Store it now:');
    this.log(`  ${issued.secret}`);
    return issued;
  }
}
