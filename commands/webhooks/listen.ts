import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';

export default class WebhooksListen extends BaseCommand {
  static override summary = 'Forward test-mode webhooks to a local URL while printing each event';
  static override description = `Subscribes a temporary test-mode endpoint that points at a receiver this command starts on 127.0.0.1, and passes every delivery on to --forward-to with its exact body and signature headers; the dispatcher is answered with the status your receiver gave. Your receiver verifies with the signing secret printed at start. Ctrl-C or SIGTERM deletes the endpoint; if the command is killed without that chance, the endpoint expires two minutes after its last renewal, receives nothing more, and housekeeping removes it. A running dispatcher (svc serve) sends the deliveries.

With --json, one JSON object per line: {"type":"ready",…} with the endpoint and secret, {"type":"event",…} per delivery, {"type":"stopped",…} at the end.`;
  static override examples = [
    '<%= config.bin %> webhooks listen --forward-to http://localhost:3000/webhooks',
    '<%= config.bin %> webhooks listen --forward-to http://localhost:3000/webhooks --events link.refreshed,link.expired',
  ];
  static override flags = {
    'forward-to': Flags.string({ required: true, description: 'the URL your receiver listens on' }),
    org: Flags.string({ description: 'the organisation (default: the only one)' }),
    events: Flags.string({
      description: 'event types to receive, comma-separated (default: every type)',
      multiple: true,
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(WebhooksListen);
    const config = this.appConfig(flags.home);
    const { loadSecretBox } = await import('../../src/secrets/master-key-file.js');
    const { createEndpoint, deleteEndpoint, renewTemporaryEndpoint, TEMPORARY_ENDPOINT_TTL_MS } =
      await import('../../src/webhooks/endpoints.js');
    const { operatorPrincipal } = await import('../../src/auth/principal.js');
    const { startForwarder } = await import('../../src/webhooks/forwarder.js');
    const { headerNames } = await import('../../src/webhooks/signature.js');
    const { resolveOrg } = await import('../../src/cli/key-flags.js');

    const json = this.jsonEnabled();
    const line = (value: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(value)}\n`);
    const events = (flags.events ?? ['*']).flatMap((value) => value.split(',')).map((type) => type.trim());
    const clock = this.clock(config);
    let forwarded = 0;
    const forwarder = await startForwarder({
      forwardTo: flags['forward-to'],
      headers: headerNames(config.brand),
      timeoutMs: Math.max(100, config.dispatcher.attemptTimeoutMs - 500),
      onForward: (result) => {
        forwarded += 1;
        if (json) line({ type: 'event', at: new Date().toISOString(), ...result });
        else
          this.log(
            `${new Date().toISOString()}  ${result.event_type ?? '?'}  ${result.event_id ?? '?'}  → ${result.status ?? `failed: ${result.error}`} (${result.duration_ms} ms)`,
          );
      },
    });

    const db = await this.openDatabase(config).catch(async (error: unknown) => {
      await forwarder.close();
      throw error;
    });
    let endpointId: string | null = null;
    let orgId: string | null = null;
    const cleanUp = async () => {
      if (endpointId && orgId) {
        const principal = operatorPrincipal(orgId, 'test', this.actor());
        const id = endpointId;
        endpointId = null;
        const now = clock.now();
        // Already deleted by hand (in the console, or by the API): that deletion is in the audit log.
        await db.transaction((trx) => deleteEndpoint(trx, principal, id, now)).catch(() => undefined);
      }
      await forwarder.close();
      await db.close();
    };

    try {
      const now = clock.now();
      const created = await db.transaction(async (trx) => {
        orgId = await resolveOrg(trx, flags.org);
        const principal = operatorPrincipal(orgId, 'test', this.actor());
        const endpoint = await createEndpoint(
          trx,
          principal,
          { url: forwarder.url, enabled_events: events, description: 'svc webhooks listen (temporary)' },
          { secrets: loadSecretBox(config), addresses: config.webhooks },
          now,
          now + TEMPORARY_ENDPOINT_TTL_MS,
        );
        return endpoint;
      });
      endpointId = created.id;
      if (json) {
        line({
          type: 'ready',
          endpoint_id: created.id,
          org_id: orgId,
          url: created.url,
          forward_to: flags['forward-to'],
          enabled_events: created.enabled_events,
          secret: created.secret,
        });
      } else {
        this.log(
          `Ready: forwarding test-mode events of ${orgId} to ${flags['forward-to']} (Ctrl-C to stop).`,
        );
        this.log(`Temporary endpoint ${created.id}; your signing secret is ${created.secret}`);
      }
    } catch (error) {
      await cleanUp();
      throw this.explained(db, error);
    }

    // Renewed while we run, so that a listener killed without a chance to clean up (SIGKILL, a crash, a
    // closed laptop) leaves an endpoint that expires: emitting skips it, and housekeeping removes it.
    let renewal: NodeJS.Timeout | undefined;
    const stop = await new Promise<NodeJS.Signals | 'removed'>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
      renewal = setInterval(() => {
        const id = endpointId!;
        db.transaction((trx) => renewTemporaryEndpoint(trx, id, clock.now() + TEMPORARY_ENDPOINT_TTL_MS))
          .then((alive) => alive || resolve('removed'))
          .catch((error: Error) =>
            this.warn(`could not renew the temporary endpoint (retrying): ${error.message}`),
          );
      }, TEMPORARY_ENDPOINT_TTL_MS / 4);
    });
    clearInterval(renewal);
    const id = endpointId as string | null;
    if (stop === 'removed') {
      endpointId = null;
      await cleanUp();
      if (json)
        line({
          type: 'stopped',
          reason: 'endpoint_removed',
          endpoint_id: id,
          endpoint_deleted: true,
          forwarded,
        });
      this.error(
        `The temporary endpoint ${id} is gone (deleted, or not renewed for ${TEMPORARY_ENDPOINT_TTL_MS / 1000} s); run the command again.`,
        { exit: 1 },
      );
    }
    await cleanUp();
    if (json) line({ type: 'stopped', signal: stop, endpoint_id: id, endpoint_deleted: true, forwarded });
    else this.log(`Stopped (${stop}): ${forwarded} delivered; endpoint ${id} deleted.`);
  }
}
