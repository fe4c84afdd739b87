import { Agent, request, type Dispatcher } from 'undici';
import { systemClock, type Clock } from '../../clock/clock.js';
import type { BankConnectorSettings } from '../connector-settings.js';
import {
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type Connector,
  type ConnectorErrorCode,
  type DateWindow,
  type LoginRequest,
  type LoginResult,
  type MfaChallenge,
} from '../connector.js';
import { signatureHeaders } from './signature.js';
import {
  WireFormatError,
  accountsFromWire,
  challengeToWire,
  errorFromWire,
  isConnectorErrorCode,
  loginRequestToWire,
  loginResultFromWire,
  mfaResultFromWire,
  movementsFromWire,
  movementsRequestToWire,
  sessionToWire,
  toIsoTime,
} from './wire.js';

export interface HttpConnectorOptions {
  /**
   * The clock that stamps `Svc-Gateway-Timestamp`. It is the real clock, not the appliance's (possibly
   * moved) clock: the gateway checks the stamp against its own wall clock. The `now` fields of the bodies
   * carry the appliance's clock. Tests move this one to prove a stale request is refused.
   */
  wallClock?: Clock;
}

/**
 * A 2xx body is read up to 64 MiB (a backfill of several years of statement rows is tens of MB); an error
 * body up to 64 KiB, of which only the code and the first 300 characters of the message are kept.
 */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const MAX_MESSAGE_CHARS = 300;

/** undici's own deadlines (set to `timeoutMs` as well, as a second line behind the abort signal). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * The live-mode connector: a client of the HTTP connector protocol (docs/connector-protocol.md) for one bank.
 *
 * It uses `undici.request` on its own Agent rather than `fetch`, as the webhook dispatcher does (measured
 * 5x the throughput of `fetch` on this machine), with redirects never followed: a gateway that redirects is
 * misconfigured, and following one would send signed bank credentials to another host. Each call has one
 * deadline of `timeoutMs` covering connect, headers and body.
 */
