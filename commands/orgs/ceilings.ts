import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';

export default class OrgsCeilings extends BaseCommand {
  static override summary =
    "Show or set an organisation's ceilings: the rate limits all its keys share, and its cap on live keys";
  static override examples = [
    '<%= config.bin %> orgs ceilings org_0123456789abcdef',
    '<%= config.bin %> orgs ceilings org_0123456789abcdef --rate-limit read=5000 --rate-limit sync_write=120:40',
    '<%= config.bin %> orgs ceilings org_0123456789abcdef --reset --json',
    '<%= config.bin %> orgs ceilings org_0123456789abcdef --max-live-keys 8',
  ];
  static override args = { orgId: Args.string({ required: true, description: 'the organisation (org_…)' }) };
  static override flags = {
    'rate-limit': Flags.string({
      description: 'group=perMinute[:burst], e.g. read=5000 (repeatable); other groups keep their ceiling',
      multiple: true,
      exclusive: ['reset'],
    }),
    reset: Flags.boolean({ description: 'every group back to the configured default' }),
    'max-live-keys': Flags.string({
      description: `how many live API keys the organisation may hold (1 to 10000), or "default"`,
    }),
  };

  async run() {
    const { args, flags } = await this.parse(OrgsCeilings);
    const config = this.appConfig(flags.home);
    const { getOrganisation, organisationCeilings, setOrganisationCeilings, setOrganisationKeyCap } =
      await import('../../src/orgs/orgs.js');
    const { countLiveKeys, keysAboveCeilings } = await import('../../src/keys/keys.js');
    const { parseRateLimitOverrides } = await import('../../src/ratelimit/overrides.js');
    const changes = parseRateLimitOverrides(flags['rate-limit'] ?? [], config.rateLimits);
    const capText = flags['max-live-keys'];
    if (capText !== undefined && capText !== 'default' && !/^\d+$/.test(capText))
      throw new Error(
        `--max-live-keys must be a whole number from 1 to 10000, or "default"; got "${capText}".`,
      );
    const cap = capText === undefined ? undefined : capText === 'default' ? null : Number(capText);
    const changingLimits = flags.reset || Object.keys(changes).length > 0;
    const changing = changingLimits || cap !== undefined;
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) => {
        let organisation = changingLimits
          ? await setOrganisationCeilings(trx, {
              orgId: args.orgId,
              ceilings: changes,
              reset: flags.reset,
              actor: this.actor(),
              now,
            })
          : await getOrganisation(trx, args.orgId);
        if (cap !== undefined)
          organisation = await setOrganisationKeyCap(trx, {
            orgId: organisation.id,
            maxLiveKeys: cap,
            actor: this.actor(),
            now,
          });
        const ceilings = await organisationCeilings(trx, organisation.id, config.rateLimits);
        return {
          org_id: organisation.id,
          ceilings,
          set_by_operator: Object.keys(organisation.rate_limit_ceilings ?? {}),
          keys_above: await keysAboveCeilings(trx, organisation.id, ceilings, now),
          max_live_keys: organisation.max_live_keys,
          max_live_keys_set_by_operator: organisation.max_live_keys_set,
          live_keys: await countLiveKeys(trx, organisation.id, now),
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
    this.log(
      `All keys of the organisation share these, per mode. Live keys: ${result.live_keys} of at most ${result.max_live_keys} (${result.max_live_keys_set_by_operator ? 'set by the operator' : 'the default'}).`,
    );
    if (result.live_keys > result.max_live_keys)
      this.log('The organisation is above its cap: no key is issued until some are revoked.');
    if (result.keys_above.length > 0)
      this.log(
        `Keys whose own limits are above them keep those limits until changed with svc keys limits (a rotation hands on no more than the ceiling): ${result.keys_above.join(', ')}`,
      );
    return result;
  }
}
