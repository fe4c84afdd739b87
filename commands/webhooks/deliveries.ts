import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { printable } from '../../src/cli/views/format.js';
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
    if (deliveries.length === 0) this.log('No deliveries match.');
    for (const d of deliveries) {
      const http = d.last_response_status !== null ? ` HTTP ${d.last_response_status}` : '';
      const error = d.status !== 'succeeded' && d.last_error ? `  ${printable(d.last_error)}` : '';
      this.log(
        `${d.id}  ${d.mode}  ${d.event_type.padEnd(28)} ${d.event_id}  ${d.endpoint_id}  ${d.status.padEnd(9)} ${d.attempts} attempt(s)${http}${error}`,
      );
    }
    return deliveries;
  }
}
