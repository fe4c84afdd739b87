import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class KeysLimits extends BaseCommand {
  static override summary = "Raise (or lower) a key's rate limits per group";
  static override examples = [
    '<%= config.bin %> keys limits key_0123456789abcdef --rate-limit read=1000 --rate-limit sync_write=60:20',
  ];
  static override args = { keyId: Args.string({ required: true, description: 'the key (key_…)' }) };
  static override flags = {
    'rate-limit': Flags.string({
      description: 'group=perMinute[:burst], e.g. read=1000 (repeatable)',
      multiple: true,
      required: true,
    }),
  };

  async run() {
    const { args, flags } = await this.parse(KeysLimits);
    const config = this.appConfig(flags.home);
    const { setKeyRateLimits } = await import('../../src/keys/keys.js');
    const { parseRateLimitOverrides } = await import('../../src/ratelimit/overrides.js');
    const rateLimits = parseRateLimitOverrides(flags['rate-limit'], config.rateLimits);
    const key = await this.withDatabase(config, (db) =>
      db.transaction((trx) =>
        setKeyRateLimits(trx, {
          keyId: args.keyId,
          rateLimits,
          actor: this.actor(),
          now: this.clock(config).now(),
        }),
      ),
    );
    this.log(
      `${key.id} limits: ${Object.entries(key.rate_limits ?? {})
        .map(([g, l]) => `${g} ${l.perMinute}/min burst ${l.burst}`)
        .join(', ')}`,
    );
    return key;
  }
}