export function createHttpConnector(
  config: BankConnectorSettings,
  bankId: string,
  options: HttpConnectorOptions = {},
): Connector {
  const base = new URL(config.url);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new TypeError(`banks.connectors.${bankId}.url must be an http or https URL`);
  }
  const origin = base.origin;
  const basePath = base.pathname.replace(/\/+$/, '');
  // Only the host is ever named in a message: a URL may carry user info.
  const where = `${bankId} gateway at ${base.host}`;
  const wallClock = options.wallClock ?? systemClock;
  // undici 7 follows no redirect unless asked (its redirect interceptor): a bank's 3xx is its answer.
  const agent = new Agent({
    connect: { timeout: config.timeoutMs },
    headersTimeout: config.timeoutMs,
    bodyTimeout: config.timeoutMs,
  });

  /** Never lets the shared secret or a password reach an error message, whatever the gateway echoes. */
  function redact(message: string, secrets: readonly string[]): string {
    let clean = message;
    for (const secret of [config.secret, ...secrets]) {
      if (secret) clean = clean.split(secret).join('[redacted]');
    }
    return clean;
  }

  function failure(code: ConnectorErrorCode, message: string, secrets: readonly string[]): ConnectorError {
    return new ConnectorError(code, redact(message, secrets));
  }

  async function send(
    endpoint: string,
    payload: unknown,
    secrets: readonly string[],
  ): Promise<{ status: number; body: Buffer | null }> {
    const path = `${basePath}${endpoint}`;
    const rawBody = Buffer.from(JSON.stringify(payload), 'utf8');
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), config.timeoutMs);
    try {
      const response = await request(`${origin}${path}`, {
        method: 'POST',
        dispatcher: agent,
        signal: controller.signal,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...signatureHeaders(config.secret, 'POST', path, rawBody, wallClock.now()),
        },
        body: rawBody,
      });
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      const body = await readCapped(response.body, ok ? MAX_BODY_BYTES : MAX_ERROR_BODY_BYTES);
      return { status: response.statusCode, body };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (controller.signal.aborted || (typeof code === 'string' && TIMEOUT_CODES.has(code))) {
        throw failure('timeout', `${where} did not answer within ${config.timeoutMs} ms`, secrets);
      }
      const reason = typeof code === 'string' ? code : (error as Error).name;
      throw failure('bank_unavailable', `${where} could not be reached (${reason})`, secrets);
    } finally {
      clearTimeout(timer);
    }
  }

  async function call<T>(
    endpoint: string,
    payload: unknown,
    decode: (body: unknown) => T,
    secrets: readonly string[] = [],
  ): Promise<T> {
    const { status, body } = await send(endpoint, payload, secrets);
    const text = body?.toString('utf8');
    let parsed: unknown = undefined;
    try {
      if (text !== undefined) parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }

    if (status >= 200 && status < 300) {
      if (body === null) {
        throw failure(
          'bank_unavailable',
          `${where} answered ${endpoint} with a body over the size limit`,
          secrets,
        );
      }
      if (parsed === undefined) {
        throw failure(
          'bank_unavailable',
          `${where} answered ${endpoint} with a body that is not JSON`,
          secrets,
        );
      }
      try {
        return decode(parsed);
      } catch (error) {
        if (!(error instanceof WireFormatError)) throw error;
        throw failure(
          'bank_unavailable',
          `${where} answered ${endpoint} with an invalid body: ${error.message}`,
          secrets,
        );
      }
    }

    const wireError = errorFromWire(parsed);
    // Redacted before it is cut short, so a secret across the cut cannot leak its first half.
    const detail = wireError ? sanitise(redact(wireError.message || wireError.code, secrets)) : '';
    if (status === 401) {
      // A configuration problem (wrong secret or a skewed clock), not a bank's answer about the credentials,
      // so it must never count towards expiring a link: bank_unavailable is retried and expires nothing.
      throw failure(
        'bank_unavailable',
        `${where} refused the request signature (401${detail ? `: ${detail}` : ''}); check that ` +
          `banks.connectors.${bankId}.secret matches the gateway's and that both clocks are right`,
        secrets,
      );
    }
    if (status >= 300 && status < 400) {
      throw failure(
        'bank_unavailable',
        `${where} answered a redirect (${status}), which is not followed`,
        secrets,
      );
    }
    if (wireError && isConnectorErrorCode(wireError.code)) {
      throw failure(wireError.code, `${bankId}: ${detail}`, secrets);
    }
    throw failure(
      'bank_unavailable',
      `${where} answered ${endpoint} with ${status}` +
        (wireError ? ` (${sanitise(redact(wireError.code, secrets))}: ${detail})` : ' and no error code'),
      secrets,
    );
  }

  return {
    login(request: LoginRequest): Promise<LoginResult> {
      return call('/v1/login', loginRequestToWire(bankId, request), loginResultFromWire, [
        request.credentials.password,
      ]);
    },

    submitMfa(request: LoginRequest, challenge: MfaChallenge, code: string): Promise<BankSession> {
      const payload = { ...loginRequestToWire(bankId, request), challenge: challengeToWire(challenge), code };
      return call('/v1/mfa', payload, mfaResultFromWire, [request.credentials.password]);
    },

    listAccounts(session: BankSession, now: number): Promise<BankAccount[]> {
      const payload = { bank_id: bankId, session: sessionToWire(session), now: toIsoTime(now) };
      return call('/v1/accounts', payload, accountsFromWire);
    },

    listMovements(
      session: BankSession,
      account: BankAccount,
      window: DateWindow,
      now: number,
    ): Promise<BankMovement[]> {
      return call(
        '/v1/movements',
        movementsRequestToWire(bankId, session, account, window, now),
        movementsFromWire,
      );
    },

    // Always present: whether a bank has statements is the gateway's to say (`unsupported`), and the
    // institution catalogue decides where backfill is offered at all.
    statements(
      session: BankSession,
      account: BankAccount,
      window: DateWindow,
      now: number,
    ): Promise<BankMovement[]> {
      return call(
        '/v1/statements',
        movementsRequestToWire(bankId, session, account, window, now),
        movementsFromWire,
      );
    },
  };
}

/** Reads a body up to `limit` bytes; null (and the rest discarded) past it. */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    size += buffer.length;
    if (size > limit) {
      body.destroy();
      return null;
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/** A gateway's message, one line and bounded, for an error message of ours. */
function sanitise(text: string): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return line.length > MAX_MESSAGE_CHARS ? `${line.slice(0, MAX_MESSAGE_CHARS)}…` : line;
}
