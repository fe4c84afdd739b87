import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import type { DeletedLinkInspection, LinkInspection } from '../../src/inspect/inspect.js';

export default class LinksInspect extends BaseCommand {
  static override summary =
    'Everything about one link: why it is stale, its accounts, syncs, intents, events and deliveries';
  static override description =
    'For a deleted consent link: `deleted: true` and whether its grant was revoked at the bank (`grant_revocation`: status, attempts, last error, next attempt).';
  static override examples = [
    '<%= config.bin %> links inspect link_0123456789abcdef',
    '<%= config.bin %> links inspect link_0123456789abcdef --json',
  ];
  static override args = { linkId: Args.string({ required: true, description: 'the link (link_…)' }) };

  async run(): Promise<LinkInspection | DeletedLinkInspection> {
    const { args, flags } = await this.parse(LinksInspect);
    const config = this.appConfig(flags.home);
    const { inspectLinkOrDeleted } = await import('../../src/inspect/inspect.js');
    const data = await this.withDatabase(config, (db) =>
      inspectLinkOrDeleted(db.reader, args.linkId, {
        now: this.clock(config).now(),
        warningDays: config.links.consentExpiryWarningDays,
      }),
    );
    if (!this.jsonEnabled()) {
      const { formatAnyLinkInspection } = await import('../../src/cli/views/link-view.js');
      const { printableFields } = await import('../../src/cli/views/format.js');
      const { outputWidth } = await import('../../src/cli/views/wrap.js');
      for (const line of formatAnyLinkInspection(printableFields(data), outputWidth())) this.log(line);
    }
    return data;
  }
}
