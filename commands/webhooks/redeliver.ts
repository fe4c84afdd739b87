import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import type { WebhookDelivery } from '../../src/webhooks/deliveries.js';

export default class WebhooksRedeliver extends BaseCommand {
  static override summary =
    'Send a delivery’s event to its endpoint again, as a new delivery with a fresh schedule';
  static override description =
    'The original delivery is left as it was; the new one is due at once and a running dispatcher sends it. If the endpoint is backed off (its attempts kept going unanswered), the back-off ends and its waiting deliveries are due at once too.';
  static override examples = ['<%= config.bin %> webhooks redeliver wd_0123456789abcdef'];
  static override args = {
    deliveryId: Args.string({ required: true, description: 'the delivery (wd_…)' }),
  };

  async run(): Promise<WebhookDelivery> {
    const { args, flags } = await this.parse(WebhooksRedeliver);
    const config = this.appConfig(flags.home);
    const { redeliver } = await import('../../src/webhooks/deliveries.js');
    const { deliveryOwner } = await import('../../src/webhooks/operator.js');
    const now = this.clock(config).now();
    const delivery = await this.withDatabase(config, (db) =>
      db.transaction(async (trx) =>
        redeliver(trx, await deliveryOwner(trx, args.deliveryId, this.actor()), args.deliveryId, now),
      ),
    );
    this.log(
      `${delivery.id} queued: ${delivery.event_type} ${delivery.event_id} to ${delivery.endpoint_id} (a redelivery of ${args.deliveryId}).`,
    );
    return delivery;
  }
}
