import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { formatTable } from '../../src/cli/views/table.js';
import type { WebhookDelivery } from '../../src/webhooks/deliveries.js';

export default class WebhooksDeliveries extends BaseCommand {
  static override summary = 'List webhook deliveries across organisations, newest first';
  static override examples = [
    '<%= config.bin %> webhooks deliveries --status failed',
    '<%= config.bin %> webhooks deliveries --event evt_0123456789abcdef --json',
    '<%= config.bin %> webhooks deliveries --endpoint we_0123456789abcdef --status pending',
  ];
  static override flags = {
    status: Flags.string({ options: ['pending', 'succeeded', 'failed'] }),
    event: Flags.string({ description: 'only deliveries of this event (evt_…)' }),
    endpoint: Flags.string({ description: 'only deliveries to this endpoint (we_…)' }),
    org: Flags.string({ description: 'only this organisation' }),
    mode: Flags.string({ options: ['test', 'live'] }),
    limit: Flags.integer({ default: 50, min: 1, max: 10_000 }),
  };

  async run(): Promise<(WebhookDelivery & { org_id: string })[]> {
    const { flags } = await this.parse(WebhooksDeliveries);
    const config = this.appConfig(flags.home);
    const { listDeliveries, presentDelivery } = await import('../../src/webhooks/deliveries.js');
    const { rows } = await this.withDatabase(config, (db) =>
      listDeliveries(
        db.reader,
        {
          orgId: flags.org,
          mode: flags.mode as 'test' | 'live' | undefined,
          eventId: flags.event,
          endpointId: flags.endpoint,
          status: flags.status as WebhookDelivery['status'] | undefined,
        },
        0,
        flags.limit,
      ),
    );
    const deliveries = rows.map((row) => ({ ...presentDelivery(row), org_id: row.org_id }));
    if (this.jsonEnabled()) return deliveries;
    if (deliveries.length === 0) {
      this.logNothingFound('No deliveries match.');
      return deliveries;
    }
    const table = deliveries.map((d) => [
      d.id,
      d.mode,
      d.event_type,
      d.event_id,
      d.endpoint_id,
      d.status,
      `${d.attempts} attempt(s)${d.last_response_status !== null ? ` HTTP ${d.last_response_status}` : ''}`,
      d.status !== 'succeeded' && d.last_error ? d.last_error : '',
    ]);
    const headers = ['ID', 'MODE', 'EVENT TYPE', 'EVENT', 'ENDPOINT', 'STATUS', 'ATTEMPTS', 'LAST ERROR'];
    for (const line of formatTable(headers, table)) this.log(line);
    return deliveries;
  }
}
