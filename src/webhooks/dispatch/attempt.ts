import { performance } from 'node:perf_hooks';
import type { Clock } from '../../clock/clock.js';
import type { Config } from '../../config/defaults.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { rememberingOpener, signingSecrets } from '../endpoints.js';
import type { ClaimedRow, Endpoint } from './queue.js';
import type { FinishedAttempt } from './record.js';
import { deliveryRequest, requestNames, type RequestNames } from './request.js';
import { DeliverySender, type SendOutcome } from './sender.js';
import { mayReachPrivateAddresses } from '../url-policy.js';

/**
 * Makes a dispatcher's attempts: one claimed row's request (request.ts), signed with its endpoint's secrets
 * and posted by the sender (sender.ts), timed. An attempt never throws: our own failure to build or send it
 * is its outcome too.
 */
export class DeliveryAttempts {
  private readonly sender: DeliverySender;
  private readonly secrets: Pick<SecretBox, 'open'>;
  private readonly names: RequestNames;

  constructor(
    private readonly services: { clock: Clock; secrets: SecretBox; config: Readonly<Config> },
    /** Stamps signatures (`DispatcherOptions.wallClock`); the attempt's own times use the app clock. */
    private readonly wallClock: Clock,
  ) {
    const { config } = services;
    this.secrets = rememberingOpener(services.secrets);
    this.sender = new DeliverySender({
      attemptTimeoutMs: config.dispatcher.attemptTimeoutMs,
      responseBytesKept: config.dispatcher.responseBytesKept,
    });
    this.names = requestNames(config.brand);
  }

  /** One attempt of `row` (claimed under `token`) to `endpoint`; `tookMs` is its time unrounded, for the pace. */
  async make(
    row: ClaimedRow,
    token: string,
    endpoint: Endpoint,
  ): Promise<{ finished: FinishedAttempt; tookMs: number }> {
    const { clock, config } = this.services;
    const startedAt = clock.now();
    const began = performance.now();
    let outcome: SendOutcome;
    let unanswered = false;
    try {
      const { event_id: id, event_type: type, mode, event_data: data } = row;
      const event = { id, type, mode, data: data!, created_at: Number(row.event_created_at) };
      const secrets = signingSecrets(endpoint, this.secrets, startedAt);
      const request = deliveryRequest(event, secrets, this.wallClock.now(), this.names);
      const reachPrivate = mayReachPrivateAddresses(mode, endpoint.expires_at !== null, config.webhooks);
      outcome = await this.sender.send(endpoint.url, reachPrivate, request.headers, request.body);
      unanswered = outcome.statusCode === null;
    } catch (error) {
      // Our own failure (the secret would not open, say), not the receiver's: its health is left alone.
      const message = `not sent: ${(error as Error).message}`.slice(0, 300);
      outcome = { statusCode: null, ok: false, excerpt: null, error: message };
    }
    const tookMs = performance.now() - began;
    const finishedAt = clock.now();
    const durationMs = Math.round(tookMs);
    return { finished: { row, token, outcome, unanswered, startedAt, finishedAt, durationMs }, tookMs };
  }

  close(): Promise<void> {
    return this.sender.close();
  }
}
