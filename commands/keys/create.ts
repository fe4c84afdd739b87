import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { rateLimitFlag, resolveOrg } from '../../src/cli/key-flags.js';

export default class KeysCreate extends BaseCommand {
  static override summary = 'Issue an API key; it is printed once and stored only as a hash';
  static override examples = [
    '<%= config.bin %> keys create --mode test --type secret',
    '<%= config.bin %> keys create --org org_0123456789abcdef --mode live --type publishable',
    '<%= config.bin %> keys create --mode live --type secret --rate-limit read=1000',
  ];
  static override flags = {
    org: Flags.string({ description: 'organisation id (default: the only one)' }),
    mode: Flags.string({ options: ['test', 'live'], required: true }),
    type: Flags.string({ options: ['secret', 'publishable'], required: true }),
    name: Flags.string({ description: 'a note to recognise the key by' }),
    'rate-limit': rateLimitFlag,
  };

  async run() {
    const { flags } = await this.parse(KeysCreate);
    const config = this.appConfig(flags.home);
    const { createApiKey } = await import('../../src/keys/keys.js');
    const { parseRateLimitOverrides } = await import('../../src/ratelimit/overrides.js');
    const rateLimits = parseRateLimitOverrides(flags['rate-limit'] ?? [], config.rateLimits);
    const issued = await this.withDatabase(config, async (db) =>
      db.transaction(async (trx) =>
        createApiKey(trx, {
          brand: config.brand,
          orgId: await resolveOrg(trx, flags.org),
          mode: flags.mode as 'test' | 'live',
          type: flags.type as 'secret' | 'publishable',
          name: flags.name ?? null,
          rateLimits,
          actor: this.actor(),
          now: this.clock(config).now(),
        }),
      ),
    );
    this.log(`Created ${issued.key.id} (${issued.key.type}, ${issued.key.mode}) for ${issued.key.org_id}.`);
    this.log('The key is shown once. Store it now:');
    this.log(`  ${issued.secret}`);
    return issued;
  }
}
