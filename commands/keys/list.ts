import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class KeysList extends BaseCommand {
  static override summary = 'List API keys by prefix and last four characters, with use and expiry';
  static override examples = [
    '<%= config.bin %> keys list',
    '<%= config.bin %> keys list --org org_0123456789abcdef --all --json',
  ];
  static override flags = {
    org: Flags.string({ description: 'only this organisation' }),
    all: Flags.boolean({ description: 'include revoked keys' }),
  };

  async run() {
    const { flags } = await this.parse(KeysList);
    const config = this.appConfig(flags.home);
    const { listApiKeys } = await import('../../src/keys/keys.js');
    const keys = await this.withDatabase(config, (db) =>
      listApiKeys(db.reader, { orgId: flags.org, includeRevoked: flags.all }, this.clock(config).now()),
    );
    if (keys.length === 0) this.log('No keys.');
    for (const key of keys) {
      const limits = key.rate_limits
        ? ` limits ${Object.entries(key.rate_limits)
            .map(([g, l]) => `${g}=${l.perMinute}:${l.burst}`)
            .join(',')}`
        : '';
      const expiry = key.expires_at ? ` expires ${key.expires_at}` : '';
      const revoked = key.revoked_at ? ` revoked ${key.revoked_at}` : '';
      this.log(
        `${key.id}  ${key.redacted.padEnd(22)} ${key.status.padEnd(9)} ${key.org_id}  created ${key.created_at}  last used ${key.last_used_at ?? 'never'}${expiry}${revoked}${limits}`,
      );
    }
    return keys;
  }
}
