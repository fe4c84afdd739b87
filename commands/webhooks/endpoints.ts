import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';
import type { OperatorEndpoint } from '../../src/webhooks/operator.js';

export default class WebhooksEndpoints extends BaseCommand {
  static override summary =
    'List webhook endpoints across organisations, newest first (secrets are never shown)';
  static override description =
    'Each line shows whether the endpoint is enabled, disabled, or backed off (its attempts keep going unanswered: nothing is sent to it before the time shown; `svc webhooks redeliver` of one of its deliveries, or any update of the endpoint, ends the back-off).';
  static override examples = [
    '<%= config.bin %> webhooks endpoints',
    '<%= config.bin %> webhooks endpoints --org org_0123456789abcdef --mode live --json',
  ];
  static override flags = {
    org: Flags.string({ description: 'only this organisation' }),
    mode: Flags.string({ options: ['test', 'live'] }),
  };

  async run(): Promise<OperatorEndpoint[]> {
    const { flags } = await this.parse(WebhooksEndpoints);
    const config = this.appConfig(flags.home);
    const { endpointState, listAllEndpoints } = await import('../../src/webhooks/operator.js');
    const endpoints = await this.withDatabase(config, (db) =>
      listAllEndpoints(db.reader, { orgId: flags.org, mode: flags.mode as 'test' | 'live' | undefined }),
    );
    if (this.jsonEnabled()) return endpoints;
    if (endpoints.length === 0) {
      this.logNothingFound('No webhook endpoints.');
      return endpoints;
    }
    const now = this.clock(config).now();
    const rows = endpoints.map((endpoint) => [
      endpoint.id,
      endpoint.org_id,
      endpoint.mode,
      endpointState(endpoint, now),
      endpoint.url,
      endpoint.enabled_events.join(','),
    ]);
    for (const line of formatTable(['ID', 'ORG', 'MODE', 'STATE', 'URL', 'EVENTS'], rows)) this.log(line);
    return endpoints;
  }
}
