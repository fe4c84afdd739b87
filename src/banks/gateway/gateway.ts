import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CONNECTOR_ERROR_CODES,
  ConnectorError,
  type Connector,
  type ConnectorErrorCode,
} from '../connector.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyGatewaySignature } from '../http/signature.js';
import {
  WireFormatError,
  accountToWire,
  accountsRequestFromWire,
  errorToWire,
  isConnectorErrorCode,
  loginRequestFromWire,
  loginResultToWire,
  mfaRequestFromWire,
  movementToWire,
  movementsRequestFromWire,
  sessionToWire,
} from '../http/wire.js';

/**
 * The reference bank gateway: a plain node:http server that speaks the HTTP connector protocol
 * (docs/connector-protocol.md) by delegating to a Connector. `svc bank-gateway` runs it over the sandbox, so
 * live mode can be exercised over a real socket; an operator can read it as the model of a gateway for a
 * real bank. Faults (errors, latency, hangs, bare statuses) can be injected, from code or over HTTP.
 */
export interface BankGatewayOptions {
  host: string;
  /** 0 picks a free port; `url` tells which. */
  port: number;
  /** The shared secret every request must be signed with. */
  secret: string;
  connector: Connector;
  /** Delay before every protocol answer, unless a fault sets its own. */
  latencyMs?: number;
  /** How far a request's timestamp may be from this gateway's clock; 300 s by default. */
  toleranceSeconds?: number;
  /** Told about an unexpected error (not a ConnectorError) from the connector; it is answered 500. */
  onError?: (error: unknown) => void;
}

/**
 * Injected faults. `error`, `status` and `hang` make up the fault, which hits a share `rate` of protocol
 * requests (default 1: all of them). Rates of 1 and 0 are deterministic; between them, each request draws.
 * `latencyMs` delays every protocol request, hit or not. Setting faults replaces the previous ones; `{}`
 * clears them. `/_admin/faults` itself is never faulted or delayed.
 */
export interface GatewayFaults {
  /** Answer `{error: {code, message}}` with this code (status: `status`, else the code's usual status). */
  error?: ConnectorErrorCode;
  rate?: number;
  latencyMs?: number;
  /** Never answer (the connection stays open until the client gives up or the gateway closes). */
  hang?: boolean;
  /** With `error`: the status to answer it with. Alone: answer this status with a body that is not JSON. */
  status?: number;
}

export interface BankGateway {
  /** `http://host:port`, with the port actually bound. */
  url: string;
  setFaults(faults: GatewayFaults): void;
  faults(): GatewayFaults;
  /** Stops listening and drops every connection, hung ones included. */
  close(): Promise<void>;
}

/** The status a gateway answers each error code with; the client maps by code, so these are advisory. */
export const ERROR_STATUS: Readonly<Record<ConnectorErrorCode, number>> = {
  rejected_credentials: 422,
  account_locked: 422,
  action_required: 422,
  mfa_required: 422,
  mfa_invalid: 422,
  mfa_expired: 422,
  unsupported: 422,
  bank_unavailable: 503,
  timeout: 504,
  invalid_bank_data: 502,
  consent_revoked: 422,
};

const MAX_REQUEST_BYTES = 1024 * 1024;

type Handler = (body: unknown, connector: Connector) => Promise<unknown>;

const ROUTES: Readonly<Record<string, Handler>> = {
  '/v1/login': async (body, connector) =>
    loginResultToWire(await connector.login(loginRequestFromWire(body))),
  '/v1/mfa': async (body, connector) => {
    const { request, challenge, code } = mfaRequestFromWire(body);
    return { session: sessionToWire(await connector.submitMfa(request, challenge, code)) };
  },
  '/v1/accounts': async (body, connector) => {
    const { session, now } = accountsRequestFromWire(body);
    return { accounts: (await connector.listAccounts(session, now)).map(accountToWire) };
  },
  '/v1/movements': async (body, connector) => {
    const { session, account, window, now } = movementsRequestFromWire(body);
    return { movements: (await connector.listMovements(session, account, window, now)).map(movementToWire) };
  },
  '/v1/statements': async (body, connector) => {
    const { session, account, window, now } = movementsRequestFromWire(body);
    if (!connector.statements) {
      throw new ConnectorError('unsupported', 'this bank has no statements to download');
    }
    return { movements: (await connector.statements(session, account, window, now)).map(movementToWire) };
  },
};

export function validateFaults(faults: GatewayFaults): GatewayFaults {
  const clean: GatewayFaults = {};
  if (faults.error !== undefined && faults.error !== null) {
    if (!isConnectorErrorCode(faults.error)) {
      throw new RangeError(`faults.error must be one of ${CONNECTOR_ERROR_CODES.join(', ')}`);
    }
    clean.error = faults.error;
  }
  if (faults.rate !== undefined && faults.rate !== null) {
    if (typeof faults.rate !== 'number' || !(faults.rate >= 0 && faults.rate <= 1)) {
      throw new RangeError('faults.rate must be a number from 0 to 1');
    }
    clean.rate = faults.rate;
  }
  if (faults.latencyMs !== undefined && faults.latencyMs !== null) {
    if (!Number.isInteger(faults.latencyMs) || faults.latencyMs < 0) {
      throw new RangeError('faults.latencyMs must be a whole number of milliseconds');
    }
    clean.latencyMs = faults.latencyMs;
  }
  if (faults.hang !== undefined && faults.hang !== null) {
    if (typeof faults.hang !== 'boolean') throw new RangeError('faults.hang must be true or false');
    if (faults.hang) clean.hang = true;
  }
  if (faults.status !== undefined && faults.status !== null) {
    if (!Number.isInteger(faults.status) || faults.status < 300 || faults.status > 599) {
      throw new RangeError('faults.status must be an HTTP status from 300 to 599');
    }
    clean.status = faults.status;
  }
  return clean;
}

