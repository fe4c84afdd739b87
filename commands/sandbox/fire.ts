import { Args, Flags } from '@oclif/core';
import { BaseCommand, parseDuration } from '../../src/cli/base-command.js';
import type { EventRecord } from '../../src/events/store.js';
import type { DeliveryOutcome } from '../../src/webhooks/operator.js';

export default class SandboxFire extends BaseCommand {
  static override summary = "Fire a test event about a test link to its organisation's test-mode endpoints";
  static override description =
    'Emits the event as POST /v1/sandbox/events/fire does (no sync runs, the link does not change), then waits for each endpoint’s first attempt and prints where it stands. A running dispatcher (svc serve) sends it.';
  static override examples = [
    '<%= config.bin %> sandbox fire refresh_intent.succeeded --link link_0123456789abcdef',
    '<%= config.bin %> sandbox fire link.expired --link link_0123456789abcdef --wait 60s --json',
  ];
  static override args = {
    type: Args.string({ required: true, description: 'an event type of the catalogue, e.g. link.refreshed' }),
  };
  static override flags = {
    link: Flags.string({ required: true, description: 'the test-mode link (link_…) the event is about' }),
    wait: Flags.string({
      default: '30s',
      description: 'how long to wait for the first attempts (0 = do not wait)',
    }),
  };

  async run(): Promise<{ event: EventRecord; deliveries: DeliveryOutcome[]; complete: boolean }> {
    const { args, flags } = await this.parse(SandboxFire);
    const config = this.appConfig(flags.home);
    const waitMs = parseDuration(flags.wait) * 1000;
    const { fireSandboxEvent } = await import('../../src/sandbox/sandbox-events.js');
    const { linkOwner } = await import('../../src/inspect/inspect.js');
    const { waitForOutcomes, describeOutcome } = await import('../../src/webhooks/operator.js');
    const now = this.clock(config).now();
    const result = await this.withDatabase(config, async (db) => {
      const event = await db.transaction(async (trx) => {
        const principal = await linkOwner(trx, flags.link, this.actor());
        return fireSandboxEvent(
          trx,
          principal,
          { type: args.type, link_id: flags.link },
          {
            syncIntervalMinutes: config.scheduler.syncIntervalMinutes,
            consentExpiryWarningDays: config.links.consentExpiryWarningDays,
          },
          now,
        );
      });
      const { outcomes, complete } = await waitForOutcomes(db.reader, event.id, waitMs);
      return { event, deliveries: outcomes, complete };
    });
    this.log(`${result.event.type} ${result.event.id} fired about ${flags.link}.`);
    if (result.deliveries.length === 0) {
      this.log('No test-mode endpoint of the organisation subscribes to this type: it was stored, not sent.');
    }
    for (const outcome of result.deliveries) this.log(`  ${describeOutcome(outcome)}`);
    if (!result.complete && result.deliveries.length > 0) {
      this.log('Some endpoints had no attempt yet: is a dispatcher running (`svc status`)?');
    }
    return result;
  }
}
