import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import type { Test } from 'tap';

/** One request a receiver got. */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** `Date.now()` when the request arrived. */
  at: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the parsed event
  event: any;
}

export type Handler = (request: Received, response: ServerResponse) => void | Promise<void>;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Requests that arrived and have not been answered yet. */
  pending(): number;
  setHandler(handler: Handler): void;
  /** Resolves with the requests once `count` have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export const ok: Handler = (_request, response) => {
  response.writeHead(200, { 'content-type': 'text/plain' });
  response.end('ok');
};

/** A real HTTP server on 127.0.0.1, closed (with any connection it still holds) when the test ends. */
export async function startReceiver(t: Test, handler: Handler = ok): Promise<Receiver> {
  const received: Received[] = [];
  let current = handler;
  let open = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    open += 1;
    response.once('close', () => (open -= 1));
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let event: unknown = null;
      try {
        event = JSON.parse(body);
      } catch {
        event = null;
      }
      const entry: Received = {
        path: request.url ?? '/',
        headers: request.headers,
        body,
        at: Date.now(),
        event,
      };
      received.push(entry);
      for (const waiter of [...waiters]) {
        if (received.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      Promise.resolve(current(entry, response)).catch(() => response.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  t.teardown(close);
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    pending: () => open,
    setHandler: (next) => (current = next),
    waitFor(count, timeoutMs = 10_000) {
      if (received.length >= count) return Promise.resolve(received);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${received.length} of ${count} requests in ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(received);
          },
        });
      });
    },
    close,
  };
}

/**
 * Signature check written from the spec alone (not the project's code): `t=<unix>,v1=<hex>[,v1=…]`, HMAC-SHA256
 * over `<t>.<raw body>`, at most 300 s from `nowMs`. Returns how many `v1` values match `secret`.
 */
export function independentlyVerified(
  body: string,
  header: string | string[] | undefined,
  secret: string,
  nowMs = Date.now(),
): number {
  if (typeof header !== 'string') return 0;
  const fields = header.split(',').map((part) => part.split('=') as [string, string]);
  const t = fields.find(([key]) => key === 't')?.[1];
  if (!t || !/^\d+$/.test(t) || Math.abs(Math.floor(nowMs / 1000) - Number(t)) > 300) return 0;
  const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  return fields.filter(
    ([key, value]) =>
      key === 'v1' && /^[0-9a-f]{64}$/.test(value) && timingSafeEqual(expected, Buffer.from(value, 'hex')),
  ).length;
}

/** A server that accepts connections, reads what comes and never answers. */
export interface Tarpit {
  url(path?: string): string;
  port: number;
  /** Connections accepted so far, and how many of them are still open. */
  accepted(): number;
  open(): number;
  /** `Date.now()` when the first connection was closed (by the client giving up), or null. */
  firstClosedAt(): number | null;
  close(): Promise<void>;
}

/**
 * A TCP tarpit on 127.0.0.1: every connection is accepted and left hanging, as a receiver that takes the
 * request and never answers, so each attempt holds its slot until its deadline. Closed (with every
 * connection it holds) when the test ends.
 */
export async function startTarpit(t: Test): Promise<Tarpit> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let firstClosedAt: number | null = null;
  const server = createNetServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      sockets.delete(socket);
      firstClosedAt ??= Date.now();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }));
  t.teardown(close);
  return {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    port,
    accepted: () => accepted,
    open: () => sockets.size,
    firstClosedAt: () => firstClosedAt,
    close,
  };
}
