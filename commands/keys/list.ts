import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';

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
    if (this.jsonEnabled()) return keys;
    if (keys.length === 0) {
      this.logNothingFound('No keys.');
      return keys;
    }
    const rows = keys.map((key) => [
      key.id,
      key.redacted,
      key.status,
      key.org_id,
      key.created_at,
      key.last_used_at ?? 'never',
      key.expires_at ?? '-',
      key.revoked_at ?? '-',
      key.rate_limits
        ? Object.entries(key.rate_limits)
            .map(([g, l]) => `${g}=${l.perMinute}:${l.burst}`)
            .join(',')
        : 'default',
    ]);
    const headers = ['ID', 'KEY', 'STATUS', 'ORG', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED', 'LIMITS'];
    for (const line of formatTable(headers, rows)) this.log(line);
    return keys;
  }
}
