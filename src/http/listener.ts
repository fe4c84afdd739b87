import { createServer, STATUS_CODES, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ErrorEnvelope } from '../errors/api-error.js';
import { nextRequestId } from './middleware/request-context.js';

export interface ListenOptions {
  host: string;
  port: number;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
}

export interface ApiListener {
  server: Server;
  url: string;
  /** Hands requests to `handler`, those that arrived before it too (they wait for it). */
  serve(handler: RequestListener): void;
  /** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then cuts what remains. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * Binds the API's port before anything heavy loads, so that a taken port fails a restarted API in the time
 * Node takes to start rather than after the database and the whole Koa stack (0.7 s). A request that
 * arrives meanwhile waits for the app instead of being refused.
 */
export async function listenForApi(options: ListenOptions): Promise<ApiListener> {
  let handler: RequestListener | null = null;
  let serveWith: (ready: RequestListener) => void = () => undefined;
  const handlerReady = new Promise<RequestListener>((resolve) => (serveWith = resolve));
  const server = createServer(
    {
      requestTimeout: options.requestTimeoutMs,
      // Node refuses a headers timeout longer than the request timeout.
      headersTimeout: Math.min(options.headersTimeoutMs, options.requestTimeoutMs),
      keepAliveTimeout: 5_000,
      // Node looks for expired requests every 30 s by default, which would let a slow-loris socket live
      // 30 s past its timeout; a pass over the open connections each second costs next to nothing.
      connectionsCheckingInterval: 1_000,
    },
    (request, response) =>
      handler ? handler(request, response) : void handlerReady.then((ready) => ready(request, response)),
  );
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    server,
    url: `http://${shownHost}:${address.port}`,
    serve(ready) {
      handler = ready;
      serveWith(ready);
    },
    close: (timeoutMs = 30_000) =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}

const CLIENT_ERRORS: Record<string, { status: number; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    code: 'request_header_fields_too_large',
    message: 'The request line and headers are larger than this server accepts (16 KiB).',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    code: 'request_timeout',
    message: 'The request did not arrive in time.',
  },
};

/**
 * What Node answers by itself (malformed HTTP, oversized headers, a request that never finishes), in the
 * spec's envelope and with a request id like every other response, instead of Node's bare status line.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // Node's own handler makes the same checks: a reset socket, or a response already under way, gets nothing.
  const response = (socket as Duplex & { _httpMessage?: { headersSent: boolean } })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const known = CLIENT_ERRORS[error.code ?? ''] ?? {
    status: 400,
    code: 'invalid_request',
    message: 'The request is not valid HTTP/1.1.',
  };
  const requestId = nextRequestId();
  const envelope: ErrorEnvelope = {
    error: { type: 'invalid_request_error', code: known.code, message: known.message, request_id: requestId },
  };
  const body = JSON.stringify(envelope);
  socket.end(
    `HTTP/1.1 ${known.status} ${STATUS_CODES[known.status]}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}
