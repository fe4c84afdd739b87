import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';

export default class OrgsCeilings extends BaseCommand {
  static override summary =
    "Show or set an organisation's rate-limit ceilings: the most its admins may give a key from the console";
  static override examples = [
    '<%= config.bin %> orgs ceilings org_0123456789abcdef',
    '<%= config.bin %> orgs ceilings org_0123456789abcdef --rate-limit read=5000 --rate-limit sync_write=120:40',
    '<%= config.bin %> orgs ceilings org_0123456789abcdef --reset --json',
  ];
  static override args = { orgId: Args.string({ required: true, description: 'the organisation (org_…)' }) };
  static override flags = {
    'rate-limit': Flags.string({
      description: 'group=perMinute[:burst], e.g. read=5000 (repeatable); other groups keep their ceiling',
      multiple: true,
      exclusive: ['reset'],
    }),
    reset: Flags.boolean({ description: 'every group back to the configured default' }),
  };

  async run() {
    const { args, flags } = await this.parse(OrgsCeilings);
    const config = this.appConfig(flags.home);
    const { getOrganisation, organisationCeilings, setOrganisationCeilings } =
      await import('../../src/orgs/orgs.js');
    const { keysAboveCeilings } = await import('../../src/keys/keys.js');
    const { parseRateLimitOverrides } = await import('../../src/ratelimit/overrides.js');
    const changes = parseRateLimitOverrides(flags['rate-limit'] ?? [], config.rateLimits);
    const changing = flags.reset || Object.keys(changes).length > 0;
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        const organisation = changing
          ? await setOrganisationCeilings(trx, {
              orgId: args.orgId,
              ceilings: changes,
              reset: flags.reset,
              actor: this.actor(),
              now,
            })
          : await getOrganisation(trx, args.orgId);
        const ceilings = await organisationCeilings(trx, organisation.id, config.rateLimits);
        return {
          org_id: organisation.id,
          ceilings,
          set_by_operator: Object.keys(organisation.rate_limit_ceilings ?? {}),
          keys_above: await keysAboveCeilings(trx, organisation.id, ceilings, now),
        };
      }),
    );
    if (this.jsonEnabled()) return result;
    const rows = Object.entries(result.ceilings).map(([group, limit]) => [
      group,
      String(limit.perMinute),
      String(limit.burst),
      result.set_by_operator.includes(group) ? 'operator' : 'default',
    ]);
    this.log(`${changing ? 'New ceilings' : 'Ceilings'} of ${result.org_id}:`);
    for (const line of formatTable(['GROUP', 'PER MINUTE', 'BURST', 'SET BY'], rows)) this.log(line);
    if (result.keys_above.length > 0)
      this.log(
        `Keys above them keep their limits until changed with svc keys limits: ${result.keys_above.join(', ')}`,
      );
    return result;
  }
}
