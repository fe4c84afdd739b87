import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';

export interface Forwarded {
  event_id: string | null;
  event_type: string | null;
  /** The status the forward-to URL answered, which is also what the dispatcher is told; null if it failed. */
  status: number | null;
  error: string | null;
  duration_ms: number;
}

export interface ForwarderOptions {
  forwardTo: string;
  /** Header names to pass on as they came: the signature and event id headers of the brand. */
  headers: { signature: string; eventId: string };
  /** Deadline of one forward: under the dispatcher's own attempt deadline. */
  timeoutMs: number;
  onForward(forwarded: Forwarded): void;
}

export interface Forwarder {
  /** Where the temporary endpoint points: this process, on the loopback interface. */
  url: string;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;

/**
 * `svc webhooks listen`'s local receiver: it passes each delivery's exact body and its signature, event id,
 * content type and user agent headers on to `forwardTo`, and answers the dispatcher with the status the
 * forward-to URL gave (502 when it could not be reached), so a developer's receiver sees and answers
 * deliveries as it would in production, retries included.
 */
export async function startForwarder(options: ForwarderOptions): Promise<Forwarder> {
  const target = new URL(options.forwardTo);
  if (target.protocol !== 'http:' && target.protocol !== 'https:') {
    throw new Error(`--forward-to must be an http or https URL, got ${options.forwardTo}`);
  }
  const agent = new Agent({ connect: { timeout: options.timeoutMs } });
  const pass = [
    'content-type',
    'user-agent',
    options.headers.signature.toLowerCase(),
    options.headers.eventId.toLowerCase(),
  ];

  const handle = async (incoming: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of incoming as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        response.writeHead(413).end();
        return;
      }
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    let event: { id?: unknown; type?: unknown } = {};
    try {
      event = JSON.parse(body.toString('utf8')) as typeof event;
    } catch {
      // forwarded as it is all the same
    }
    const headers: Record<string, string> = {};
    for (const name of pass) {
      const value = incoming.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const began = performance.now();
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), options.timeoutMs);
    let status: number | null = null;
    let error: string | null = null;
    let answer = '';
    try {
      const forwarded = await request(target, {
        method: 'POST',
        dispatcher: agent,
        headers,
        body,
        signal: controller.signal,
      });
      status = forwarded.statusCode;
      answer = (await forwarded.body.text()).slice(0, 2048);
    } catch (caught) {
      const code = (caught as { code?: unknown }).code;
      error = controller.signal.aborted
        ? `no answer within ${options.timeoutMs} ms`
        : `could not reach ${target.origin} (${typeof code === 'string' ? code : (caught as Error).message})`;
    } finally {
      clearTimeout(timer);
    }
    options.onForward({
      event_id: typeof event.id === 'string' ? event.id : null,
      event_type: typeof event.type === 'string' ? event.type : null,
      status,
      error,
      duration_ms: Math.round(performance.now() - began),
    });
    response.writeHead(status ?? 502, { 'content-type': 'text/plain' });
    response.end(status === null ? (error ?? 'forward failed') : answer);
  };

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch(() => response.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await agent.close();
    },
  };
}