/** The snake_case body of `POST /_admin/faults` and of its answer. */
function faultsFromWire(body: unknown): GatewayFaults {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RangeError('the body must be an object');
  }
  const wire = body as Record<string, unknown>;
  const known = new Set(['error', 'rate', 'latency_ms', 'hang', 'status']);
  for (const name of Object.keys(wire)) {
    if (!known.has(name)) throw new RangeError(`unknown field ${name}; expected ${[...known].join(', ')}`);
  }
  return validateFaults({
    error: wire.error as ConnectorErrorCode | undefined,
    rate: wire.rate as number | undefined,
    latencyMs: wire.latency_ms as number | undefined,
    hang: wire.hang as boolean | undefined,
    status: wire.status as number | undefined,
  });
}

function faultsToWire(faults: GatewayFaults): Record<string, unknown> {
  return {
    error: faults.error ?? null,
    rate: faults.rate ?? 1,
    latency_ms: faults.latencyMs ?? null,
    hang: faults.hang ?? false,
    status: faults.status ?? null,
  };
}

export async function startBankGateway(options: BankGatewayOptions): Promise<BankGateway> {
  let faults: GatewayFaults = {};
  const closing = new AbortController();

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      options.onError?.(error);
      send(res, 500, errorToWire('bank_unavailable', 'the gateway failed while serving the request'));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? '/';
    if (req.method !== 'POST') {
      send(res, 405, errorToWire('method_not_allowed', 'every endpoint takes POST'), { allow: 'POST' });
      req.resume();
      return;
    }
    const rawBody = await readBody(req);
    if (rawBody === 'aborted') return;
    if (rawBody === 'too_large') {
      send(res, 413, errorToWire('invalid_request', `the body is over ${MAX_REQUEST_BYTES} bytes`), {
        connection: 'close',
      });
      return;
    }
    const verdict = verifyGatewaySignature(
      {
        method: req.method,
        path,
        rawBody,
        timestampHeader: header(req, TIMESTAMP_HEADER),
        signatureHeader: header(req, SIGNATURE_HEADER),
      },
      options.secret,
      Date.now(),
      options.toleranceSeconds,
    );
    if (!verdict.ok) {
      send(res, 401, errorToWire('signature_invalid', verdict.reason));
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(rawBody.toString('utf8'));
    } catch {
      send(res, 400, errorToWire('invalid_request', 'the body is not JSON'));
      return;
    }

    if (path === '/_admin/faults') {
      try {
        faults = faultsFromWire(body);
      } catch (error) {
        send(res, 400, errorToWire('invalid_request', (error as Error).message));
        return;
      }
      send(res, 200, { faults: faultsToWire(faults) });
      return;
    }

    const route = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
    if (!route) {
      send(res, 404, errorToWire('not_found', `no endpoint ${path}`));
      return;
    }

    const current = faults;
    const latency = current.latencyMs ?? options.latencyMs ?? 0;
    if (latency > 0) {
      try {
        await sleep(latency, undefined, { signal: closing.signal });
      } catch {
        return; // closing
      }
    }
    const faulted =
      (current.error !== undefined || current.status !== undefined || current.hang === true) &&
      Math.random() < (current.rate ?? 1);
    if (faulted) {
      if (current.hang) return; // never answered; close() drops the connection
      if (current.error) {
        send(
          res,
          current.status ?? ERROR_STATUS[current.error],
          errorToWire(current.error, 'injected fault'),
        );
      } else {
        sendText(res, current.status!, 'injected fault');
      }
      return;
    }

    try {
      send(res, 200, await route(body, options.connector));
    } catch (error) {
      if (error instanceof WireFormatError) {
        send(res, 400, errorToWire('invalid_request', error.message));
      } else if (error instanceof ConnectorError) {
        send(res, ERROR_STATUS[error.code], errorToWire(error.code, error.message));
      } else {
        throw error;
      }
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}`,
    setFaults(next: GatewayFaults) {
      faults = validateFaults(next);
    },
    faults: () => ({ ...faults }),
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(',') : value;
}

/**
 * The request body; `too_large` past MAX_REQUEST_BYTES (the rest is read and dropped); `aborted` when the
 * client went away first.
 */
function readBody(req: IncomingMessage): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: Buffer | 'too_large' | 'aborted') => {
      if (done) return;
      done = true;
      resolve(result);
    };
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) finish('too_large');
      else chunks.push(chunk);
    });
    req.on('end', () => finish(Buffer.concat(chunks)));
    req.on('error', () => finish('aborted'));
    req.on('close', () => finish('aborted'));
  });
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
